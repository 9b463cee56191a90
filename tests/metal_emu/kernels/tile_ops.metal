// Test kernels for the tile-op library (mlx_fused_attn/tile), run by
// tests/metal_emu/test_tile_ops.py in the Metal emulator and compared with
// plain host loops. One simdgroup per threadgroup unless a kernel says
// otherwise; every kernel is instantiated for several tile shapes.
//
// Matrices are row-major float32 unless named otherwise; `dims` carries the
// runtime sizes each kernel documents.

#include "mlx_fused_attn/tile/block_loader.h"
#include "mlx_fused_attn/tile/online_softmax.h"
#include "mlx_fused_attn/tile/ops.h"
#include "mlx_fused_attn/tile/simdgroup_frag.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/tile_math.h"

using namespace metal;

typedef fa::SimdgroupFrag Frag;

struct TileDims {
  int ld; ///< row stride of the source
  int lim_rows; ///< rows that exist (safe loads and stores)
  int lim_cols; ///< columns that exist
  int row0; ///< tile origin for tile_map_coords
  int col0;
  float fill; ///< what safe loads put where nothing exists
};

// dst (R*8 x C*8, dense) = load_device_safe(src): rows < lim_rows and cols <
// lim_cols read, the rest `fill`. Also converts from T.
template <typename T, int R, int C>
[[kernel]] void tile_load_safe(
    const device T* src [[buffer(0)]],
    device float* dst [[buffer(1)]],
    constant TileDims& dims [[buffer(2)]],
    uint lane [[thread_index_in_simdgroup]]) {
  fa::Tile<Frag, R, C> t;
  fa::tile_load_device_safe(
      t, src, dims.ld, dims.lim_rows, dims.lim_cols, dims.fill, lane);
  fa::tile_store_device(dst, t, fa::Tile<Frag, R, C>::kCols, lane);
}

// dst (row stride ld) = src (dense, R*8 x C*8) where rows < lim_rows and cols
// < lim_cols; the rest of dst untouched. Also converts to T.
template <typename T, int R, int C>
[[kernel]] void tile_store_safe(
    const device float* src [[buffer(0)]],
    device T* dst [[buffer(1)]],
    constant TileDims& dims [[buffer(2)]],
    uint lane [[thread_index_in_simdgroup]]) {
  fa::Tile<Frag, R, C> t;
  fa::tile_load_device(t, src, fa::Tile<Frag, R, C>::kCols, lane);
  fa::tile_store_device_safe(
      dst, t, dims.ld, dims.lim_rows, dims.lim_cols, lane);
}

// dst (R*8 x C*8) = src read through threadgroup memory, transposed when
// kTransposed: src is staged as a dense (R*8 x C*8) block, or as its
// (C*8 x R*8) transpose, and read back with the matching strides.
template <int R, int C, bool kTransposed>
[[kernel]] void tile_load_shared(
    const device float* src [[buffer(0)]],
    device float* dst [[buffer(1)]],
    uint lane [[thread_index_in_simdgroup]]) {
  typedef fa::Tile<Frag, R, C> TileT;
  constexpr int kRows = TileT::kRows;
  constexpr int kCols = TileT::kCols;
  FA_SHARED_ARRAY_DECL float smem[kRows * kCols];
  for (int i = lane; i < kRows * kCols; i += fa::kSimdWidth) {
    smem[i] = src[i];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  TileT t;
  if (kTransposed) {
    fa::tile_load_shared<1, kRows>(t, smem, lane);
  } else {
    fa::tile_load_shared<kCols, 1>(t, smem, lane);
  }
  fa::tile_store_device(dst, t, kCols, lane);
}

// For a dense (R*8 x C*8) src: max_out[r] = max(max_in[r], max of row r);
// sum_out[r] = sum_in[r] + sum of row r; dst = src * scale[r] per row, then
// + 1 everywhere (tile_scalar_op).
template <int R, int C>
[[kernel]] void tile_row_ops(
    const device float* src [[buffer(0)]],
    const device float* max_in [[buffer(1)]],
    const device float* sum_in [[buffer(2)]],
    const device float* scale [[buffer(3)]],
    device float* max_out [[buffer(4)]],
    device float* sum_out [[buffer(5)]],
    device float* dst [[buffer(6)]],
    uint lane [[thread_index_in_simdgroup]]) {
  typedef fa::Tile<Frag, R, C> TileT;
  TileT t;
  fa::tile_load_device(t, src, TileT::kCols, lane);
  float maxes[TileT::kRowSlots];
  float sums[TileT::kRowSlots];
  float scales[TileT::kRowSlots];
  for (int i = 0; i < R; ++i) {
    const int r = i * Frag::kRows + Frag::row(lane, 0);
    maxes[i] = max_in[r];
    sums[i] = sum_in[r];
    scales[i] = scale[r];
  }
  fa::row_reduce<fa::MaxOp>(maxes, t);
  fa::row_reduce<fa::SumOp>(sums, t);
  fa::row_bin_op<fa::MulOp>(t, scales);
  fa::tile_scalar_op<fa::SumOp>(t, 1.0f);
  for (int i = 0; i < R; ++i) {
    if (Frag::col(lane, 0) == 0) {
      const int r = i * Frag::kRows + Frag::row(lane, 0);
      max_out[r] = maxes[i];
      sum_out[r] = sums[i];
    }
  }
  fa::tile_store_device(dst, t, TileT::kCols, lane);
}

// d = a (M*8 x K*8) * b (K*8 x N*8) + c (M*8 x N*8), three ways:
// d_reg with b in registers (tile_matmad), d_shared with b streamed from
// threadgroup memory stored transposed (tile_matmad_shared), and d_operand
// with a first turned into an accumulator and back (tile_to_operand).
template <int M, int N, int K>
[[kernel]] void tile_matmad(
    const device float* a [[buffer(0)]],
    const device float* b [[buffer(1)]],
    const device float* c [[buffer(2)]],
    device float* d_reg [[buffer(3)]],
    device float* d_shared [[buffer(4)]],
    device float* d_operand [[buffer(5)]],
    uint lane [[thread_index_in_simdgroup]]) {
  typedef fa::Tile<Frag, M, K> TileA;
  typedef fa::Tile<Frag, K, N> TileB;
  typedef fa::Tile<Frag, M, N> TileC;
  constexpr int kK = TileA::kCols;
  constexpr int kN = TileB::kCols;
  FA_SHARED_ARRAY_DECL float bt[kK * kN];
  for (int i = lane; i < kK * kN; i += fa::kSimdWidth) {
    bt[(i % kN) * kK + i / kN] = b[i];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  TileA ta;
  TileB tb;
  TileC tc;
  TileC td;
  fa::tile_load_device(ta, a, kK, lane);
  fa::tile_load_device(tb, b, kN, lane);
  fa::tile_load_device(tc, c, kN, lane);

  fa::tile_matmad(td, ta, tb, tc);
  fa::tile_store_device(d_reg, td, kN, lane);

  fa::tile_load_device(td, c, kN, lane);
  fa::tile_matmad_shared<Frag, 1, kK>(td, ta, bt, lane);
  fa::tile_store_device(d_shared, td, kN, lane);

  fa::Tile<Frag, M, K> acc;
  fa::Tile<Frag, M, K> ta2;
  fa::tile_load_device(acc, a, kK, lane);
  fa::tile_to_operand(ta2, acc);
  fa::tile_matmad(td, ta2, tb, tc);
  fa::tile_store_device(d_operand, td, kN, lane);
}

struct CoordOp {
  float apply(float x, int r, int c) const {
    return x + 1000.0f * r + c;
  }
};

// dst (dense R*8 x C*8) = src + 1000 * row + col, with row and col counted
// from (row0, col0) at the tile origin.
template <int R, int C>
[[kernel]] void tile_map_coords(
    const device float* src [[buffer(0)]],
    device float* dst [[buffer(1)]],
    constant TileDims& dims [[buffer(2)]],
    uint lane [[thread_index_in_simdgroup]]) {
  typedef fa::Tile<Frag, R, C> TileT;
  TileT t;
  fa::tile_load_device(t, src, TileT::kCols, lane);
  const CoordOp op = {};
  fa::tile_map_coords(t, op, dims.row0, dims.col0, lane);
  fa::tile_store_device(dst, t, TileT::kCols, lane);
}

// BlockLoader with kThreads threads (whole simdgroups): copies a (kRows x
// kCols) block of src (row stride dims.ld) into threadgroup memory with row
// stride kCols + 4, load_safe keeping dims.lim_rows rows; then writes the
// staged block back densely to dst.
template <typename T, int kRows, int kCols, int kThreads, bool kSafe>
[[kernel]] void block_loader(
    const device T* src [[buffer(0)]],
    device T* dst [[buffer(1)]],
    constant TileDims& dims [[buffer(2)]],
    uint tid [[thread_index_in_threadgroup]]) {
  constexpr int kLd = kCols + 4;
  typedef fa::BlockLoader<T, kRows, kCols, kLd, kThreads> Loader;
  FA_SHARED_ARRAY_DECL T smem[kRows * kLd];
  if (kSafe) {
    Loader::load_safe(smem, src, dims.ld, dims.lim_rows, tid);
  } else {
    Loader::load(smem, src, dims.ld, tid);
  }
  Loader::wait();
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int i = tid; i < kRows * kCols; i += kThreads) {
    dst[i] = smem[(i / kCols) * kLd + i % kCols];
  }
}

// Online softmax over n_blocks score blocks s_b (each M*8 x N*8, stacked
// along columns in s, row stride n_blocks * N*8) with values v_b (N*8 x
// D*8, stacked along rows in v): o = softmax(s * score_scale) v computed
// block by block, with the running max starting at max0 and the running sum
// at sum0.
template <int M, int N, int D>
[[kernel]] void online_softmax(
    const device float* s [[buffer(0)]],
    const device float* v [[buffer(1)]],
    device float* o [[buffer(2)]],
    constant int& n_blocks [[buffer(3)]],
    constant float2& init [[buffer(4)]],
    constant float& score_scale [[buffer(5)]],
    uint lane [[thread_index_in_simdgroup]]) {
  typedef fa::Tile<Frag, M, N> TileS;
  typedef fa::Tile<Frag, N, D> TileV;
  typedef fa::Tile<Frag, M, D> TileO;
  TileS ts;
  TileV tv;
  TileO to;
  fa::Tile<Frag, M, N> tp;
  fa::OnlineSoftmax<TileS::kRowSlots> st;
  fa::softmax_init(st, init.x, init.y);
  fa::tile_fill(to, 0.0f);
  for (int b = 0; b < n_blocks; ++b) {
    fa::tile_load_device(
        ts, s + b * TileS::kCols, n_blocks * TileS::kCols, lane);
    fa::tile_load_device(
        tv, v + b * TileV::kRows * TileV::kCols, TileV::kCols, lane);
    fa::softmax_step(st, ts, to, score_scale);
    fa::tile_to_operand(tp, ts);
    fa::tile_matmad(to, tp, tv, to);
  }
  fa::softmax_finalize(to, st);
  fa::tile_store_device(o, to, TileO::kCols, lane);
}

#define FA_TEST_KERNEL(name, ...) \
  template [[host_name(name)]] [[kernel]] decltype(__VA_ARGS__) __VA_ARGS__;

#define FA_TILE_SHAPES(X) X(1, 1) X(2, 3) X(4, 2)

#define FA_LOAD_STORE(R, C)                                              \
  FA_TEST_KERNEL(                                                        \
      "tile_load_safe_float_" #R "x" #C, tile_load_safe<float, R, C>)    \
  FA_TEST_KERNEL(                                                        \
      "tile_load_safe_half_" #R "x" #C, tile_load_safe<half, R, C>)      \
  FA_TEST_KERNEL(                                                        \
      "tile_store_safe_float_" #R "x" #C, tile_store_safe<float, R, C>)  \
  FA_TEST_KERNEL(                                                        \
      "tile_store_safe_bfloat_" #R "x" #C, tile_store_safe<bfloat, R, C>) \
  FA_TEST_KERNEL(                                                        \
      "tile_load_shared_" #R "x" #C, tile_load_shared<R, C, false>)      \
  FA_TEST_KERNEL(                                                        \
      "tile_load_shared_t_" #R "x" #C, tile_load_shared<R, C, true>)     \
  FA_TEST_KERNEL("tile_row_ops_" #R "x" #C, tile_row_ops<R, C>)          \
  FA_TEST_KERNEL("tile_map_coords_" #R "x" #C, tile_map_coords<R, C>)
FA_TILE_SHAPES(FA_LOAD_STORE)

FA_TEST_KERNEL("tile_matmad_1x1x1", tile_matmad<1, 1, 1>)
FA_TEST_KERNEL("tile_matmad_2x3x4", tile_matmad<2, 3, 4>)
FA_TEST_KERNEL("tile_matmad_3x1x2", tile_matmad<3, 1, 2>)

FA_TEST_KERNEL("online_softmax_1x1x1", online_softmax<1, 1, 1>)
FA_TEST_KERNEL("online_softmax_2x4x3", online_softmax<2, 4, 3>)

FA_TEST_KERNEL(
    "block_loader_half_32x80_128", block_loader<half, 32, 80, 128, false>)
FA_TEST_KERNEL(
    "block_loader_half_32x80_128_safe", block_loader<half, 32, 80, 128, true>)
FA_TEST_KERNEL(
    "block_loader_float_16x128_128_safe",
    block_loader<float, 16, 128, 128, true>)
FA_TEST_KERNEL(
    "block_loader_float_16x32_64", block_loader<float, 16, 32, 64, false>)
