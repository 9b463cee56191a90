// Device-to-shared block copy with cp.async: the CUDA side of the
// global-to-shared seam (Metal's BlockLoader has the same interface). Each
// thread issues 16-byte asynchronous copies that bypass the registers and
// L1; commit() closes the copies issued since the last commit into a group,
// and wait<N>() returns once at most N of this thread's groups are still in
// flight. That lets a kernel keep N blocks in flight while it computes on an
// older one (attention.h's stages).
//
// Needs 16-byte aligned rows at both ends: the host copies inputs whose rows
// are not (backend/cuda). The shared side is laid out by `Layout`
// (smem_layout.h): padded rows for the per-warp fragments, swizzled panels
// for Hopper's warpgroup products; both keep 16-byte runs whole.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/smem_layout.h"

namespace fa {

/// Only the first kSrcCols of the kCols columns exist in device memory; the
/// others are zero-filled (a head dim padded to whole fragments), as copies
/// of source size 0 that read nothing.
template <
    typename T,
    int kRows,
    int kCols,
    typename Layout,
    int kThreads,
    int kSrcCols = kCols>
struct CpAsyncLoader {
  FA_CONST int kVec = 16 / sizeof(T);
  static_assert(
      kCols % kVec == 0 && kSrcCols % kVec == 0,
      "block rows must be whole 16-byte runs");
  FA_CONST int kVecsPerRow = kCols / kVec;
  FA_CONST int kVecs = kRows * kVecsPerRow;
  FA_CONST int kSteps = (kVecs + kThreads - 1) / kThreads;
  /// The copies run on while the thread goes on (block_loader.h's do not).
  FA_CONST bool kAsync = true;
  /// When the threads cover whole rows per step, a thread copies the same
  /// 16-byte column run of rows r0, r0 + kRowsPerStep, ...: one base address
  /// and a constant 64-bit step, instead of a row index, a 64-bit multiply
  /// and an add per copy (that index math was 12 of every 13 instructions
  /// of a K/V block's copy in the D = 128 kernel's SASS). The shared side
  /// then moves by a constant too, if the step is whole layout periods.
  FA_CONST int kRowsPerStep = kThreads / kVecsPerRow;
  FA_CONST bool kWholeRowSteps = kThreads % kVecsPerRow == 0 &&
      kRowsPerStep % Layout::kRowPeriod == 0;

  static FA_FUNC void load(T* dst, const T* src, stride_t ld, int tid) {
    load_rows<false>(dst, src, ld, kRows, tid);
  }

  /// As load, for a block of which only the first `rows` rows exist: the
  /// others read nothing and are zero-filled (cp.async's source size 0), so
  /// that products with them stay finite.
  static FA_FUNC void
  load_safe(T* dst, const T* src, stride_t ld, int rows, int tid) {
    load_rows<true>(dst, src, ld, rows, tid);
  }

  /// Row r of the block alone, from `src` (its first column), its 16-byte
  /// pieces spread over kVecsPerRow neighbouring threads (`piece` is this
  /// one's): a gather of rows that are not one strided run. A row that does
  /// not `exist` reads nothing and is zero-filled.
  static FA_FUNC void
  load_row(T* dst, int r, const T* src, bool exists, int piece) {
    const int c = piece * kVec;
    const bool col_exists = kSrcCols == kCols || c < kSrcCols;
    copy16(
        dst + Layout::offset(r, c),
        src + (col_exists ? c : 0),
        exists && col_exists ? 16 : 0);
  }

  static FA_FUNC void commit() {
    asm volatile("cp.async.commit_group;\n" ::);
  }

  template <int kPending = 0>
  static FA_FUNC void wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
  }

 private:
  /// With kSafe, rows >= `rows` are zero-filled, their (unread) source
  /// address set to the block's first row; so are the columns past
  /// kSrcCols, their source address set to the row's first column.
  template <bool kSafe>
  static FA_FUNC void
  load_rows(T* dst, const T* src, stride_t ld, int rows, int tid) {
    if constexpr (kWholeRowSteps) {
      const int r0 = tid / kVecsPerRow;
      const int c = (tid % kVecsPerRow) * kVec;
      const bool col_exists = kSrcCols == kCols || c < kSrcCols;
      const T* first_row = src + (col_exists ? c : 0);
      dst += Layout::offset(r0, c);
      src = first_row + r0 * ld;
      const stride_t src_step = kRowsPerStep * ld;
      FA_UNROLL
      for (int step = 0; step < kSteps; ++step) {
        const int r = r0 + step * kRowsPerStep;
        if (kRows % kRowsPerStep == 0 || r < kRows) {
          const bool exists = !kSafe || r < rows;
          copy16(
              dst + step * kRowsPerStep * Layout::row_step(c),
              exists ? src : first_row,
              exists && col_exists ? 16 : 0);
        }
        src += src_step;
      }
    } else {
      FA_UNROLL
      for (int step = 0; step < kSteps; ++step) {
        const int idx = step * kThreads + tid;
        if (kVecs % kThreads == 0 || idx < kVecs) {
          const int r = idx / kVecsPerRow;
          const int c = (idx % kVecsPerRow) * kVec;
          const bool exists = !kSafe || r < rows;
          const bool col_exists = kSrcCols == kCols || c < kSrcCols;
          copy16(
              dst + Layout::offset(r, c),
              src + (exists ? r : 0) * ld + (col_exists ? c : 0),
              exists && col_exists ? 16 : 0);
        }
      }
    }
  }

  static FA_FUNC void copy16(T* dst, const T* src, int src_bytes) {
    asm volatile(
        "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
            static_cast<unsigned>(__cvta_generic_to_shared(dst))),
        "l"(src),
        "r"(src_bytes));
  }
};

} // namespace fa
