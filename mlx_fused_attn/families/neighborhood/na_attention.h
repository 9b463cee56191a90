// The fused neighborhood-attention kernel body (NATTEN's na1d / na2d / na3d;
// the geometry is na_window.h), written once over the tile ops, like the
// main attention kernel (attention.h), for Metal and CUDA:
//
//   O[i] = softmax_j(scale * Q[i] K[j]^T) V[j]   over the keys j in the
//                                                neighborhood of query i
//
// One threadgroup owns a query tile inside one dilation group of every axis
// (families/neighborhood/na_grid.h): its warps' rows run along the fastest axis in use,
// the warps spread over the others, so a 2-D or 3-D tile stays compact. The
// tile visits only its key box, the product over the axes of the union of
// its queries' windows, in indices of the same dilation groups: the box is
// dense, with no key of another group in it. The box's keys, row-major, are
// gathered kBK at a time into threadgroup memory (one row copy per key:
// box keys are not one strided run); each score gets the neighborhood mask
// (-inf outside the query's window on some axis); each block is one
// attention_step (attention_step.h), as in the main kernel; the output is
// written once. A warp skips the blocks that hold no key of its own
// queries' windows (with warpgroup products, of its warpgroup's: they run
// the products together). In 1-D a threadgroup may instead take a run of
// consecutive tiles (na_attention_run_1d), streaming their keys through a
// ring of blocks one tile ahead of the math.
//
// `Target` supplies the fragment types by role and the K/V block type
// (KVBlock: its layout, its loader's row copies and the products that read
// it); the blocks stream on tile/kv_pipeline.h's ring (or plain loads), a
// key box short enough resident. kNdim is the number of spatial axes
// (NaParams::n_axes).
#pragma once

#include "mlx_fused_attn/kernels/attention.h"
#include "mlx_fused_attn/kernels/attention_step.h"
#include "mlx_fused_attn/families/neighborhood/na_args.h"
#include "mlx_fused_attn/families/neighborhood/na_grid.h"
#include "mlx_fused_attn/families/neighborhood/na_params.h"
#include "mlx_fused_attn/na_window.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/kv_pipeline.h"
#include "mlx_fused_attn/tile/q_in_registers.h"
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
  /// (NaKVSource); 1-D keys are their own coordinate.
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

/// The neighborhood mask of a warp against key block kb, as attention_step's
/// masks. The scores go to the softmax as raw products q.k, which it scales
/// into the exp2 domain in the FFMA that subtracts the row max; that needs
/// a positive scale (the mask's -inf then stays -inf), and any other scale
/// is applied first. A block whose keys lie in every window of the warp's
/// rows (box keys inner_first .. inner_last) needs no mask.
template <int kNdim, int kBK, int kStages>
struct NaBlockMasks {
  NaMaskOp<kNdim, kBK> op; ///< its coords: those of stage 0
  int inner_first;
  int inner_last;
  float scale_log2;

  template <typename STile>
  struct Prefetch {
    typedef NoMaskPrefetch type;
  };
  FA_FUNC void prefetch(FA_THREAD NoMaskPrefetch&, int, lane_t) const {}
  template <typename STile>
  FA_FUNC void start(FA_THREAD STile& s, int, lane_t) const {
    tile_fill(s, 0.0f);
  }

  template <typename F, int R, int C>
  FA_FUNC float apply(
      FA_THREAD Tile<F, R, C>& s,
      const FA_THREAD NoMaskPrefetch&,
      int kb,
      lane_t lane) const {
    const int key0 = kb * kBK;
    float score_scale = scale_log2;
    if (!(scale_log2 > 0.0f)) {
      tile_scalar_op<MulOp>(s, scale_log2);
      score_scale = 1.0f;
    }
    if (key0 < inner_first || key0 + kBK - 1 > inner_last) {
      NaMaskOp<kNdim, kBK> block_op = op;
      block_op.coords += (kb % kStages) * kNdim * kBK;
      block_op.key0 = key0;
      tile_map_coords(s, block_op, 0, key0, lane);
    }
    return score_scale;
  }
};

/// The masks of the rows of a tile along `axis` (its dilation group of
/// length m, its box from box0), every block masked; the caller sets the
/// warp's rows and, in 1-D runs, the blocks that need none.
template <int kNdim, int kBK, int kStages>
FA_FUNC NaBlockMasks<kNdim, kBK, kStages> na_block_masks(
    NaAxis axis,
    int m,
    int box0,
    const FA_THREADGROUP int* coords,
    float scale_log2) {
  NaBlockMasks<kNdim, kBK, kStages> masks;
  masks.op.axis = axis;
  masks.op.m = m;
  masks.op.row0 = 0;
  masks.op.box0 = box0;
  masks.op.coords = coords;
  masks.op.key0 = 0;
  masks.inner_first = 0;
  masks.inner_last = -1;
  masks.scale_log2 = scale_log2;
  return masks;
}

/// Where box key `key` lies: its box coordinate along each axis, and its
/// offsets from the box's first key in K and V.
template <int kNdim>
FA_FUNC void na_box_key(
    const FA_THREAD NaKeyBox<kNdim>& box,
    int key,
    FA_THREAD int* c,
    FA_THREAD stride_t& k_off,
    FA_THREAD stride_t& v_off) {
  int rest = key;
  k_off = 0;
  v_off = 0;
  FA_UNROLL
  for (int i = 0; i < kNdim; ++i) {
    const int a = kNdim - 1 - i;
    c[a] = a == 0 ? rest : rest % box.side[a];
    rest = a == 0 ? 0 : rest / box.side[a];
    k_off += c[a] * box.k_step[a];
    v_off += c[a] * box.v_step[a];
  }
}

/// The copies of a key box's blocks (block kb: box keys kb * kBK onwards)
/// into K's and V's stages, for the pipeline (kv_pipeline.h's Source), and
/// (kNdim > 1) the keys' box coordinates for the mask. Box keys are not one
/// strided run, so each key is a row copy of its own (the block's
/// load_row); keys past the box are zero-filled (products with them stay
/// finite) and get coordinates in no window.
template <typename Target, typename Shape, int kNdim>
struct NaKVSource {
  typedef typename Shape::elem_type elem_type;
  /// K and V blocks alike: one head dim.
  typedef AttnKBlock<Target, Shape> Block;

  FA_THREADGROUP elem_type* k_smem;
  FA_THREADGROUP elem_type* v_smem;
  FA_THREADGROUP int* coords; ///< kNdim x kBK ints a stage
  const FA_DEVICE elem_type* k; ///< the box's first key
  const FA_DEVICE elem_type* v;
  NaKeyBox<kNdim> box;

  FA_FUNC const FA_THREADGROUP elem_type* k_block(int stage) const {
    return k_smem + stage * Block::kElems;
  }
  FA_FUNC const FA_THREADGROUP elem_type* v_block(int stage) const {
    return v_smem + stage * Block::kElems;
  }

  FA_FUNC void load_kv(int kb, int stage, int tid) const {
    constexpr int kBK = Shape::kBK;
    constexpr int kRowThreads = Block::kVecsPerRow;
    constexpr int kRowsPerPass = Shape::kThreads / kRowThreads;
    static_assert(
        Shape::kThreads % kRowThreads == 0,
        "a key row's 16-byte pieces must split evenly over the threads");
    FA_THREADGROUP elem_type* k_stage = k_smem + stage * Block::kElems;
    FA_THREADGROUP elem_type* v_stage = v_smem + stage * Block::kElems;
    FA_THREADGROUP int* c_stage = coords + stage * kNdim * kBK;
    const int piece = tid % kRowThreads;
    FA_UNROLL
    for (int pass = 0; pass < (kBK + kRowsPerPass - 1) / kRowsPerPass;
         ++pass) {
      const int r = pass * kRowsPerPass + tid / kRowThreads;
      if (kBK % kRowsPerPass != 0 && r >= kBK) {
        continue;
      }
      const int key = kb * kBK + r;
      const bool in_box = key < box.count;
      int c[kNdim];
      stride_t k_off = 0;
      stride_t v_off = 0;
      if (in_box) {
        na_box_key(box, key, c, k_off, v_off);
      }
      Block::load_row(k_stage, r, k + k_off, in_box, piece);
      Block::load_row(v_stage, r, v + v_off, in_box, piece);
      if (kNdim > 1 && piece == 0) {
        FA_UNROLL
        for (int a = 0; a < kNdim; ++a) {
          c_stage[a * kBK + r] = in_box ? c[a] : int(kNaOutsideBox);
        }
      }
    }
  }
};

/// Stores a warp's kWarpRows output rows from `o`, of which `rows` exist.
template <int kWarpRows, int D, typename OTile, typename T>
FA_FUNC void na_store_rows(
    FA_DEVICE T* o,
    const FA_THREAD OTile& t,
    stride_t ld,
    int rows,
    lane_t lane) {
  if (rows >= kWarpRows) {
    tile_store_device(o, t, ld, lane);
  } else if (rows > 0) {
    tile_store_device_safe(o, t, ld, rows, D, lane);
  }
}

/// Loads a warp's kWarpRows query rows from `q`, of which `rows` exist;
/// the others are zero.
template <int kWarpRows, int D, typename QTile, typename T>
FA_FUNC void na_load_rows(
    FA_THREAD QTile& t,
    const FA_DEVICE T* q,
    stride_t ld,
    int rows,
    lane_t lane) {
  if (rows >= kWarpRows) {
    tile_load_device(t, q, ld, lane);
  } else {
    tile_load_device_safe(t, q, ld, rows > 0 ? rows : 0, D, 0.0f, lane);
  }
}

/// The box keys of a run of query rows: from `first` to `last` those their
/// windows reach, from inner_first to inner_last those in all of them
/// (windows move right with the query: from the last row's window start to
/// the first row's window end). Empty (last < first) without rows.
struct NaKeyRange {
  int first;
  int last;
  int inner_first;
  int inner_last;
};

/// Both ranges' keys (inner keys: the first's).
FA_FUNC NaKeyRange na_key_union(NaKeyRange a, NaKeyRange b) {
  if (b.last < b.first) {
    return a;
  }
  if (a.last >= a.first) {
    b.first = na_min(a.first, b.first);
    b.last = a.last > b.last ? a.last : b.last;
  }
  b.inner_first = a.inner_first;
  b.inner_last = a.inner_last;
  return b;
}

/// 1-D: the ring keys (from `base`) of the `rows` queries from row0 of a
/// dilation group of length m; rows past the group have none.
FA_FUNC NaKeyRange
na_row_keys(NaAxis axis, int m, int base, int row0, int rows) {
  NaKeyRange r = {0, -1, 0, -1};
  const int n = row0 < m ? na_min(rows, m - row0) : 0;
  if (n > 0) {
    const NaWindow w0 = na_group_window(axis, m, row0);
    const NaWindow w1 = na_group_window(axis, m, row0 + n - 1);
    r.first = w0.first - base;
    r.last = w1.first + w1.count - 1 - base;
    r.inner_first = w1.first - base;
    r.inner_last = w0.first + w0.count - 1 - base;
  }
  return r;
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

/// A warp's key blocks of one tile against the K/V blocks `pipe` holds:
/// the tile's ring blocks lo .. hi, less those outside `keys` (the warp's,
/// or with warpgroup products its warpgroup's), each one attention_step.
template <typename Block, typename Step, typename Q, typename Masks, typename Pipeline>
FA_FUNC void na_key_blocks(
    FA_THREAD Step& st,
    const FA_THREAD Q& q,
    const FA_THREAD Masks& masks,
    const FA_THREAD Pipeline& pipe,
    NaKeyRange keys,
    NaRingTile tile,
    int kBK,
    lane_t lane) {
  attention_step_begin(st, false, 0.0f);
  for (int b = tile.lo; b <= tile.hi; ++b) {
    if (b * kBK <= keys.last && b * kBK + kBK > keys.first) {
      attention_step<Block, Block>(st, q, masks, pipe, b, b, lane);
    }
  }
  attention_step_end(st);
}

/// A 1-D threadgroup's run: tiles tile_first .. tile_end - 1 of one
/// dilation group, and its ring of keys: the group's, from the first box's
/// first key (`base`) to the group's end (keys past it are zero-filled and
/// in no window).
struct NaRun {
  NaAxis axis;
  int group;
  int m; ///< the group's length
  int tile_first;
  int tile_end;
  int base;
};

FA_FUNC NaRun
na_run(const FA_CONSTANT NaParams& p, const FA_CONSTANT NaGrid& grid, int block) {
  NaRun r;
  r.axis = na_axis(p, 0);
  const int extent = grid.extent[0];
  const int runs = (grid.tiles[0] + grid.run - 1) / grid.run;
  r.group = block / runs;
  r.m = na_group_length(r.axis.n, r.axis.d, r.group);
  r.tile_first = (block % runs) * grid.run;
  r.tile_end =
      na_min(r.tile_first + grid.run, (r.m + extent - 1) / extent);
  const int q0 = r.tile_first * extent;
  r.base = na_union_window(r.axis, r.m, q0, na_min(q0 + extent, r.m) - 1).first;
  return r;
}

/// 1-D, a run of consecutive query tiles of one dilation group
/// (grid.run > 1): the threadgroup streams the group's keys from the run's
/// first box on through a ring of kStages key blocks (ring block b: keys
/// base + b * kBK onwards, in the pipeline's stage of b), and starts the
/// copies of the next tile's new blocks, and its Q, before it computes the
/// current tile, so that loads stay in flight through the math.
/// Consecutive boxes overlap by k - 1 keys; their shared blocks are loaded
/// once. Per tile: a wait and a barrier (the tile's blocks have landed;
/// every warp is done with the previous tile, whose stages the next copies
/// refill), then the copies of the next tile's blocks that fit beside the
/// current box (a block that does not, at a border where boxes shift
/// unevenly, is copied at the top of its own tile, behind one more
/// barrier). The host (na_run_for) makes a box at most kStages - 1 blocks.
/// Metal's loads are synchronous: the same phases run in turn, into stages
/// no warp reads.
template <typename Target, typename Shape>
FA_FUNC void na_attention_run_1d(
    NaArrays<typename Shape::elem_type> a,
    const FA_CONSTANT NaParams& p,
    const FA_CONSTANT NaGrid& grid,
    NaSmem<typename Shape::elem_type> smem,
    NaPlace at,
    int warp,
    lane_t lane) {
  typedef typename Shape::elem_type T;
  typedef NaKVSource<Target, Shape, 1> Source;
  typedef typename Source::Block Block;
  typedef KVPipelineOf<Block, Source, Shape::kStages> Pipeline;
  constexpr int D = Shape::kHeadDim;
  constexpr int kBK = Shape::kBK;
  constexpr int kWarpRows = Shape::kWarpRows;
  // Warps that run their products together share their key blocks.
  constexpr int kGroupWarps = Block::kProductWarps;

  // ------------------------------------------------------------ the run
  const NaRun run = na_run(p, grid, at.block);
  if (run.tile_first >= run.tile_end) {
    return;
  }
  const NaAxis axis = run.axis;
  const int m = run.m;
  const int base = run.base;
  const int extent = grid.extent[0];
  const stride_t q_ld = axis.d * p.q_strides[1];
  const stride_t o_ld = axis.d * p.o_strides[1];
  const FA_DEVICE T* q_group = a.q + at.batch * p.q_strides[0] +
      at.head * p.q_strides[4] + run.group * p.q_strides[1];
  FA_DEVICE T* o_group = a.out + at.batch * p.o_strides[0] +
      at.head * p.o_strides[4] + run.group * p.o_strides[1];
  const NaKeyBox<1> ring = {
      {base}, {m - base}, m - base, {axis.d * p.k_strides[1]},
      {axis.d * p.v_strides[1]}};
  const Source src = {
      smem.k, smem.v, smem.coords,
      a.k + at.batch * p.k_strides[0] + at.head * p.k_strides[4] +
          (run.group + base * axis.d) * p.k_strides[1],
      a.v + at.batch * p.v_strides[0] + at.head * p.v_strides[4] +
          (run.group + base * axis.d) * p.v_strides[1],
      ring};
  const Pipeline pipe = kv_pipeline<Pipeline>(
      src, (m - base + kBK - 1) / kBK, warp * kSimdWidth + lane);
  NaBlockMasks<1, kBK, Shape::kStages> masks =
      na_block_masks<1, kBK, Shape::kStages>(
          axis, m, base, smem.coords, p.scale_log2);

  // ------------------------------------------- the first tile's K, V and Q
  NaRingTile cur = na_ring_tile(axis, m, extent, base, kBK, run.tile_first);
  pipe.load_blocks(cur.lo, cur.hi);
  int next = cur.hi + 1; // the first ring block not yet copied
  QInRegisters<typename Target::template FragA<T>, kWarpRows, D> q_op;
  QInRegisters<typename Target::template FragA<T>, kWarpRows, D> q_next;
  int wq = cur.q0 + warp * kWarpRows;
  na_load_rows<kWarpRows, D>(
      q_op.tile, q_group + na_min(wq, m - 1) * q_ld, q_ld, m - wq, lane);

  AttnStep<Target, T, kWarpRows, kBK, D> st;
  for (int t = run.tile_first; t < run.tile_end; ++t) {
    // ----------------------------------------- this tile's blocks, landed
    if (next <= cur.hi) {
      // Copies that did not fit beside the previous box: their stages are
      // free once every warp is done with it.
      FA_BARRIER();
      pipe.load_blocks(next, cur.hi);
      next = cur.hi + 1;
    }
    pipe.wait_all();

    // ------------------------- the next tile's new blocks and Q, in flight
    NaRingTile nxt = cur;
    if (t + 1 < run.tile_end) {
      nxt = na_ring_tile(axis, m, extent, base, kBK, t + 1);
      const int stop = na_min(nxt.hi, cur.lo + Shape::kStages - 1);
      pipe.load_blocks(next, stop);
      next = stop + 1 > next ? stop + 1 : next;
      const int wq_next = nxt.q0 + warp * kWarpRows;
      na_load_rows<kWarpRows, D>(
          q_next.tile, q_group + na_min(wq_next, m - 1) * q_ld, q_ld,
          m - wq_next, lane);
    }

    // --------------------------------------------------- the tile's math
    const int wq_group = cur.q0 + warp / kGroupWarps * kGroupWarps * kWarpRows;
    const NaKeyRange keys = na_key_union(
        na_row_keys(axis, m, base, wq, kWarpRows),
        na_row_keys(axis, m, base, wq_group, kGroupWarps * kWarpRows));
    masks.op.row0 = wq;
    masks.inner_first = keys.inner_first;
    masks.inner_last = keys.inner_last;
    na_key_blocks<Block>(st, q_op, masks, pipe, keys, cur, kBK, lane);
    na_store_rows<kWarpRows, D>(
        o_group + wq * o_ld, st.o, o_ld, na_min(kWarpRows, m - wq), lane);
    q_op = q_next;
    cur = nxt;
    wq = cur.q0 + warp * kWarpRows;
  }
}

/// The run path exists for 1-D only (other axis counts compile nothing of
/// it, so that it costs their kernels no registers).
template <bool kOneAxis>
struct NaRunPath {
  template <typename Target, typename Shape, typename T>
  FA_FUNC static void run(
      NaArrays<T>,
      const FA_CONSTANT NaParams&,
      const FA_CONSTANT NaGrid&,
      NaSmem<T>,
      NaPlace,
      int,
      lane_t) {}
};

template <>
struct NaRunPath<true> {
  template <typename Target, typename Shape, typename T>
  FA_FUNC static void run(
      NaArrays<T> a,
      const FA_CONSTANT NaParams& p,
      const FA_CONSTANT NaGrid& grid,
      NaSmem<T> smem,
      NaPlace at,
      int warp,
      lane_t lane) {
    na_attention_run_1d<Target, Shape>(a, p, grid, smem, at, warp, lane);
  }
};

/// A query tile of the 2-D or 3-D kernel: its dilation group and first
/// query along each axis, fastest axis first in the threadgroup index.
template <int kNdim>
struct NaTile {
  NaAxis axes[kNdim];
  int group[kNdim];
  int m[kNdim]; ///< the length of its dilation group
  int q0[kNdim];
  /// A dilation group shorter than the longest may have a tile less.
  bool empty;
};

template <int kNdim>
FA_FUNC NaTile<kNdim>
na_tile(const FA_CONSTANT NaParams& p, const FA_CONSTANT NaGrid& grid, int block) {
  NaTile<kNdim> t;
  t.empty = false;
  int rest = block;
  FA_UNROLL
  for (int i = 0; i < kNdim; ++i) {
    const int a = kNdim - 1 - i;
    t.axes[a] = na_axis(p, a);
    const int tiles = grid.tiles[a];
    const int x = rest % (t.axes[a].d * tiles);
    rest /= t.axes[a].d * tiles;
    t.group[a] = x / tiles;
    t.q0[a] = (x % tiles) * grid.extent[a];
    t.m[a] = na_group_length(t.axes[a].n, t.axes[a].d, t.group[a]);
    t.empty = t.empty || t.q0[a] >= t.m[a];
  }
  return t;
}

/// The tile's key box, and the offsets of its first key in K and V from
/// the (batch, head)'s first.
template <int kNdim>
FA_FUNC NaKeyBox<kNdim> na_key_box(
    const FA_CONSTANT NaParams& p,
    const FA_CONSTANT NaGrid& grid,
    const FA_THREAD NaTile<kNdim>& t,
    FA_THREAD stride_t& k_off,
    FA_THREAD stride_t& v_off) {
  NaKeyBox<kNdim> box;
  box.count = 1;
  k_off = 0;
  v_off = 0;
  FA_UNROLL
  for (int a = 0; a < kNdim; ++a) {
    const int last = na_min(t.q0[a] + grid.extent[a], t.m[a]) - 1;
    const NaWindow u = na_union_window(t.axes[a], t.m[a], t.q0[a], last);
    box.first[a] = u.first;
    box.side[a] = u.count;
    box.count *= u.count;
    box.k_step[a] = t.axes[a].d * p.k_strides[1 + a];
    box.v_step[a] = t.axes[a].d * p.v_strides[1 + a];
    k_off += (t.group[a] + u.first * t.axes[a].d) * p.k_strides[1 + a];
    v_off += (t.group[a] + u.first * t.axes[a].d) * p.v_strides[1 + a];
  }
  return box;
}

/// A warp of a 2-D or 3-D tile: its queries are one per axis, except
/// kWarpRows along the row axis (the fastest in use). A warp past the end
/// of the group on some axis has no query; it still loads its share of K
/// and V and meets every barrier.
template <int kNdim>
struct NaWarp {
  int q_rows; ///< its queries (0: none)
  int wq_row; ///< its first query along the row axis
  /// Axes a < kNdim - 1: its window, relative to the box.
  int lo[kNdim];
  int count[kNdim];
  NaKeyRange keys; ///< the box keys its windows reach
  stride_t q_off; ///< of its first query from the (batch, head)'s first
  stride_t o_off;
};

template <int kNdim, int kWarpRows>
FA_FUNC NaWarp<kNdim> na_warp(
    const FA_CONSTANT NaParams& p,
    const FA_CONSTANT NaGrid& grid,
    const FA_THREAD NaTile<kNdim>& t,
    const FA_THREAD NaKeyBox<kNdim>& box,
    int warp) {
  constexpr int R = kNdim - 1;
  NaWarp<kNdim> w;
  NaKeyRange keys = {0, 0, 0, -1};
  bool has_queries = true;
  int pitch = 1;
  w.q_off = 0;
  w.o_off = 0;
  FA_UNROLL
  for (int i = 0; i < kNdim; ++i) {
    const int a = R - i;
    const int wq = t.q0[a] + warp % grid.warps[a] * (a == R ? kWarpRows : 1);
    warp /= grid.warps[a];
    has_queries = has_queries && wq < t.m[a];
    const int j = na_min(wq, t.m[a] - 1);
    const int j_last = a == R ? na_min(wq + kWarpRows, t.m[a]) - 1 : j;
    const NaWindow u = na_union_window(t.axes[a], t.m[a], j, j_last);
    w.q_off += (t.group[a] + j * t.axes[a].d) * p.q_strides[1 + a];
    w.o_off += (t.group[a] + j * t.axes[a].d) * p.o_strides[1 + a];
    w.lo[a] = u.first - box.first[a];
    w.count[a] = u.count;
    keys.first += w.lo[a] * pitch;
    keys.last += (w.lo[a] + u.count - 1) * pitch;
    pitch *= box.side[a];
    if (a == R) {
      w.wq_row = wq;
    }
  }
  w.q_rows = has_queries ? na_min(kWarpRows, t.m[R] - w.wq_row) : 0;
  if (w.q_rows <= 0) {
    keys.last = -1;
  }
  w.keys = keys;
  return w;
}

/// The box keys that warp `warp` and the warps running their products
/// with it reach (`own`: the warp's): a block outside them gives all
/// their rows only -inf scores, and the group skips it together.
template <int kNdim, int kWarpRows, int kGroupWarps>
FA_FUNC NaKeyRange na_group_keys(
    const FA_CONSTANT NaParams& p,
    const FA_CONSTANT NaGrid& grid,
    const FA_THREAD NaTile<kNdim>& t,
    const FA_THREAD NaKeyBox<kNdim>& box,
    int warp,
    NaKeyRange own) {
  for (int i = 1; i < kGroupWarps; ++i) {
    const int other = warp / kGroupWarps * kGroupWarps + (warp + i) % kGroupWarps;
    own = na_key_union(
        own, na_warp<kNdim, kWarpRows>(p, grid, t, box, other).keys);
  }
  return own;
}

template <typename Target, typename Shape, int kNdim>
FA_FUNC void na_attention_block(
    NaArrays<typename Shape::elem_type> a,
    const FA_CONSTANT NaParams& p,
    const FA_CONSTANT NaGrid& grid,
    NaSmem<typename Shape::elem_type> smem,
    NaPlace at,
    int warp,
    lane_t lane) {
  typedef typename Shape::elem_type T;
  typedef NaKVSource<Target, Shape, kNdim> Source;
  typedef typename Source::Block Block;
  typedef KVPipelineOf<Block, Source, Shape::kStages> Pipeline;
  constexpr int D = Shape::kHeadDim;
  constexpr int kBK = Shape::kBK;
  constexpr int kWarpRows = Shape::kWarpRows;
  constexpr int kStages = Shape::kStages;
  constexpr int R = kNdim - 1; // the axis a warp's rows run along
  static_assert(kNdim >= 1 && kNdim <= kNaMaxAxes, "1 to 3 spatial axes");
  static_assert(
      D % Target::template FragA<T>::kCols == 0,
      "the head dim must be whole fragments");
  static_assert(
      kStages > 1 || !Block::kAsync,
      "the neighborhood kernel streams through a ring, or plain loads");

  if (kNdim == 1 && grid.run > 1) {
    NaRunPath<kNdim == 1>::template run<Target, Shape>(
        a, p, grid, smem, at, warp, lane);
    return;
  }

  // ---------------------------------------------------- the tile, the warp
  const NaTile<kNdim> tile = na_tile<kNdim>(p, grid, at.block);
  if (tile.empty) {
    return;
  }
  stride_t k_off;
  stride_t v_off;
  const NaKeyBox<kNdim> box = na_key_box(p, grid, tile, k_off, v_off);
  const Source src = {
      smem.k, smem.v, smem.coords,
      a.k + at.batch * p.k_strides[0] + at.head * p.k_strides[4] + k_off,
      a.v + at.batch * p.v_strides[0] + at.head * p.v_strides[4] + v_off,
      box};
  const NaWarp<kNdim> w = na_warp<kNdim, kWarpRows>(p, grid, tile, box, warp);
  const NaKeyRange keys = na_group_keys<kNdim, kWarpRows, Block::kProductWarps>(
      p, grid, tile, box, warp, w.keys);

  NaBlockMasks<kNdim, kBK, kStages> masks = na_block_masks<kNdim, kBK, kStages>(
      tile.axes[R], tile.m[R], box.first[R], smem.coords, p.scale_log2);
  masks.op.row0 = w.wq_row;
  FA_UNROLL
  for (int a = 0; a < kNdim; ++a) {
    masks.op.lo[a] = w.lo[a];
    masks.op.count[a] = w.count[a];
  }

  // ---------------------------------------------------------------- load Q
  const stride_t q_ld = tile.axes[R].d * p.q_strides[1 + R];
  const stride_t o_ld = tile.axes[R].d * p.o_strides[1 + R];
  QInRegisters<typename Target::template FragA<T>, kWarpRows, D> q_op;
  na_load_rows<kWarpRows, D>(
      q_op.tile,
      a.q + at.batch * p.q_strides[0] + at.head * p.q_strides[4] + w.q_off,
      q_ld, w.q_rows, lane);

  // ------------------------------------------------------- the key blocks
  // A box of at most kStages blocks (a 1-D tile with a small kernel) is
  // resident: every block has its own stage, so all its copies start at
  // once, behind one wait and one barrier, and the warps then run through
  // their blocks without meeting again. A longer box streams through the
  // pipeline. `resident` is the same in every thread of the threadgroup,
  // so the barriers stay uniform.
  const int n_blocks = (box.count + kBK - 1) / kBK;
  const Pipeline pipe =
      kv_pipeline<Pipeline>(src, n_blocks, warp * kSimdWidth + lane);
  const bool resident = n_blocks <= kStages;
  if (resident) {
    pipe.load_all();
  } else {
    pipe.start();
  }
  AttnStep<Target, T, kWarpRows, kBK, D> st;
  attention_step_begin(st, false, 0.0f);
  for (int kb = 0; kb < n_blocks; ++kb) {
    if (!resident) {
      pipe.acquire(kb);
    }
    if (kb * kBK <= keys.last && kb * kBK + kBK > keys.first) {
      attention_step<Block, Block>(st, q_op, masks, pipe, kb, kb, lane);
    }
  }

  // ----------------------------------------------------------------- store
  attention_step_end(st);
  na_store_rows<kWarpRows, D>(
      a.out + at.batch * p.o_strides[0] + at.head * p.o_strides[4] + w.o_off,
      st.o,
      o_ld, w.q_rows, lane);
}

} // namespace fa
