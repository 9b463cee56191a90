// The fused CPU neighborhood-attention kernel. Included once per instruction
// set by kernel_<isa>.cpp (FA_CPU_ISA names the namespace).
//
// A work item is a tile of up to TILE_Q consecutive queries of one dilation
// group along the fastest axis, on a block of up to MAX_LINES lines (one
// dilation group of the next slower axis, same outer position), all heads.
// The tile's queries share their windows on the slower axes, and their
// windows along the fastest axis overlap, so every key row (one combination
// of slower-axis neighbours) contributes TILE_Q + k - 1 consecutive keys. Per
// head, the block's key rows are converted to fp32 once (K transposed) and
// shared by every query of every line that sees them; the scores are
// register-blocked products over them, each query keeping exactly its own
// window. Gathering and converting each neighbour per query, with a D-long
// dependent dot product per score, ran at 5-8 GFLOP/s on two cores.
//
// A query sees at most a few thousand keys, so its scores fit in a buffer and
// are softmaxed exactly in two passes (max, then exp2 and sum) before P V:
// no online rescaling. fp32 throughout, scale folded into q in the exp2
// domain.
#ifndef FA_CPU_ISA
#error "define FA_CPU_ISA before including na_kernel_impl.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mlx_fused_attn/backend/cpu/problem.h"
#include "mlx_fused_attn/backend/cpu/simd_math.h"
#include "mlx_fused_attn/backend/cpu/thread_pool.h"
#include "mlx_fused_attn/na_window.h"

namespace mlx_fused_attn::cpu::FA_CPU_ISA {

namespace na {

using fa::stride_t;

// Queries per tile. The keys of a key row are TILE_Q + k - 1 positions, so
// at k = 13 a 1-D tile of 64 converts each key about 1.2 times per head, and
// a sequence of 4096 still gives 64 items for the threads.
constexpr int TILE_Q = 64;
// Register tiles of the score product (score_group): GROUP consecutive
// queries share one run of key columns, the union of their windows
// (GROUP + k - 1 wide), computed 8 * VECS columns at a time, against KEY_ROWS
// key rows at once (their columns are the same: the slower axes do not move
// the window along the fastest one), with the products over d split into
// SPLIT interleaved partial sums. Each tile keeps
// GROUP * KEY_ROWS * VECS * SPLIT = 8 AVX2 accumulators, enough independent
// chains to hide the multiply-add latency; each loaded vector of K^T feeds
// GROUP multiply-adds and each broadcast query element KEY_ROWS * VECS.
// MAX_GROUP rows, MAX_KEY_ROWS key rows and MAX_SCORE_COLS columns bound
// every tile.
constexpr int MAX_GROUP = 4;
constexpr int MAX_KEY_ROWS = 4;
constexpr int MAX_SCORE_COLS = 16;

// P V accumulates one query's output PV_COLS columns at a time in registers
// (8 AVX2 accumulators), each key's probability broadcast once.
constexpr int PV_COLS = 64;

// Eight floats in one register (two with SSE only), loaded unaligned: a
// GCC/Clang vector extension, so the register tiles below stay tiles in both
// builds (GCC vectorised the plain score loops across d with shuffles and
// spills instead: 4 GFLOP/s).
typedef float F32x8 __attribute__((vector_size(32), aligned(4)));

// The tile's queries along the fastest axis and their windows there.
struct Tile {
  int rows; ///< queries in the tile
  int first; ///< group index of the first key of every key row
  int keys; ///< keys per key row: the union of the rows' windows
  int lo[TILE_Q + MAX_GROUP]; ///< window start of each row, from `first`
  int count[TILE_Q + MAX_GROUP]; ///< window length (< k only with causal)
};

struct Scratch {
  std::vector<float> q; ///< [TILE_Q + MAX_GROUP][D], scaled
  std::vector<float> k; ///< [keys][D], one key row converted
  std::vector<float> kt; ///< [slots][D][keys + MAX_SCORE_COLS]: K^T
  std::vector<float> v; ///< [slots][keys][D_v]
  std::vector<float> s; ///< [TILE_Q][s_stride]: scores, then P
  std::vector<float> o; ///< [D_v]: one output row
  std::vector<float> l; ///< [TILE_Q] softmax denominators
  std::vector<stride_t> k_slot, v_slot; ///< offsets of each key row
};

// A batch of key rows' transposed keys in Scratch::kt.
struct KeysT {
  const float* kt; ///< [key rows][D][stride]
  int stride; ///< floats between consecutive d
  int row_stride; ///< floats between key rows
};

// The accumulators of one score tile: SPLIT partial sums over d (the
// products of consecutive d in separate registers), KEY_ROWS key rows,
// GROUP queries, 8 * VECS key columns. The parts of score_group below take
// them by reference and are forced inline, so that the tile stays in
// registers as it did in one function.
template <int GROUP, int KEY_ROWS, int VECS, int SPLIT>
using ScoreAcc = F32x8[SPLIT][KEY_ROWS][GROUP][VECS];

#define FA_CPU_TILE_PART inline __attribute__((always_inline))

template <int GROUP, int KEY_ROWS, int VECS, int SPLIT>
FA_CPU_TILE_PART void zero_scores(ScoreAcc<GROUP, KEY_ROWS, VECS, SPLIT>& acc) {
  for (int h = 0; h < SPLIT; ++h) {
    for (int kr = 0; kr < KEY_ROWS; ++kr) {
      for (int r = 0; r < GROUP; ++r) {
        for (int v = 0; v < VECS; ++v) {
          acc[h][kr][r][v] = F32x8{};
        }
      }
    }
  }
}

// acc += Q[i0 + r][d] * K_kr^T[d][c0 ...] over every d, SPLIT d at a time
// into SPLIT partial sums, the remainder into the first.
template <int GROUP, int KEY_ROWS, int VECS, int SPLIT>
FA_CPU_TILE_PART void accumulate_scores(
    ScoreAcc<GROUP, KEY_ROWS, VECS, SPLIT>& acc,
    const float* q,
    int i0,
    int D,
    const KeysT& k,
    int c0) {
  int d = 0;
  for (; d + SPLIT <= D; d += SPLIT) {
    for (int h = 0; h < SPLIT; ++h) {
      for (int kr = 0; kr < KEY_ROWS; ++kr) {
        const F32x8* kd = reinterpret_cast<const F32x8*>(
            k.kt + kr * k.row_stride + (d + h) * k.stride + c0);
        for (int r = 0; r < GROUP; ++r) {
          const float qd = q[(i0 + r) * D + d + h];
          for (int v = 0; v < VECS; ++v) {
            acc[h][kr][r][v] += qd * kd[v];
          }
        }
      }
    }
  }
  for (; d < D; ++d) {
    for (int kr = 0; kr < KEY_ROWS; ++kr) {
      const F32x8* kd = reinterpret_cast<const F32x8*>(
          k.kt + kr * k.row_stride + d * k.stride + c0);
      for (int r = 0; r < GROUP; ++r) {
        const float qd = q[(i0 + r) * D + d];
        for (int v = 0; v < VECS; ++v) {
          acc[0][kr][r][v] += qd * kd[v];
        }
      }
    }
  }
}

// The partial sums added into the first.
template <int GROUP, int KEY_ROWS, int VECS, int SPLIT>
FA_CPU_TILE_PART void sum_splits(ScoreAcc<GROUP, KEY_ROWS, VECS, SPLIT>& acc) {
  for (int h = 1; h < SPLIT; ++h) {
    for (int kr = 0; kr < KEY_ROWS; ++kr) {
      for (int r = 0; r < GROUP; ++r) {
        for (int v = 0; v < VECS; ++v) {
          acc[0][kr][r][v] += acc[h][kr][r][v];
        }
      }
    }
  }
}

// The tile's columns from c0 stored, each row keeping the columns of its
// own window. A loop of fixed length: one over [from, to) became a memmove
// call per row.
template <int GROUP, int KEY_ROWS, int VECS, int SPLIT>
FA_CPU_TILE_PART void store_scores(
    const ScoreAcc<GROUP, KEY_ROWS, VECS, SPLIT>& acc,
    const Tile& t,
    int i0,
    int c0,
    int k_fast,
    float* s,
    int s_stride) {
  constexpr int COLS = 8 * VECS;
  for (int r = 0; r < GROUP; ++r) {
    const int lo = t.lo[i0 + r];
    const int from = std::max(c0, lo) - c0;
    const int to = std::min(c0 + COLS, lo + t.count[i0 + r]) - c0;
    for (int kr = 0; kr < KEY_ROWS; ++kr) {
      float row[COLS];
      std::memcpy(row, &acc[0][kr][r][0], sizeof(row));
      float* dst = s + (i0 + r) * s_stride + kr * k_fast + (c0 - lo);
      for (int c = 0; c < COLS; ++c) {
        if (c >= from && c < to) {
          dst[c] = row[c];
        }
      }
    }
  }
}

#undef FA_CPU_TILE_PART

// S[i][r * k + c] = Q[i] . K_r[lo_i + c] for c < count_i, for the rows of a
// group of GROUP queries from i0 and KEY_ROWS key rows, stored at
// s + i * s_stride (k = k_fast: each key row's slot in a score row). The
// group's union of windows is computed 8 * VECS columns at a time from its
// first row's start (kt is padded so the last chunk stays in bounds); each
// row keeps its own window.
template <int GROUP, int KEY_ROWS, int VECS, int SPLIT>
inline void score_group(
    const Tile& t,
    int i0,
    const float* q,
    int D,
    const KeysT& k,
    int k_fast,
    float* s,
    int s_stride) {
  constexpr int COLS = 8 * VECS;
  static_assert(
      GROUP <= MAX_GROUP && KEY_ROWS <= MAX_KEY_ROWS &&
          COLS <= MAX_SCORE_COLS,
      "score tile too big");
  const int start = t.lo[i0];
  int end = start;
  for (int r = 0; r < GROUP; ++r) {
    end = std::max(end, t.lo[i0 + r] + t.count[i0 + r]);
  }
  for (int c0 = start; c0 < end; c0 += COLS) {
    ScoreAcc<GROUP, KEY_ROWS, VECS, SPLIT> acc;
    zero_scores<GROUP, KEY_ROWS, VECS, SPLIT>(acc);
    accumulate_scores<GROUP, KEY_ROWS, VECS, SPLIT>(acc, q, i0, D, k, c0);
    sum_splits<GROUP, KEY_ROWS, VECS, SPLIT>(acc);
    store_scores<GROUP, KEY_ROWS, VECS, SPLIT>(acc, t, i0, c0, k_fast, s, s_stride);
  }
}

template <int GROUP, int KEY_ROWS, int VECS, int SPLIT>
inline void score_rows(
    const Tile& t,
    const float* q,
    int D,
    const KeysT& k,
    int k_fast,
    float* s,
    int s_stride) {
  for (int i = 0; i < t.rows; i += GROUP) {
    score_group<GROUP, KEY_ROWS, VECS, SPLIT>(
        t, i, q, D, k, k_fast, s, s_stride);
  }
}

// The tile's scores against `key_rows` (<= MAX_KEY_ROWS) key rows, with the
// register tile that wastes the fewest products on columns outside the
// windows for this kernel size and loads least: the union of 4 windows of
// k <= 5 is one vector, and of 2 windows of k <= 7; past that 4 rows share 16
// columns (exactly the union at k = 13), one key row at a time. Returns the
// key rows done.
inline int score_key_rows(
    const Tile& t,
    int key_rows,
    const float* q,
    int D,
    const KeysT& k,
    int k_fast,
    float* s,
    int s_stride) {
  if (k_fast <= 5) {
    if (key_rows >= 2) {
      score_rows<4, 2, 1, 1>(t, q, D, k, k_fast, s, s_stride);
      return 2;
    }
    score_rows<4, 1, 1, 2>(t, q, D, k, k_fast, s, s_stride);
    return 1;
  }
  if (k_fast <= 7) {
    if (key_rows >= 4) {
      score_rows<2, 4, 1, 1>(t, q, D, k, k_fast, s, s_stride);
      return 4;
    }
    if (key_rows >= 2) {
      score_rows<2, 2, 1, 2>(t, q, D, k, k_fast, s, s_stride);
      return 2;
    }
    score_rows<2, 1, 1, 4>(t, q, D, k, k_fast, s, s_stride);
    return 1;
  }
  score_rows<4, 1, 2, 1>(t, q, D, k, k_fast, s, s_stride);
  return 1;
}

// One query's converted values: key row (io, i1) of outer * inner key rows
// (row-major, as its scores) starts at v + io * outer_stride +
// i1 * inner_stride, at the query's first key.
struct ValueRows {
  const float* v;
  int outer, outer_stride;
  int inner, inner_stride;
};

// o[c] = sum_r sum_j<n p[r * n + j] v_r[j][c] for c in [c0, D_v), in chunks
// of 8 * VECS columns held in registers across every key row; returns the
// first column left over.
template <int VECS>
inline int pv_chunks(
    const float* p,
    const ValueRows& v,
    int n,
    int D_v,
    int c0,
    float* o) {
  for (; c0 + 8 * VECS <= D_v; c0 += 8 * VECS) {
    F32x8 acc[VECS];
    for (int c = 0; c < VECS; ++c) {
      acc[c] = F32x8{};
    }
    const float* pr = p;
    for (int io = 0; io < v.outer; ++io) {
      for (int i1 = 0; i1 < v.inner; ++i1, pr += n) {
        const float* vr = v.v + io * v.outer_stride + i1 * v.inner_stride + c0;
        for (int j = 0; j < n; ++j) {
          const float pj = pr[j];
          const F32x8* vj = reinterpret_cast<const F32x8*>(vr + j * D_v);
          for (int c = 0; c < VECS; ++c) {
            acc[c] += pj * vj[c];
          }
        }
      }
    }
    std::memcpy(o + c0, acc, sizeof(acc));
  }
  return c0;
}

// One query's output row (before normalisation): head dims that are not a
// multiple of PV_COLS (32, 80, 96) finish in chunks of 32 and 8 (fewer
// accumulators, shorter chains hidden less well), then singly.
inline void pv_row(
    const float* p,
    const ValueRows& v,
    int n,
    int D_v,
    float* o) {
  int c0 = pv_chunks<PV_COLS / 8>(p, v, n, D_v, 0, o);
  c0 = pv_chunks<4>(p, v, n, D_v, c0, o);
  c0 = pv_chunks<1>(p, v, n, D_v, c0, o);
  for (; c0 < D_v; ++c0) {
    float acc = 0.0f;
    const float* pr = p;
    for (int io = 0; io < v.outer; ++io) {
      for (int i1 = 0; i1 < v.inner; ++i1, pr += n) {
        const float* vr = v.v + io * v.outer_stride + i1 * v.inner_stride + c0;
        for (int j = 0; j < n; ++j) {
          acc += pr[j] * vr[j * D_v];
        }
      }
    }
    o[c0] = acc;
  }
}

// s[j] = 2^(s[j] - max) for j < n (a multiple of LANES, padded with -inf);
// returns their sum. Every query has at least one neighbour (itself), so the
// sum is positive unless the scores are -inf or NaN, which then propagate as
// in the reference. LANES independent partial results let the loops
// vectorise (one running max or sum is a serial dependency chain).
constexpr int LANES = 8;
inline float softmax_numerators(float* s, int n) {
  float m[LANES], sum[LANES];
  for (int l = 0; l < LANES; ++l) {
    m[l] = -INFINITY;
    sum[l] = 0.0f;
  }
  for (int j = 0; j < n; j += LANES) {
    for (int l = 0; l < LANES; ++l) {
      m[l] = s[j + l] > m[l] ? s[j + l] : m[l];
    }
  }
  float max = -INFINITY;
  for (int l = 0; l < LANES; ++l) {
    max = m[l] > max ? m[l] : max;
  }
  const float shift = max == -INFINITY ? 0.0f : max;
  for (int j = 0; j < n; j += LANES) {
    for (int l = 0; l < LANES; ++l) {
      s[j + l] = exp2_fast(s[j + l] - shift);
      sum[l] += s[j + l];
    }
  }
  float total = 0.0f;
  for (int l = 0; l < LANES; ++l) {
    total += sum[l];
  }
  return total;
}

// Brings `rows` rows of `elems` elements (`elem_stride` apart), `step`
// elements apart, into the caches ahead of use. One head's rows are a few
// cache lines H * D elements apart, too few per page for the hardware
// prefetchers to follow: at H = 8 the loads and stores waited on memory for
// about half the time without this.
template <typename T>
inline void prefetch_rows(
    const T* p,
    stride_t step,
    int rows,
    int elems,
    stride_t elem_stride,
    bool for_write) {
  const stride_t span = ((elems - 1) * elem_stride + 1) * sizeof(T);
  for (int i = 0; i < rows; ++i) {
    const uintptr_t row = reinterpret_cast<uintptr_t>(p + i * step);
    for (uintptr_t a = row & ~uintptr_t(63); a < row + span; a += 64) {
      if (for_write) {
        __builtin_prefetch(reinterpret_cast<const void*>(a), 1, 2);
      } else {
        __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 2);
      }
    }
  }
}

// Scores per query row: every key row's k_fast, rounded up to whole LANES.
inline int padded_scores(int key_rows, int k_fast) {
  return (key_rows * k_fast + LANES - 1) / LANES * LANES;
}

// Windows along the fastest axis of the queries at group indices
// j0 .. j0 + rows - 1 of a dilation group of length m. Window starts and ends
// never decrease along a group, so the union is first .. last row's end.
inline void tile_windows(fa::NaAxis a, int m, int j0, int rows, Tile& t) {
  t.rows = rows;
  t.first = fa::na_group_window(a, m, j0).first;
  for (int i = 0; i < rows; ++i) {
    const fa::NaWindow w = fa::na_group_window(a, m, j0 + i);
    t.lo[i] = w.first - t.first;
    t.count[i] = w.count;
  }
  t.keys = t.lo[rows - 1] + t.count[rows - 1];
  // Rows that pad the last score group: inside the union, storing nothing.
  for (int i = rows; i < rows + MAX_GROUP; ++i) {
    t.lo[i] = t.lo[rows - 1];
    t.count[i] = 0;
  }
}

// A work item's lines: up to MAX_LINES consecutive positions of one dilation
// group along the block axis (the one next slower than the fastest), same
// outer-axis position. Their key rows are the outer axis's window times the
// union of their block-axis windows, SLOTS = outer * span of them, each
// converted once per head and shared by every line that sees it: a line of a
// 2-D 7 x 7 problem sees 7 key rows, 8 lines see 14.
constexpr int MAX_LINES = 8;

struct Block {
  int lines; ///< lines in the block
  int outer; ///< key rows along the outer axis (its window)
  int span; ///< union of the lines' block-axis windows
  int lo[MAX_LINES]; ///< each line's block-axis window start, from the union's
  int count[MAX_LINES]; ///< and length
};

// The axes of a problem as the items walk them: the fastest (tiled), the
// block axis and the outer axis. Absent axes are unused ones {n = k = d = 1}.
struct AxisRoles {
  int fast, block, outer;
};

inline AxisRoles axis_roles(int n_axes) {
  AxisRoles r;
  r.fast = n_axes - 1;
  r.block = r.fast >= 1 ? r.fast - 1 : 1;
  r.outer = 3 - r.fast - r.block;
  return r;
}

template <typename T>
void attend_line(
    const NaProblem& pr,
    const Tile& t,
    const Block& blk,
    int line,
    const T* q,
    T* o,
    stride_t q_step,
    stride_t o_step,
    Scratch& sc) {
  const fa::NaParams& p = pr.p;
  const int D = p.D, D_v = p.D_v;
  const int k_fast = p.axes[p.n_axes - 1].k;
  const int inner = blk.count[line];
  const int n_rows = blk.outer * inner;
  const int s_stride = padded_scores(n_rows, k_fast);
  const int kt_stride = t.keys + MAX_SCORE_COLS;
  const int kt_slot = D * kt_stride;
  const int v_slot = t.keys * D_v;

  load_rows(q, q_step, pr.q_dstride, t.rows, D, p.scale_log2, sc.q.data());

  // ---- S = Q K^T, up to MAX_KEY_ROWS key rows at a time ----
  // The line's key rows with one outer position are consecutive slots.
  for (int io = 0; io < blk.outer; ++io) {
    const int slot0 = io * blk.span + blk.lo[line];
    for (int r = 0; r < inner;) {
      const KeysT keys{
          sc.kt.data() + (slot0 + r) * kt_slot, kt_stride, kt_slot};
      const int done = score_key_rows(
          t, std::min(MAX_KEY_ROWS, inner - r), sc.q.data(), D, keys, k_fast,
          sc.s.data() + (io * inner + r) * k_fast, s_stride);
      r += done;
    }
  }

  // ---- softmax ----
  // Key row r's scores sit at r * k_fast; a row with a shorter (causal)
  // window is compacted so each row's n_rows * count scores are contiguous,
  // then padded with -inf (probability 0) to whole vectors.
  for (int i = 0; i < t.rows; ++i) {
    float* s = sc.s.data() + i * s_stride;
    const int n = t.count[i];
    if (n != k_fast) {
      for (int r = 1; r < n_rows; ++r) {
        std::memmove(s + r * n, s + r * k_fast, n * sizeof(float));
      }
    }
    for (int j = n_rows * n; j < s_stride; ++j) {
      s[j] = -INFINITY;
    }
    sc.l[i] = softmax_numerators(s, s_stride);
  }

  // ---- O = P V, store ----
  const float* v_line = sc.v.data() + blk.lo[line] * v_slot;
  for (int i = 0; i < t.rows; ++i) {
    const ValueRows rows{
        v_line + t.lo[i] * D_v, blk.outer, blk.span * v_slot, inner, v_slot};
    pv_row(sc.s.data() + i * s_stride, rows, t.count[i], D_v, sc.o.data());
    store_row(sc.o.data(), D_v, 1.0f / sc.l[i], o + i * o_step);
  }
}

// Converts one head's key rows of a block: K transposed (keys along the
// vector lanes, for the score tiles) and V row-major.
template <typename T>
void convert_slots(
    const NaProblem& pr,
    const Tile& t,
    const T* k,
    const T* v,
    stride_t k_step,
    stride_t v_step,
    Scratch& sc) {
  const int D = pr.p.D, D_v = pr.p.D_v;
  const int kt_stride = t.keys + MAX_SCORE_COLS;
  for (size_t slot = 0; slot < sc.k_slot.size(); ++slot) {
    load_rows(
        k + sc.k_slot[slot], k_step, pr.k_dstride, t.keys, D, 1.0f,
        sc.k.data());
    transpose(
        sc.k.data(), t.keys, D, sc.kt.data() + slot * D * kt_stride,
        kt_stride);
    load_rows(
        v + sc.v_slot[slot], v_step, pr.v_dstride, t.keys, D_v, 1.0f,
        sc.v.data() + slot * t.keys * D_v);
  }
}

// Lines per block: MAX_LINES, halved while the block's converted keys would
// outgrow 768 KiB (of the 1 MiB L2 of the EPYC this was measured on: 2-D
// 7 x 7 at D = 64 keeps 8 lines, 3-D 5 x 5 x 5 two; with 512 KiB the 3-D
// case got one line and ran about 25% slower) or the items would not give
// every thread four.
inline int lines_per_block(const fa::NaParams& p, const AxisRoles& ax) {
  const fa::NaAxis fast = p.axes[ax.fast], block = p.axes[ax.block];
  const int keys = std::min(TILE_Q, fa::na_group_length(fast.n, fast.d, 0)) +
      fast.k - 1;
  const size_t slot_bytes = sizeof(float) *
      (static_cast<size_t>(p.D) * (keys + MAX_SCORE_COLS) +
       static_cast<size_t>(keys) * p.D_v);
  const int group = fa::na_group_length(block.n, block.d, 0);
  int lines = std::min(MAX_LINES, group);
  auto items = [&](int l) {
    const fa::NaAxis outer = p.axes[ax.outer];
    const long tiles = (fa::na_group_length(fast.n, fast.d, 0) + TILE_Q - 1) /
        TILE_Q * fast.d;
    return static_cast<long>(p.B) * outer.n * block.d * ((group + l - 1) / l) *
        tiles;
  };
  while (lines > 1 &&
         (p.axes[ax.outer].k * (lines + block.k - 1) * slot_bytes >
              (size_t(768) << 10) ||
          items(lines) < 4L * num_threads())) {
    lines /= 2;
  }
  return lines;
}

/// The block of `lines` lines of the block axis from group index jb0 (of a
/// dilation group of m_block positions): each line's window, from the
/// union's first key `union_first`.
inline Block line_block(
    fa::NaAxis block_ax,
    int m_block,
    int jb0,
    int lines,
    int& union_first) {
  Block blk;
  blk.lines = lines;
  union_first = fa::na_group_window(block_ax, m_block, jb0).first;
  for (int l = 0; l < blk.lines; ++l) {
    const fa::NaWindow w = fa::na_group_window(block_ax, m_block, jb0 + l);
    blk.lo[l] = w.first - union_first;
    blk.count[l] = w.count;
  }
  blk.span = blk.lo[blk.lines - 1] + blk.count[blk.lines - 1];
  return blk;
}

/// A tile's rows of head 0 and the strides between them: q and the output
/// from the block's first line, k and v at the tile's first key (of slot
/// 0); steps along the fastest axis's group, lines along the block axis's.
template <typename T>
struct TileRows {
  const T* q;
  T* o;
  const T* k;
  const T* v;
  stride_t q_step, k_step, v_step, o_step;
  stride_t q_line, o_line;
};

/// Asks for the rows of head `hn` ahead of their use.
template <typename T>
void prefetch_head(
    const NaProblem& pr,
    const Tile& t,
    const Block& blk,
    const TileRows<T>& r,
    int hn,
    const Scratch& sc) {
  const fa::NaParams& p = pr.p;
  for (size_t slot = 0; slot < sc.k_slot.size(); ++slot) {
    prefetch_rows(
        r.k + hn * p.k_strides[4] + sc.k_slot[slot], r.k_step, t.keys, p.D,
        pr.k_dstride, false);
    prefetch_rows(
        r.v + hn * p.v_strides[4] + sc.v_slot[slot], r.v_step, t.keys, p.D_v,
        pr.v_dstride, false);
  }
  for (int l = 0; l < blk.lines; ++l) {
    prefetch_rows(
        r.q + hn * p.q_strides[4] + l * r.q_line, r.q_step, t.rows, p.D,
        pr.q_dstride, false);
    prefetch_rows(
        r.o + hn * p.o_strides[4] + l * r.o_line, r.o_step, t.rows, p.D_v, 1,
        true);
  }
}

/// Every head of a tile's block: each head's K and V converted once, then
/// its lines attended, with the rows of the head two on loaded meanwhile
/// (the first head also starts its own and the next one's).
template <typename T>
void attend_heads(
    const NaProblem& pr,
    const Tile& t,
    const Block& blk,
    const TileRows<T>& r,
    Scratch& sc) {
  const fa::NaParams& p = pr.p;
  for (int h = 0; h < p.H; ++h) {
    for (int ahead = h == 0 ? 0 : 2; ahead <= 2 && h + ahead < p.H; ++ahead) {
      prefetch_head(pr, t, blk, r, h + ahead, sc);
    }
    convert_slots(
        pr, t, r.k + h * p.k_strides[4], r.v + h * p.v_strides[4], r.k_step,
        r.v_step, sc);
    for (int l = 0; l < blk.lines; ++l) {
      attend_line(
          pr, t, blk, l, r.q + h * p.q_strides[4] + l * r.q_line,
          r.o + h * p.o_strides[4] + l * r.o_line, r.q_step, r.o_step, sc);
    }
  }
}

template <typename T>
void run_typed(const NaProblem& pr) {
  const fa::NaParams& p = pr.p;
  const AxisRoles ax = axis_roles(p.n_axes);
  const fa::NaAxis fast_ax = p.axes[ax.fast], block_ax = p.axes[ax.block],
                   outer_ax = p.axes[ax.outer];
  const int longest_group = fa::na_group_length(fast_ax.n, fast_ax.d, 0);
  const int tiles = (longest_group + TILE_Q - 1) / TILE_Q;
  const int lines_max = lines_per_block(p, ax);
  const int longest_block_group =
      fa::na_group_length(block_ax.n, block_ax.d, 0);
  const int blocks = (longest_block_group + lines_max - 1) / lines_max;
  // Items: batch, outer position, block-axis dilation group, block, fastest
  // axis dilation group, tile.
  const int items = p.B * outer_ax.n * block_ax.d * blocks * fast_ax.d * tiles;
  parallel_for(items, [&](int item) {
    int rest = item;
    const int tile = rest % tiles;
    rest /= tiles;
    const int group = rest % fast_ax.d;
    rest /= fast_ax.d;
    const int block = rest % blocks;
    rest /= blocks;
    const int block_group = rest % block_ax.d;
    rest /= block_ax.d;
    const int outer_pos = rest % outer_ax.n;
    const int b = rest / outer_ax.n;

    const int m = fa::na_group_length(fast_ax.n, fast_ax.d, group);
    const int m_block =
        fa::na_group_length(block_ax.n, block_ax.d, block_group);
    const int j0 = tile * TILE_Q;
    const int jb0 = block * lines_max;
    if (j0 >= m || jb0 >= m_block) {
      return; // shorter dilation groups have fewer tiles and blocks
    }

    Tile t;
    tile_windows(fast_ax, m, j0, std::min(TILE_Q, m - j0), t);
    int union_first = 0;
    Block blk = line_block(
        block_ax, m_block, jb0, std::min(lines_max, m_block - jb0),
        union_first);
    const fa::NaWindow outer_win = fa::na_window(outer_ax, outer_pos);
    blk.outer = outer_win.count;

    // Offsets of every slot (batch 0, head 0, the tile's first key).
    thread_local Scratch sc;
    sc.k_slot.clear();
    sc.v_slot.clear();
    const int qf = 1 + ax.fast, qb = 1 + ax.block, qo = 1 + ax.outer;
    for (int io = 0; io < blk.outer; ++io) {
      const int pos_o = outer_win.first + io * outer_ax.d;
      for (int ub = 0; ub < blk.span; ++ub) {
        const int pos_b = block_group + (union_first + ub) * block_ax.d;
        sc.k_slot.push_back(pos_o * p.k_strides[qo] + pos_b * p.k_strides[qb]);
        sc.v_slot.push_back(pos_o * p.v_strides[qo] + pos_b * p.v_strides[qb]);
      }
    }
    const int slots = static_cast<int>(sc.k_slot.size());
    sc.q.resize((TILE_Q + MAX_GROUP) * p.D);
    sc.k.resize(t.keys * p.D);
    sc.kt.resize(slots * p.D * (t.keys + MAX_SCORE_COLS));
    sc.v.resize(slots * t.keys * p.D_v);
    sc.s.resize(TILE_Q * padded_scores(blk.outer * block_ax.k, fast_ax.k));
    sc.o.resize(p.D_v);
    sc.l.resize(TILE_Q);

    // Strides along the groups: d positions of the fastest and block axes.
    const int q_pos = group + j0 * fast_ax.d;
    const int k_pos = group + t.first * fast_ax.d;
    const int line_pos = block_group + jb0 * block_ax.d;
    const TileRows<T> r = {
        static_cast<const T*>(pr.q) + b * p.q_strides[0] +
            outer_pos * p.q_strides[qo] + line_pos * p.q_strides[qb] +
            q_pos * p.q_strides[qf],
        static_cast<T*>(pr.out) + b * p.o_strides[0] +
            outer_pos * p.o_strides[qo] + line_pos * p.o_strides[qb] +
            q_pos * p.o_strides[qf],
        static_cast<const T*>(pr.k) + b * p.k_strides[0] +
            k_pos * p.k_strides[qf],
        static_cast<const T*>(pr.v) + b * p.v_strides[0] +
            k_pos * p.v_strides[qf],
        fast_ax.d * p.q_strides[qf],
        fast_ax.d * p.k_strides[qf],
        fast_ax.d * p.v_strides[qf],
        fast_ax.d * p.o_strides[qf],
        block_ax.d * p.q_strides[qb],
        block_ax.d * p.o_strides[qb]};
    attend_heads(pr, t, blk, r, sc);
  });
}

} // namespace na

void run(const NaProblem& pr) {
  switch (pr.dtype) {
    case Dtype::Float16:
      return na::run_typed<mlx::core::float16_t>(pr);
    case Dtype::BFloat16:
      return na::run_typed<mlx::core::bfloat16_t>(pr);
    case Dtype::Float32:
      return na::run_typed<float>(pr);
  }
}

} // namespace mlx_fused_attn::cpu::FA_CPU_ISA
