// Device-to-threadgroup block copy with plain loads: the Metal side of the
// global-to-shared seam (CUDA's counterpart, cp_async_loader.h, issues
// cp.async with the same interface). All threads of the threadgroup share
// the copy; each moves runs of kVec contiguous elements (16 bytes) so
// neighbouring threads touch neighbouring addresses.
//
// Loads are per element, not 16-byte vectors: q, k and v may be strided
// views whose rows are not 16-byte aligned.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// Copies a kRows x kCols row-major block (device row stride given at run
/// time, unit column stride) into threadgroup memory with row stride kDstLd.
/// Only the first kSrcCols columns exist in device memory; the others are
/// zero-filled (a head dim padded to whole fragments).
template <
    typename T,
    int kRows,
    int kCols,
    int kDstLd,
    int kThreads,
    int kSrcCols = kCols>
struct BlockLoader {
  FA_CONST int kVec = 16 / sizeof(T);
  static_assert(
      kCols % kVec == 0 && kSrcCols % kVec == 0,
      "block rows must be whole 16-byte runs");
  FA_CONST int kVecsPerRow = kCols / kVec;
  FA_CONST int kVecs = kRows * kVecsPerRow;
  FA_CONST int kSteps = (kVecs + kThreads - 1) / kThreads;
  /// A thread's loads return before it goes on (cp_async_loader.h's do not).
  FA_CONST bool kAsync = false;

  static FA_FUNC void
  load(FA_THREADGROUP T* dst, const FA_DEVICE T* src, stride_t ld, int tid) {
    FA_UNROLL
    for (int step = 0; step < kSteps; ++step) {
      const int idx = step * kThreads + tid;
      if (kVecs % kThreads == 0 || idx < kVecs) {
        const int r = idx / kVecsPerRow;
        const int c = (idx % kVecsPerRow) * kVec;
        FA_UNROLL
        for (int x = 0; x < kVec; ++x) {
          dst[r * kDstLd + c + x] =
              kSrcCols == kCols || c < kSrcCols ? src[r * ld + c + x] : T(0);
        }
      }
    }
  }

  /// As load, for a block of which only the first `rows` rows exist; the
  /// others are zero-filled, so that products with them stay finite.
  static FA_FUNC void load_safe(
      FA_THREADGROUP T* dst,
      const FA_DEVICE T* src,
      stride_t ld,
      int rows,
      int tid) {
    FA_UNROLL
    for (int step = 0; step < kSteps; ++step) {
      const int idx = step * kThreads + tid;
      if (kVecs % kThreads == 0 || idx < kVecs) {
        const int r = idx / kVecsPerRow;
        const int c = (idx % kVecsPerRow) * kVec;
        FA_UNROLL
        for (int x = 0; x < kVec; ++x) {
          const bool exists = r < rows && (kSrcCols == kCols || c < kSrcCols);
          dst[r * kDstLd + c + x] = exists ? src[r * ld + c + x] : T(0);
        }
      }
    }
  }

  /// As load, with a 32-bit row stride: each thread's source is one
  /// pointer, stepped from run to run (as MLX's steel loaders step theirs)
  /// instead of an offset computed in 64 bits for each (the feature
  /// stride32: every row offset must fit in an int).
  static FA_FUNC void load_stride32(
      FA_THREADGROUP T* dst,
      const FA_DEVICE T* src,
      int ld,
      int tid) {
    copy_stepped<false>(dst, src, ld, kRows, tid);
  }

  /// As load_safe, with a 32-bit row stride (load_stride32).
  static FA_FUNC void load_safe_stride32(
      FA_THREADGROUP T* dst,
      const FA_DEVICE T* src,
      int ld,
      int rows,
      int tid) {
    copy_stepped<true>(dst, src, ld, rows, tid);
  }

  /// Row r of the block alone, from `src` (its first column), its 16-byte
  /// pieces spread over kVecsPerRow neighbouring threads (`piece` is this
  /// one's): a gather of rows that are not one strided run. A row that does
  /// not `exist` is zero-filled.
  static FA_FUNC void load_row(
      FA_THREADGROUP T* dst,
      int r,
      const FA_DEVICE T* src,
      bool exists,
      int piece) {
    const int c = piece * kVec;
    FA_UNROLL
    for (int x = 0; x < kVec; ++x) {
      dst[r * kDstLd + c + x] =
          exists && (kSrcCols == kCols || c < kSrcCols) ? src[c + x] : T(0);
    }
  }

  /// Between two of a thread's runs lie kThreads runs: kRowStep rows and
  /// kRunStep runs more, one row more where the runs pass a row's end.
  FA_CONST int kRowStep = kThreads / kVecsPerRow;
  FA_CONST int kRunStep = kThreads % kVecsPerRow;

  /// The copy of load_stride32 (kSafe: rows at and past `rows` are
  /// zero-filled, not read).
  template <bool kSafe>
  static FA_FUNC void copy_stepped(
      FA_THREADGROUP T* dst,
      const FA_DEVICE T* src,
      int ld,
      int rows,
      int tid) {
    int r = tid / kVecsPerRow;
    int c = (tid % kVecsPerRow) * kVec;
    src += r * ld + c;
    FA_UNROLL
    for (int step = 0; step < kSteps; ++step) {
      if (step > 0) {
        r += kRowStep;
        c += kRunStep * kVec;
        src += kRowStep * ld + kRunStep * kVec;
        if (kRunStep != 0 && c >= kCols) {
          r += 1;
          c -= kCols;
          src += ld - kCols;
        }
      }
      if (kVecs % kThreads == 0 || step * kThreads + tid < kVecs) {
        const bool exists =
            (!kSafe || r < rows) && (kSrcCols == kCols || c < kSrcCols);
        FA_UNROLL
        for (int x = 0; x < kVec; ++x) {
          dst[r * kDstLd + c + x] = exists ? src[x] : T(0);
        }
      }
    }
  }

  /// Plain loads have landed when load returns, so there are no copies in
  /// flight to group or wait for. An asynchronous loader (cp_async_loader.h)
  /// groups the copies issued since the last commit, and wait<N> returns
  /// once at most N of this thread's groups are in flight.
  static FA_FUNC void commit() {}
  template <int kPending = 0>
  static FA_FUNC void wait() {}
};

} // namespace fa
