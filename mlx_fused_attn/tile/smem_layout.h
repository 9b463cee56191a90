// Where element (r, c) of a row-major block of kCols columns sits in
// threadgroup (shared) memory: the layouts a device-to-shared loader writes
// and the products read. Pure index arithmetic, the same on every backend.
//
// Both layouts keep each 16-byte run of a row contiguous, and both move by
// a constant when the row moves by kRowPeriod: a loader whose threads step
// over rows by multiples of it computes one address and adds a constant.
#pragma once

#include "mlx_fused_attn/tile/backend.h"

namespace fa {

/// Rows of kLd elements: kCols plus padding. Padding each row by 16 bytes
/// spreads the rows that one ldmatrix (or simdgroup load) reads over all the
/// banks, as MLX's steel kernels do.
template <int kLd>
struct PaddedRows {
  FA_CONST int kRowPeriod = 1;
  FA_CONST int kRowStep = kLd; ///< elements between rows r and r + 1

  static FA_FUNC int offset(int r, int c) {
    return r * kLd + c;
  }
};

/// The layout Hopper's warpgroup products (wgmma) read through a shared
/// memory descriptor: the block is cut into panels of kPanelCols columns
/// (kSwizzleBytes per row: 128, 64 or 32, the widest that divides a row),
/// each panel stored as its kRows rows back to back, and inside a panel the
/// 16-byte runs of row r are permuted by XOR with bits of r (CuTe's
/// Swizzle<log2(kSwizzleBytes / 16), 4, 3>), so that the 8 rows of a core
/// matrix fall in different banks without padding. The pattern repeats every
/// 8 rows; a panel must start at a multiple of 8 * kSwizzleBytes bytes (the
/// caller keeps the block 1024-byte aligned).
template <typename T, int kRows, int kCols>
struct SwizzledRows {
  FA_CONST int kRowBytes = kCols * int(sizeof(T));
  FA_CONST int kSwizzleBytes = kRowBytes % 128 == 0 ? 128
      : kRowBytes % 64 == 0                          ? 64
                                                     : 32;
  FA_CONST int kPanelCols = kSwizzleBytes / int(sizeof(T));
  FA_CONST int kPanels = kCols / kPanelCols;
  FA_CONST int kPanelElems = kRows * kPanelCols;
  FA_CONST int kRowPeriod = 8;
  FA_CONST int kRowStep = kPanelCols;

  static_assert(kRowBytes % 32 == 0, "rows must be whole 32-byte units");
  static_assert(kRows % 8 == 0, "panels hold whole 8-row swizzle atoms");

  static FA_FUNC int offset(int r, int c) {
    const int panel = c / kPanelCols;
    int byte = r * kSwizzleBytes + (c % kPanelCols) * int(sizeof(T));
    byte ^= (byte >> 3) & ((kSwizzleBytes / 16 - 1) << 4);
    return panel * kPanelElems + byte / int(sizeof(T));
  }
};

} // namespace fa
