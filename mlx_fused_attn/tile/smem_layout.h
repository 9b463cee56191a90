// Where element (r, c) of a row-major block of kCols columns sits in
// threadgroup (shared) memory: the layouts a device-to-shared loader writes
// and the products read. Pure index arithmetic, the same on every backend.
//
// Both layouts keep each 16-byte run of a row contiguous, and both move by
// a constant when the row moves by kRowPeriod: a loader whose threads step
// over rows by multiples of it computes one address and adds a constant.
#pragma once

#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// Rows of kLd elements: kCols plus padding. Padding each row by 16 bytes
/// spreads the rows that one ldmatrix (or simdgroup load) reads over all the
/// banks, as MLX's steel kernels do.
template <typename T, int kLd>
struct PaddedRows {
  FA_CONST int kRowPeriod = 1;
  static_assert(kLd * int(sizeof(T)) % 16 == 0, "rows must stay 16-byte aligned");

  static FA_FUNC int offset(int r, int c) {
    return r * kLd + c;
  }
  /// Elements between rows r and r + 1 at column c.
  static FA_FUNC int row_step(int) {
    return kLd;
  }
};

/// The layout Hopper's warpgroup products (wgmma) read through shared
/// memory descriptors: the block is cut into column panels, as many 128-byte
/// wide ones as fit and then a 64- or 32-byte tail (D = 96 and 80 in 16-bit
/// types), each panel stored as its kRows rows back to back; inside a panel
/// the 16-byte runs of row r are permuted by XOR with bits of r (CuTe's
/// Swizzle<log2(width / 16), 4, 3>), so that the 8 rows of a core matrix
/// fall in different banks without padding. The pattern repeats every 8
/// rows; a panel must start at a multiple of 8 * its width (the caller keeps
/// the block 1024-byte aligned, and every panel is 8-row multiples of 128 B).
/// 128-byte panels are the widest swizzle: with a block of 32-byte panels
/// (D = 80 throughout) the products ran 12% slower than mma.sync's.
template <typename T, int kRows, int kCols>
struct SwizzledRows {
  FA_CONST int kWideCols = 128 / int(sizeof(T)); ///< columns of a wide panel
  FA_CONST int kWidePanels = kCols / kWideCols;
  FA_CONST int kTailCols = kCols % kWideCols;
  FA_CONST int kRowPeriod = 8;

  static_assert(
      kTailCols * int(sizeof(T)) == 0 || kTailCols * int(sizeof(T)) == 32 ||
          kTailCols * int(sizeof(T)) == 64,
      "a tail panel must be 32 or 64 bytes wide");
  static_assert(kRows % 8 == 0, "panels hold whole 8-row swizzle atoms");

  /// The width in bytes (= the swizzle) of the panel holding column c.
  static FA_FUNC int panel_bytes(int c) {
    return (c < kWidePanels * kWideCols ? kWideCols : kTailCols) *
        int(sizeof(T));
  }
  /// The first element of the panel holding column c.
  static FA_FUNC int panel_start(int c) {
    return (c / kWideCols) * kRows * kWideCols;
  }

  static FA_FUNC int offset(int r, int c) {
    const int width = panel_bytes(c);
    int byte = r * width + (c % kWideCols) * int(sizeof(T));
    byte ^= (byte >> 3) & ((width / 16 - 1) << 4);
    return panel_start(c) + byte / int(sizeof(T));
  }
  static FA_FUNC int row_step(int c) {
    return panel_bytes(c) / int(sizeof(T));
  }
};

} // namespace fa
