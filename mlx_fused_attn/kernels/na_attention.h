// The fused neighborhood-attention kernel body (NATTEN's na1d / na2d / na3d;
// the geometry is na_window.h), written once over the tile ops, like the
// main attention kernel (attention.h), for Metal and CUDA:
//
//   O[i] = softmax_j(scale * Q[i] K[j]^T) V[j]   over the keys j in the
//                                                neighborhood of query i
//
// One threadgroup owns a query tile inside one dilation group of every axis
// (kernels/na_grid.h): its warps' rows run along the fastest axis in use,
// the warps spread over the others, so a 2-D or 3-D tile stays compact. The
// tile visits only its key box, the product over the axes of the union of
// its queries' windows, in indices of the same dilation groups: the box is
// dense, with no key of another group in it. The box's keys, row-major, are
// gathered kBK at a time into threadgroup memory (one row copy per key:
// box keys are not one strided run); each score gets the neighborhood mask
// (-inf outside the query's window on some axis); the softmax is online, as
// in the main kernel; the output is written once. A warp skips the blocks
// that hold no key of its own queries' windows. In 1-D a threadgroup may
// instead take a run of consecutive tiles (na_attention_run_1d), streaming
// their keys through a ring of blocks one tile ahead of the math.
//
// `Target` supplies the fragment types by role and the device-to-threadgroup
// loader; kNdim is the number of spatial axes (NaParams::n_axes).
#pragma once

#include "mlx_fused_attn/kernels/attention.h"
#include "mlx_fused_attn/kernels/na_grid.h"
#include "mlx_fused_attn/na_params.h"
#include "mlx_fused_attn/na_window.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/backend.h"
#include "mlx_fused_attn/tile/online_softmax.h"
#include "mlx_fused_attn/tile/ops.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

/// The coordinate given to keys past the end of the box: inside no window.
enum { kNaOutsideBox = -(1 << 30) };

FA_FUNC int na_min(int a, int b) {
  return a < b ? a : b;
}

FA_FUNC NaAxis na_axis(const FA_CONSTANT NaParams& p, int a) {
  NaAxis x = {p.axes[a].n, p.axes[a].k, p.axes[a].d, p.axes[a].causal};
  return x;
}

/// The keys a query tile visits, in indices of the tile's dilation groups:
/// along each axis the union of its queries' windows. Key i of the box is
/// its row-major index (fastest axis last).
template <int kNdim>
struct NaKeyBox {
  int first[kNdim]; ///< the box's first group index along each axis
  int side[kNdim]; ///< its length along each axis
  int count; ///< keys in the box
  /// Elements between keys one group index apart along each axis.
  stride_t k_step[kNdim];
  stride_t v_step[kNdim];
};

/// The neighborhood as an element op for tile_map_coords: the score of row
/// r of the warp and key c of the box stays if the key lies in the query's
/// window on every axis, and is -inf otherwise (no neighbour: it gets no
/// weight; every query has its window's keys in the box, so no row is left
/// empty). Windows on the warp's row axis are computed per row (the
/// compiler shares them across a row's columns); on the other axes the warp
/// has one query, so one window.
template <int kNdim, int kBK>
struct NaMaskOp {
  NaAxis axis; ///< the fastest axis in use, along which the rows run
  int m; ///< the length of the tile's dilation group along it
  int row0; ///< group index of the warp's row 0 along it
  int box0; ///< the box's first group index along it
  /// Axes a < kNdim - 1: the warp's window, relative to the box.
  int lo[kNdim];
  int count[kNdim];
  /// kNdim > 1: per axis, the box coordinates of this block's keys
  /// (na_load_kv_block); 1-D keys are their own coordinate.
  const FA_THREADGROUP int* coords;
  int key0; ///< box index of the block's first key

  FA_FUNC float apply(float s, int r, int c) const {
    // Rows past the group (a ragged tile) take its last query's window;
    // they are not stored.
    const NaWindow w = na_group_window(axis, m, na_min(row0 + r, m - 1));
    const int x = kNdim == 1 ? c : coords[(kNdim - 1) * kBK + c - key0];
    bool in = static_cast<unsigned>(x + box0 - w.first) <
        static_cast<unsigned>(w.count);
    FA_UNROLL
    for (int a = 0; a + 1 < kNdim; ++a) {
      in = in &&
          static_cast<unsigned>(coords[a * kBK + c - key0] - lo[a]) <
              static_cast<unsigned>(count[a]);
    }
    return in ? s : -FA_INFINITY;
  }
};

/// Starts the copy of key block `kb` (box keys kb * kBK onwards) into K and
/// V stage `stage`, and (kNdim > 1) writes the keys' box coordinates for the
/// mask. Each row, one key's head-dim run, is a one-row block for the
/// target's loader, its 16-byte pieces spread over neighbouring threads as a
/// block copy spreads them; keys past the box are zero-filled (products with
/// them stay finite) and get coordinates in no window.
template <typename Target, typename Shape, int kNdim>
FA_FUNC void na_load_kv_block(
    FA_THREADGROUP typename Shape::elem_type* k_smem,
    FA_THREADGROUP typename Shape::elem_type* v_smem,
    FA_THREADGROUP int* coords,
    const FA_DEVICE typename Shape::elem_type* k,
    const FA_DEVICE typename Shape::elem_type* v,
    const FA_THREAD NaKeyBox<kNdim>& box,
    int kb,
    int stage,
    int tid) {
  typedef typename Shape::elem_type T;
  constexpr int kBK = Shape::kBK;
  constexpr int kLd = Shape::kSmemLd;
  constexpr int kRowThreads = Shape::kHeadDim * int(sizeof(T)) / 16;
  constexpr int kRowsPerPass = Shape::kThreads / kRowThreads;
  constexpr int kPasses = (kBK + kRowsPerPass - 1) / kRowsPerPass;
  static_assert(
      Shape::kThreads % kRowThreads == 0,
      "a key row's 16-byte pieces must split evenly over the threads");
  typedef typename Target::template Loader<T, 1, Shape::kHeadDim, kLd, kRowThreads>
      RowLoader;

  k_smem += stage * Shape::kStageElems;
  v_smem += stage * Shape::kStageElems;
  coords += stage * kNdim * kBK;
  const int piece = tid % kRowThreads;
  FA_UNROLL
  for (int pass = 0; pass < kPasses; ++pass) {
    const int r = pass * kRowsPerPass + tid / kRowThreads;
    if (kBK % kRowsPerPass != 0 && r >= kBK) {
      continue;
    }
    const int key = kb * kBK + r;
    if (key < box.count) {
      int c[kNdim];
      int rest = key;
      stride_t k_off = 0;
      stride_t v_off = 0;
      FA_UNROLL
      for (int i = 0; i < kNdim; ++i) {
        const int a = kNdim - 1 - i;
        c[a] = a == 0 ? rest : rest % box.side[a];
        rest = a == 0 ? 0 : rest / box.side[a];
        k_off += c[a] * box.k_step[a];
        v_off += c[a] * box.v_step[a];
      }
      RowLoader::load(k_smem + r * kLd, k + k_off, 0, piece);
      RowLoader::load(v_smem + r * kLd, v + v_off, 0, piece);
      if (kNdim > 1 && piece == 0) {
        FA_UNROLL
        for (int a = 0; a < kNdim; ++a) {
          coords[a * kBK + r] = c[a];
        }
      }
    } else {
      RowLoader::load_safe(k_smem + r * kLd, k, 0, 0, piece);
      RowLoader::load_safe(v_smem + r * kLd, v, 0, 0, piece);
      if (kNdim > 1 && piece == 0) {
        FA_UNROLL
        for (int a = 0; a < kNdim; ++a) {
          coords[a * kBK + r] = kNaOutsideBox;
        }
      }
    }
  }
}

/// o /= row sum, as one reciprocal a row slot and a multiply an element. A
/// division an element is an IEEE division on CUDA (about 15 instructions
/// with its slow-path check): with the 32 output elements of a lane it cost
/// a 1-D tile about as many instructions as a key block's whole step
/// (the SASS, docs/gpu_kernels.md). A row whose every score was -inf has sum 0
/// and becomes NaN, as with the division (no neighborhood row is empty).
template <typename OTile, int kSlots>
FA_FUNC void na_finalize(
    FA_THREAD OTile& o,
    const FA_THREAD OnlineSoftmax<kSlots>& st) {
  float inv[kSlots];
  FA_UNROLL
  for (int i = 0; i < kSlots; ++i) {
    inv[i] = 1.0f / st.row_sum[i];
  }
  row_bin_op<MulOp>(o, inv);
}

/// One key block for a warp: S = Q K^T, the neighborhood mask, the online
/// softmax step, O += P V. `k_block` and `v_block` hold box keys key0
/// onwards, a key per row.
template <
    typename FragB,
    int kLd,
    typename QTile,
    typename STile,
    typename PTile,
    typename OTile,
    typename Softmax,
    typename Mask,
    typename T>
FA_FUNC void na_block_step(
    const FA_THREAD QTile& q_tile,
    FA_THREAD STile& s_tile,
    FA_THREAD PTile& p_tile,
    FA_THREAD OTile& o_tile,
    FA_THREAD Softmax& softmax,
    FA_THREAD Mask& mask,
    const FA_THREADGROUP T* k_block,
    const FA_THREADGROUP T* v_block,
    int key0,
    float scale_log2,
    bool fold_scale,
    bool needs_mask,
    lane_t lane) {
  // ------------------------------------------------------- S = Q K^T
  // K is stored a key per row, so K^T is read with swapped strides.
  tile_fill(s_tile, 0.0f);
  tile_matmad_shared<FragB, 1, kLd>(s_tile, q_tile, k_block, lane);
  if (!fold_scale) {
    tile_scalar_op<MulOp>(s_tile, scale_log2);
  }

  // ------------------------------------------------------------ mask
  // (none for a block inside every one of the warp's windows)
  if (needs_mask) {
    mask.key0 = key0;
    tile_map_coords(s_tile, mask, 0, key0, lane);
  }

  // --------------------------------------------------------- softmax
  softmax_step(softmax, s_tile, o_tile, fold_scale ? scale_log2 : 1.0f);

  // ------------------------------------------------------------ P V
  tile_to_operand(p_tile, s_tile);
  tile_matmad_shared<FragB, kLd, 1>(o_tile, p_tile, v_block, lane);
}

/// Loads a warp's kWarpRows query rows from `first` (an index of the
/// dilation group of length m) into `t`, zero rows past the group.
template <int kWarpRows, int D, typename QTile, typename T>
FA_FUNC void na_load_q(
    FA_THREAD QTile& t,
    const FA_DEVICE T* q_group,
    stride_t q_ld,
    int first,
    int m,
    lane_t lane) {
  const int rows = m - first;
  if (rows >= kWarpRows) {
    tile_load_device(t, q_group + first * q_ld, q_ld, lane);
  } else {
    tile_load_device_safe(
        t, q_group + na_min(first, m - 1) * q_ld, q_ld, rows > 0 ? rows : 0, D,
        0.0f, lane);
  }
}

/// The key blocks of a 1-D query tile in a run: blocks lo .. hi of the
/// run's key ring (na_attention_run_1d).
struct NaRingTile {
  int q0; ///< the tile's first query, in indices of its dilation group
  int lo; ///< ring block of its box's first key
  int hi; ///< ring block of its box's last key
};

FA_FUNC NaRingTile
na_ring_tile(NaAxis axis, int m, int extent, int base, int kBK, int tile) {
  NaRingTile t;
  t.q0 = tile * extent;
  const NaWindow u =
      na_union_window(axis, m, t.q0, na_min(t.q0 + extent, m) - 1);
  t.lo = (u.first - base) / kBK;
  t.hi = (u.first + u.count - 1 - base) / kBK;
  return t;
}

/// 1-D, a run of consecutive query tiles of one dilation group
/// (grid.run > 1): the threadgroup streams the group's keys from the run's
/// first box on through a ring of kStages key blocks (ring block b: keys
/// base + b * kBK onwards, in stage b % kStages), and starts the copies of
/// the next tile's new blocks, and its Q, before it computes the current
/// tile, so that loads stay in flight through the math. Consecutive boxes
/// overlap by k - 1 keys; their shared blocks are loaded once. Per tile: a
/// wait and a barrier (the tile's blocks have landed; every warp is done
/// with the previous tile, whose stages the next copies refill), then the
/// copies of the next tile's blocks that fit beside the current box (a
/// block that does not, at a border where boxes shift unevenly, is copied
/// at the top of its own tile, behind one more barrier). The host
/// (na_run_for) makes a box at most kStages - 1 blocks. Metal's loads are
/// synchronous: the same phases run in turn, into stages no warp reads.
template <typename Target, typename Shape>
FA_FUNC void na_attention_run_1d(
    const FA_DEVICE typename Shape::elem_type* q,
    const FA_DEVICE typename Shape::elem_type* k,
    const FA_DEVICE typename Shape::elem_type* v,
    FA_DEVICE typename Shape::elem_type* out,
    const FA_CONSTANT NaParams& p,
    const FA_CONSTANT NaGrid& grid,
    FA_THREADGROUP typename Shape::elem_type* k_smem,
    FA_THREADGROUP typename Shape::elem_type* v_smem,
    FA_THREADGROUP int* coords,
    int block,
    int head,
    int batch,
    int warp,
    lane_t lane) {
  typedef typename Shape::elem_type T;
  typedef typename Target::template FragA<T> FragA;
  typedef typename Target::template FragB<T> FragB;
  typedef typename Target::FragC FragC;
  constexpr int D = Shape::kHeadDim;
  constexpr int kBK = Shape::kBK;
  constexpr int kWarpRows = Shape::kWarpRows;
  constexpr int kLd = Shape::kSmemLd;
  constexpr int kStages = Shape::kStages;
  typedef typename Target::template Loader<T, kBK, D, kLd, Shape::kThreads>
      Loader;

  Tile<FragA, kWarpRows / FragA::kRows, D / FragA::kCols> q_tile;
  Tile<FragA, kWarpRows / FragA::kRows, D / FragA::kCols> q_next;
  Tile<FragC, kWarpRows / FragC::kRows, kBK / FragC::kCols> s_tile;
  Tile<FragA, kWarpRows / FragA::kRows, kBK / FragA::kCols> p_tile;
  Tile<FragC, kWarpRows / FragC::kRows, D / FragC::kCols> o_tile;
  OnlineSoftmax<decltype(s_tile)::kRowSlots> softmax;
  const int tid = warp * kSimdWidth + lane;

  // ------------------------------------------------------------ the run
  const NaAxis axis = na_axis(p, 0);
  const int extent = grid.extent[0];
  const int runs = (grid.tiles[0] + grid.run - 1) / grid.run;
  const int group = block / runs;
  const int m = na_group_length(axis.n, axis.d, group);
  const int tile_first = (block % runs) * grid.run;
  const int tile_end =
      na_min(tile_first + grid.run, (m + extent - 1) / extent);
  if (tile_first >= tile_end) {
    return;
  }
  const stride_t q_ld = axis.d * p.q_strides[1];
  const stride_t o_ld = axis.d * p.o_strides[1];
  const FA_DEVICE T* q_group =
      q + batch * p.q_strides[0] + head * p.q_strides[4] + group * p.q_strides[1];
  FA_DEVICE T* o_group = out + batch * p.o_strides[0] +
      head * p.o_strides[4] + group * p.o_strides[1];

  // The ring's keys: the group's, from the first box's first key to the
  // group's end (keys past it are zero-filled and in no window).
  const int base =
      na_union_window(axis, m, tile_first * extent,
                      na_min(tile_first * extent + extent, m) - 1)
          .first;
  NaKeyBox<1> keys;
  keys.first[0] = base;
  keys.side[0] = m - base;
  keys.count = m - base;
  keys.k_step[0] = axis.d * p.k_strides[1];
  keys.v_step[0] = axis.d * p.v_strides[1];
  const FA_DEVICE T* k_keys = k + batch * p.k_strides[0] +
      head * p.k_strides[4] + (group + base * axis.d) * p.k_strides[1];
  const FA_DEVICE T* v_keys = v + batch * p.v_strides[0] +
      head * p.v_strides[4] + (group + base * axis.d) * p.v_strides[1];

  NaMaskOp<1, kBK> mask;
  mask.axis = axis;
  mask.m = m;
  mask.box0 = base;
  mask.coords = coords;
  const bool fold_scale = p.scale_log2 > 0.0f;

  // ------------------------------------------- the first tile's K, V and Q
  NaRingTile cur = na_ring_tile(axis, m, extent, base, kBK, tile_first);
  for (int b = cur.lo; b <= cur.hi; ++b) {
    na_load_kv_block<Target, Shape, 1>(
        k_smem, v_smem, coords, k_keys, v_keys, keys, b, b % kStages, tid);
  }
  Loader::commit();
  int next = cur.hi + 1; // the first ring block not yet copied
  na_load_q<kWarpRows, D>(
      q_tile, q_group, q_ld, cur.q0 + warp * kWarpRows, m, lane);

  for (int t = tile_first; t < tile_end; ++t) {
    // ----------------------------------------- this tile's blocks, landed
    if (next <= cur.hi) {
      // Copies that did not fit beside the previous box: their stages are
      // free once every warp is done with it.
      FA_BARRIER();
      for (int b = next; b <= cur.hi; ++b) {
        na_load_kv_block<Target, Shape, 1>(
            k_smem, v_smem, coords, k_keys, v_keys, keys, b, b % kStages,
            tid);
      }
      Loader::commit();
      next = cur.hi + 1;
    }
    Loader::template wait<0>();
    FA_BARRIER();

    // ------------------------- the next tile's new blocks and Q, in flight
    NaRingTile nxt = cur;
    if (t + 1 < tile_end) {
      nxt = na_ring_tile(axis, m, extent, base, kBK, t + 1);
      const int stop = na_min(nxt.hi, cur.lo + kStages - 1);
      for (int b = next; b <= stop; ++b) {
        na_load_kv_block<Target, Shape, 1>(
            k_smem, v_smem, coords, k_keys, v_keys, keys, b, b % kStages,
            tid);
      }
      next = stop + 1 > next ? stop + 1 : next;
      Loader::commit();
      na_load_q<kWarpRows, D>(
          q_next, q_group, q_ld, nxt.q0 + warp * kWarpRows, m, lane);
    }

    // ------------------------------------------------------ the warp
    const int wq = cur.q0 + warp * kWarpRows;
    const int q_rows = wq < m ? na_min(kWarpRows, m - wq) : 0;
    // Ring keys this warp's windows reach: key_first .. key_last; those in
    // all of them (windows move right with the query: from the last row's
    // window start to the first row's window end): inner_first ..
    // inner_last. Rows past the group take the last query's window.
    int key_first = 0;
    int key_last = -1;
    int inner_first = 0;
    int inner_last = -1;
    if (q_rows > 0) {
      const NaWindow w0 = na_group_window(axis, m, wq);
      const NaWindow w1 = na_group_window(axis, m, wq + q_rows - 1);
      key_first = w0.first - base;
      key_last = w1.first + w1.count - 1 - base;
      inner_first = w1.first - base;
      inner_last = w0.first + w0.count - 1 - base;
    }
    mask.row0 = wq;

    // --------------------------------------------------- the tile's math
    softmax_init(softmax, -FA_FLT_MAX, 0.0f);
    tile_fill(o_tile, 0.0f);
    for (int b = cur.lo; b <= cur.hi; ++b) {
      const int key0 = b * kBK;
      if (key0 > key_last || key0 + kBK <= key_first) {
        continue;
      }
      na_block_step<FragB, kLd>(
          q_tile, s_tile, p_tile, o_tile, softmax, mask,
          k_smem + (b % kStages) * Shape::kStageElems,
          v_smem + (b % kStages) * Shape::kStageElems, key0, p.scale_log2,
          fold_scale, key0 < inner_first || key0 + kBK - 1 > inner_last,
          lane);
    }

    // ----------------------------------------------------------- store
    na_finalize(o_tile, softmax);
    if (q_rows >= kWarpRows) {
      tile_store_device(o_group + wq * o_ld, o_tile, o_ld, lane);
    } else if (q_rows > 0) {
      tile_store_device_safe(o_group + wq * o_ld, o_tile, o_ld, q_rows, D, lane);
    }
    q_tile = q_next;
    cur = nxt;
  }
}

/// The run path exists for 1-D only (other axis counts compile nothing of
/// it, so that it costs their kernels no registers).
template <bool kOneAxis>
struct NaRunPath {
  template <typename Target, typename Shape, typename T>
  FA_FUNC static void run(
      const FA_DEVICE T*,
      const FA_DEVICE T*,
      const FA_DEVICE T*,
      FA_DEVICE T*,
      const FA_CONSTANT NaParams&,
      const FA_CONSTANT NaGrid&,
      FA_THREADGROUP T*,
      FA_THREADGROUP T*,
      FA_THREADGROUP int*,
      int,
      int,
      int,
      int,
      lane_t) {}
};

template <>
struct NaRunPath<true> {
  template <typename Target, typename Shape, typename T>
  FA_FUNC static void run(
      const FA_DEVICE T* q,
      const FA_DEVICE T* k,
      const FA_DEVICE T* v,
      FA_DEVICE T* out,
      const FA_CONSTANT NaParams& p,
      const FA_CONSTANT NaGrid& grid,
      FA_THREADGROUP T* k_smem,
      FA_THREADGROUP T* v_smem,
      FA_THREADGROUP int* coords,
      int block,
      int head,
      int batch,
      int warp,
      lane_t lane) {
    na_attention_run_1d<Target, Shape>(
        q, k, v, out, p, grid, k_smem, v_smem, coords, block, head, batch,
        warp, lane);
  }
};

template <typename Target, typename Shape, int kNdim>
FA_FUNC void na_attention_block(
    const FA_DEVICE typename Shape::elem_type* q,
    const FA_DEVICE typename Shape::elem_type* k,
    const FA_DEVICE typename Shape::elem_type* v,
    FA_DEVICE typename Shape::elem_type* out,
    const FA_CONSTANT NaParams& p,
    const FA_CONSTANT NaGrid& grid,
    FA_THREADGROUP typename Shape::elem_type* k_smem,
    FA_THREADGROUP typename Shape::elem_type* v_smem,
    FA_THREADGROUP int* coords,
    int block,
    int head,
    int batch,
    int warp,
    lane_t lane) {
  typedef typename Shape::elem_type T;
  typedef typename Target::template FragA<T> FragA;
  typedef typename Target::template FragB<T> FragB;
  typedef typename Target::FragC FragC;
  constexpr int D = Shape::kHeadDim;
  constexpr int kBK = Shape::kBK;
  constexpr int kWarpRows = Shape::kWarpRows;
  constexpr int kLd = Shape::kSmemLd;
  constexpr int kStages = Shape::kStages;
  // The axis a warp's rows run along.
  constexpr int R = kNdim - 1;
  // The loaders' commit and wait act on all of a thread's copies.
  typedef typename Target::template Loader<T, kBK, D, kLd, Shape::kThreads>
      Loader;

  static_assert(kNdim >= 1 && kNdim <= kNaMaxAxes, "1 to 3 spatial axes");
  static_assert(
      kWarpRows % FragA::kRows == 0 && kWarpRows % FragC::kRows == 0,
      "a warp's query rows must be whole fragments");
  static_assert(
      D % FragA::kCols == 0 && D % FragC::kCols == 0,
      "the head dim must be whole fragments");
  static_assert(
      kBK % FragA::kCols == 0 && kBK % FragC::kCols == 0,
      "the key block must be whole fragments");

  Tile<FragA, kWarpRows / FragA::kRows, D / FragA::kCols> q_tile;
  Tile<FragC, kWarpRows / FragC::kRows, kBK / FragC::kCols> s_tile;
  Tile<FragA, kWarpRows / FragA::kRows, kBK / FragA::kCols> p_tile;
  Tile<FragC, kWarpRows / FragC::kRows, D / FragC::kCols> o_tile;
  OnlineSoftmax<decltype(s_tile)::kRowSlots> softmax;
  const int tid = warp * kSimdWidth + lane;

  if (kNdim == 1 && grid.run > 1) {
    NaRunPath<kNdim == 1>::template run<Target, Shape>(
        q, k, v, out, p, grid, k_smem, v_smem, coords, block, head, batch,
        warp, lane);
    return;
  }

  // ---------------------------------------------------------- the tile
  // Its dilation group and first query along each axis, fastest axis first
  // in the threadgroup index.
  NaAxis axes[kNdim];
  int group[kNdim];
  int m[kNdim];
  int q0[kNdim];
  int rest = block;
  FA_UNROLL
  for (int i = 0; i < kNdim; ++i) {
    const int a = R - i;
    axes[a] = na_axis(p, a);
    const int tiles = grid.tiles[a];
    const int t = rest % (axes[a].d * tiles);
    rest /= axes[a].d * tiles;
    group[a] = t / tiles;
    q0[a] = (t % tiles) * grid.extent[a];
    m[a] = na_group_length(axes[a].n, axes[a].d, group[a]);
  }
  // A dilation group shorter than the longest may have a tile less.
  FA_UNROLL
  for (int a = 0; a < kNdim; ++a) {
    if (q0[a] >= m[a]) {
      return;
    }
  }

  NaKeyBox<kNdim> box;
  box.count = 1;
  const FA_DEVICE T* k_box =
      k + batch * p.k_strides[0] + head * p.k_strides[4];
  const FA_DEVICE T* v_box =
      v + batch * p.v_strides[0] + head * p.v_strides[4];
  FA_UNROLL
  for (int a = 0; a < kNdim; ++a) {
    const int last = na_min(q0[a] + grid.extent[a], m[a]) - 1;
    const NaWindow u = na_union_window(axes[a], m[a], q0[a], last);
    box.first[a] = u.first;
    box.side[a] = u.count;
    box.count *= u.count;
    box.k_step[a] = axes[a].d * p.k_strides[1 + a];
    box.v_step[a] = axes[a].d * p.v_strides[1 + a];
    k_box += (group[a] + u.first * axes[a].d) * p.k_strides[1 + a];
    v_box += (group[a] + u.first * axes[a].d) * p.v_strides[1 + a];
  }

  // ---------------------------------------------------------- the warp
  // Its queries: one per axis, except kWarpRows along the row axis R. A warp
  // past the end of the group on some axis has no query; it still loads
  // its share of K and V and meets every barrier.
  int wq[kNdim];
  int warp_rest = warp;
  bool has_queries = true;
  FA_UNROLL
  for (int i = 0; i < kNdim; ++i) {
    const int a = R - i;
    const int w = warp_rest % grid.warps[a];
    warp_rest /= grid.warps[a];
    wq[a] = q0[a] + w * (a == R ? kWarpRows : 1);
    has_queries = has_queries && wq[a] < m[a];
  }
  const int q_rows = has_queries ? na_min(kWarpRows, m[R] - wq[R]) : 0;

  const FA_DEVICE T* q_warp =
      q + batch * p.q_strides[0] + head * p.q_strides[4];
  FA_DEVICE T* o_warp = out + batch * p.o_strides[0] + head * p.o_strides[4];
  NaMaskOp<kNdim, kBK> mask;
  // The box keys this warp's windows reach lie from box index key_first to
  // key_last; a block outside gives its rows only -inf scores.
  int key_first = 0;
  int key_last = 0;
  int pitch = 1;
  FA_UNROLL
  for (int i = 0; i < kNdim; ++i) {
    const int a = R - i;
    const int j = na_min(wq[a], m[a] - 1);
    q_warp += (group[a] + j * axes[a].d) * p.q_strides[1 + a];
    o_warp += (group[a] + j * axes[a].d) * p.o_strides[1 + a];
    const int j_last =
        a == R ? na_min(wq[a] + kWarpRows, m[a]) - 1 : j;
    const NaWindow u = na_union_window(axes[a], m[a], j, j_last);
    const int lo = u.first - box.first[a];
    if (a != R) {
      mask.lo[a] = lo;
      mask.count[a] = u.count;
    }
    key_first += lo * pitch;
    key_last += (lo + u.count - 1) * pitch;
    pitch *= box.side[a];
  }
  if (q_rows <= 0) {
    key_last = -1;
  }
  mask.axis = axes[R];
  mask.m = m[R];
  mask.row0 = wq[R];
  mask.box0 = box.first[R];
  const stride_t q_ld = axes[R].d * p.q_strides[1 + R];
  const stride_t o_ld = axes[R].d * p.o_strides[1 + R];

  // ---------------------------------------------------------------- load Q
  if (q_rows >= kWarpRows) {
    tile_load_device(q_tile, q_warp, q_ld, lane);
  } else {
    tile_load_device_safe(q_tile, q_warp, q_ld, q_rows, D, 0.0f, lane);
  }
  softmax_init(softmax, -FA_FLT_MAX, 0.0f);
  tile_fill(o_tile, 0.0f);
  // The scores go to the softmax as raw products q.k, which it scales into
  // the exp2 domain in the FFMA that subtracts the row max; that needs a
  // positive scale (the mask's -inf then stays -inf). Any other scale is
  // applied to the scores first.
  const bool fold_scale = p.scale_log2 > 0.0f;

  // A box of at most kStages blocks (a 1-D tile with a small kernel) is
  // resident: every block has its own stage, so all its copies start at
  // once, behind one wait and one barrier, and the warps then run through
  // their blocks without meeting again. A longer box streams through the
  // stages as a ring: blocks 0 .. kStages - 2 start before the loop, and
  // every iteration commits one group (empty past the last block), so that
  // at the top of iteration kb, waiting for all but the newest kStages - 2
  // groups means: block kb has landed. `resident` is the same in every
  // thread of the threadgroup, so the barriers stay uniform.
  const int n_blocks = (box.count + kBK - 1) / kBK;
  const bool resident = n_blocks <= kStages;
  const int n_first = resident ? n_blocks : kStages - 1;
  for (int kb = 0; kb < n_first; ++kb) {
    na_load_kv_block<Target, Shape, kNdim>(
        k_smem, v_smem, coords, k_box, v_box, box, kb, kb, tid);
    if (!resident) {
      Loader::commit();
    }
  }
  if (resident) {
    Loader::commit();
    Loader::template wait<0>();
    FA_BARRIER();
  }

  for (int kb = 0; kb < n_blocks; ++kb) {
    const int key0 = kb * kBK;

    // ---------------------------------------------------------- load K, V
    // Ring: block kb + kStages - 1 fills the stage (and coordinates) of
    // block kb - 1, so every warp must be done with kb - 1 first. With one
    // stage (Metal) that is kb's own stage: a barrier, the synchronous load,
    // and a barrier before reading it. With more, this thread's copies of
    // kb are waited for first, so that one barrier also makes kb visible to
    // all.
    if (!resident) {
      if (kStages > 1) {
        Loader::template wait<(kStages > 1 ? kStages - 2 : 0)>();
      }
      FA_BARRIER();
      const int kb_next = kb + kStages - 1;
      if (kb_next < n_blocks) {
        na_load_kv_block<Target, Shape, kNdim>(
            k_smem, v_smem, coords, k_box, v_box, box, kb_next,
            kb_next % kStages, tid);
      }
      Loader::commit();
      if (kStages == 1) {
        Loader::template wait<0>();
        FA_BARRIER();
      }
    }
    if (key0 > key_last || key0 + kBK <= key_first) {
      continue;
    }
    const FA_THREADGROUP T* k_block =
        k_smem + (kb % kStages) * Shape::kStageElems;
    const FA_THREADGROUP T* v_block =
        v_smem + (kb % kStages) * Shape::kStageElems;

    mask.coords = coords + (kb % kStages) * kNdim * kBK;
    na_block_step<FragB, kLd>(
        q_tile, s_tile, p_tile, o_tile, softmax, mask, k_block, v_block,
        key0, p.scale_log2, fold_scale, true, lane);
  }

  // ----------------------------------------------------------------- store
  na_finalize(o_tile, softmax);
  if (q_rows >= kWarpRows) {
    tile_store_device(o_warp, o_tile, o_ld, lane);
  } else if (q_rows > 0) {
    tile_store_device_safe(o_warp, o_tile, o_ld, q_rows, D, lane);
  }
}

} // namespace fa
