// The fused CPU attention kernel. Included once per instruction set by
// kernel_<isa>.cpp with FA_CPU_ISA naming the namespace, so the same source
// is compiled with and without AVX2/FMA/F16C and picked at run time.
//
// Blocked online softmax: a work item is BLOCK_Q rows of one (batch, head);
// it streams BLOCK_K keys at a time, converted to fp32 (K transposed so both
// products are unit-stride axpy loops the compiler vectorises), keeping the
// running max m, sum l and output O in fp32. Scores live in the exp2 domain:
// the scale times log2(e) is folded into Q once.
#pragma once
#ifndef FA_CPU_ISA
#error "define FA_CPU_ISA before including attention_kernel_impl.h"
#endif

#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "mlx_fused_attn/backend/cpu/problem.h"
#include "mlx_fused_attn/backend/cpu/simd_math.h"
#include "mlx_fused_attn/backend/cpu/thread_pool.h"

namespace mlx_fused_attn::cpu::FA_CPU_ISA {

using fa::stride_t;

// 64 query rows amortise each converted K/V block (measured: 32 rows spent a
// third of an fp16 call converting); 64 keys keep the fp32 K and V blocks
// (64 x D each) inside L1/L2 for D <= 128.
constexpr int BLOCK_Q = 64;
constexpr int BLOCK_K = 64;
// A masked score: equal for every masked key and far below any real one, so a
// row masked everywhere averages V uniformly, as mx.fast's finfo.min does.
constexpr float MASKED = -FLT_MAX;

// Kt[d][j] = k[j][d]; columns past `rows` are zero so the score loop can run
// the full block width.
template <typename T>
void load_transposed(
    const T* src,
    stride_t row_stride,
    stride_t col_stride,
    int rows,
    int cols,
    float* row,
    float* dst) {
  for (int j = 0; j < rows; ++j) {
    load_rows(src + j * row_stride, 0, col_stride, 1, cols, 1.0f, row);
    for (int d = 0; d < cols; ++d) {
      dst[d * BLOCK_K + j] = row[d];
    }
  }
  for (int d = 0; d < cols; ++d) {
    for (int j = rows; j < BLOCK_K; ++j) {
      dst[d * BLOCK_K + j] = 0.0f;
    }
  }
}

// The calling thread's scratch of type S for head dims (D, D_v), kept
// across the work items and calls it runs.
template <typename S>
S& thread_scratch(int D, int D_v) {
  thread_local std::unique_ptr<S> scratch;
  thread_local int scratch_D = -1, scratch_Dv = -1;
  if (!scratch || scratch_D != D || scratch_Dv != D_v) {
    scratch = std::make_unique<S>(D, D_v);
    scratch_D = D;
    scratch_Dv = D_v;
  }
  return *scratch;
}

struct Scratch {
  std::vector<float> q, row, kt, v, s, o, m, l;
  Scratch(int D, int D_v)
      : q(BLOCK_Q * D),
        row(D),
        kt(D * BLOCK_K),
        v(BLOCK_K * D_v),
        s(BLOCK_Q * BLOCK_K),
        o(BLOCK_Q * D_v),
        m(BLOCK_Q),
        l(BLOCK_Q) {}
};

// Register blocking: the products below keep TILE_ROWS x TILE_COLS fp32
// accumulators live across their inner loop (8 vector registers with AVX2,
// leaving the rest for operands), so each loaded vector of K or V feeds
// TILE_ROWS fused multiply-adds and nothing is stored until the tile is done.
constexpr int TILE_ROWS = 2;
constexpr int TILE_COLS = 32;
// Reductions run over LANES independent partial results so they vectorise
// (a single running sum would be a serial dependency chain).
constexpr int LANES = 8;
static_assert(BLOCK_K % TILE_COLS == 0, "score tiles must cover the block");
static_assert(BLOCK_Q % TILE_ROWS == 0, "row tiles must cover the block");

// S[i][:] = Q[i][:] . Kt for rows [0, rows) (rounded up to TILE_ROWS; the
// extra rows of Q are zero or stale and their scores are never read).
inline void scores(const float* q, const float* kt, int rows, int D, float* s) {
  for (int i = 0; i < rows; i += TILE_ROWS) {
    for (int c0 = 0; c0 < BLOCK_K; c0 += TILE_COLS) {
      float acc[TILE_ROWS][TILE_COLS] = {};
      for (int d = 0; d < D; ++d) {
        const float* kd = kt + d * BLOCK_K + c0;
        for (int r = 0; r < TILE_ROWS; ++r) {
          const float qd = q[(i + r) * D + d];
          for (int c = 0; c < TILE_COLS; ++c) {
            acc[r][c] += qd * kd[c];
          }
        }
      }
      for (int r = 0; r < TILE_ROWS; ++r) {
        std::memcpy(s + (i + r) * BLOCK_K + c0, acc[r], sizeof(acc[r]));
      }
    }
  }
}

// O[i][:] += P[i][:n] V for rows [0, rows) rounded up to TILE_ROWS.
inline void accumulate_pv(
    const float* p,
    const float* v,
    int rows,
    int n,
    int D_v,
    float* o) {
  for (int i = 0; i < rows; i += TILE_ROWS) {
    int c0 = 0;
    for (; c0 + TILE_COLS <= D_v; c0 += TILE_COLS) {
      float acc[TILE_ROWS][TILE_COLS];
      for (int r = 0; r < TILE_ROWS; ++r) {
        std::memcpy(acc[r], o + (i + r) * D_v + c0, sizeof(acc[r]));
      }
      for (int j = 0; j < n; ++j) {
        const float* vj = v + j * D_v + c0;
        for (int r = 0; r < TILE_ROWS; ++r) {
          const float pj = p[(i + r) * BLOCK_K + j];
          for (int c = 0; c < TILE_COLS; ++c) {
            acc[r][c] += pj * vj[c];
          }
        }
      }
      for (int r = 0; r < TILE_ROWS; ++r) {
        std::memcpy(o + (i + r) * D_v + c0, acc[r], sizeof(acc[r]));
      }
    }
    // Head dims that are not a multiple of TILE_COLS (80, 96) finish here.
    for (int r = 0; r < TILE_ROWS; ++r) {
      float* oi = o + (i + r) * D_v;
      for (int j = 0; j < n; ++j) {
        const float pj = p[(i + r) * BLOCK_K + j];
        const float* vj = v + j * D_v;
        for (int c = c0; c < D_v; ++c) {
          oi[c] += pj * vj[c];
        }
      }
    }
  }
}

inline float row_max(const float* s, int n, float init) {
  float lanes[LANES];
  for (int l = 0; l < LANES; ++l) {
    lanes[l] = init;
  }
  int j = 0;
  for (; j + LANES <= n; j += LANES) {
    for (int l = 0; l < LANES; ++l) {
      lanes[l] = s[j + l] > lanes[l] ? s[j + l] : lanes[l];
    }
  }
  float m = init;
  for (int l = 0; l < LANES; ++l) {
    m = lanes[l] > m ? lanes[l] : m;
  }
  for (; j < n; ++j) {
    m = s[j] > m ? s[j] : m;
  }
  return m;
}

// s[j] = 2^(s[j] - shift) for j < n; returns their sum.
inline float exp2_and_sum(float* s, int n, float shift) {
  float lanes[LANES] = {};
  int j = 0;
  for (; j + LANES <= n; j += LANES) {
    for (int l = 0; l < LANES; ++l) {
      s[j + l] = exp2_fast(s[j + l] - shift);
      lanes[l] += s[j + l];
    }
  }
  float sum = 0.0f;
  for (; j < n; ++j) {
    s[j] = exp2_fast(s[j] - shift);
    sum += s[j];
  }
  for (int l = 0; l < LANES; ++l) {
    sum += lanes[l];
  }
  return sum;
}

// The online-softmax update of one row over `n` new scores (in place: the
// scores become the probabilities P): returns the factor 2^(m_old - m_new)
// by which the row's running output must be rescaled.
inline float softmax_step(float* s, int n, float& m, float& l) {
  const float m_new = row_max(s, n, m);
  // A row that has seen only -inf (additive mask) keeps l = 0 and O = 0;
  // shifting by 0 instead of -inf avoids inf - inf = NaN before a real key.
  const float shift = m_new == -INFINITY ? 0.0f : m_new;
  const float alpha = exp2_fast(m - shift);
  l = l * alpha + exp2_and_sum(s, n, shift);
  m = m_new;
  return alpha;
}

// Where row `i` of head `h` of batch `b` is in the LSE (backward_params.h).
inline stride_t lse_row(const fa::AttnParams& p, int b, int h, int i) {
  return (stride_t(b) * p.H_q + h) * p.L_q + i;
}

// Whether a bool mask shows rows [0, rows) of its slice `m` (row and key
// strides ms[2], ms[3]) any key of [k0, k0 + n).
inline bool
shows_any(const bool* m, const stride_t* ms, int rows, int k0, int n) {
  for (int i = 0; i < rows; ++i) {
    const bool* row = m + i * ms[2] + k0 * ms[3];
    for (int j = 0; j < n; ++j) {
      if (row[j * ms[3]]) {
        return true;
      }
    }
  }
  return false;
}

// Whether every row of [0, rows) sees some key of [0, L_k).
inline bool
every_row_sees_a_key(const bool* m, const stride_t* ms, int rows, int L_k) {
  for (int i = 0; i < rows; ++i) {
    if (!shows_any(m + i * ms[2], ms, 1, 0, L_k)) {
      return false;
    }
  }
  return true;
}

template <typename T>
struct Inputs {
  const T* q;
  const T* sinks;
  T* out;
  /// Packed GQA (attention_plan.h): a block's rows are query heads, each
  /// with its own sink, sinks[h * L_q + row]; else sinks[h].
  bool sinks_by_row = false;
};

// The keys and values of every (batch, key/value head) as the float kernel
// reads them: strided rows of T, converted to fp32 a block at a time.
template <typename T>
struct FloatKv {
  const Problem& pr;

  // Keys [k0, k0 + n) of head h of batch b into sc.kt (transposed), their
  // values into sc.v.
  void load(int b, int h, int k0, int n, Scratch& sc) const {
    const fa::AttnParams& p = pr.p;
    const T* k = static_cast<const T*>(pr.k) + b * p.k_strides[0] +
        h * p.k_strides[1] + k0 * p.k_strides[2];
    const T* v = static_cast<const T*>(pr.v) + b * p.v_strides[0] +
        h * p.v_strides[1] + k0 * p.v_strides[2];
    load_transposed(
        k, p.k_strides[2], pr.k_dstride, n, p.D, sc.row.data(), sc.kt.data());
    load_rows(v, p.v_strides[2], pr.v_dstride, n, p.D_v, 1.0f, sc.v.data());
  }
};

// What one work item attends to: keys [begin, end), the split of the keys
// it is (split keys: split 0 also takes the sinks), and where its rows go:
// normalised into the output, or, with `partials`, as running max, sum and
// unnormalised output for merge_partials.
struct Partials {
  float* o; ///< [splits][B * H_q * L_q][D_v]
  float* m; ///< [splits][B * H_q * L_q], exp2 domain
  float* l; ///< as m
  int64_t rows; ///< B * H_q * L_q
};
struct KeySpan {
  int begin;
  int end;
  int split;
  const Partials* partials;
};

/// The row state before any key: the sink's logit as the first maximum
/// and a sum of one (in the first split of the keys only), or none; the
/// output zero.
template <typename T>
void start_rows(
    const Inputs<T>& in,
    const fa::AttnParams& p,
    int h,
    int q0,
    int rows,
    const KeySpan& keys,
    Scratch& sc) {
  const bool sinks = in.sinks != nullptr && keys.split == 0;
  for (int i = 0; i < rows; ++i) {
    const int sink = in.sinks_by_row ? h * p.L_q + q0 + i : h;
    sc.m[i] = sinks ? to_float(in.sinks[sink]) * LOG2E : -INFINITY;
    sc.l[i] = sinks ? 1.0f : 0.0f;
  }
  std::fill(sc.o.begin(), sc.o.end(), 0.0f);
}

/// Where the keys of the block of rows from q0 end. Causal: keys past the
/// last row's diagonal are never seen, unless a row of the block is masked
/// everywhere (L_q > L_k): that row averages all of V.
template <MaskKind MASK>
int key_end(const fa::AttnParams& p, int q0, int rows, const KeySpan& keys) {
  if (MASK == MaskKind::Causal && q0 + p.causal_offset >= 0) {
    return std::min(keys.end, q0 + rows + p.causal_offset);
  }
  return keys.end;
}

/// The mask applied to the scores `s` of one row (`row`) and the `n` keys
/// from k0; `base` is the mask's offset of that row and key k0.
template <typename T, MaskKind MASK>
void mask_row(
    const Problem& pr,
    float* s,
    int n,
    int row,
    int k0,
    stride_t base) {
  const stride_t step = pr.p.mask_strides[3];
  if (MASK == MaskKind::Causal) {
    for (int j = 0; j < n; ++j) {
      s[j] = k0 + j > row + pr.p.causal_offset ? MASKED : s[j];
    }
  } else if (MASK == MaskKind::Bool) {
    const bool* mrow = static_cast<const bool*>(pr.mask_data) + base;
    for (int j = 0; j < n; ++j) {
      s[j] = mrow[j * step] ? s[j] : MASKED;
    }
  } else if (MASK == MaskKind::Additive) {
    const T* mrow = static_cast<const T*>(pr.mask_data) + base;
    for (int j = 0; j < n; ++j) {
      s[j] += to_float(mrow[j * step]) * LOG2E;
    }
  }
}

/// The row's output scaled by the online softmax's correction.
inline void rescale_row(float* o, int D_v, float alpha) {
  if (alpha != 1.0f) {
    for (int c = 0; c < D_v; ++c) {
      o[c] *= alpha;
    }
  }
}

/// How a row is stored: its output, `held` times the held output's row plus
/// `acc` times its accumulator, and its natural-log LSE.
struct RowStore {
  float held;
  float acc;
  float lse;
};

/// A row of its own: the accumulator divided by its sum l. A row whose
/// every logit was -inf ends with l = 0: 0 / 0 = NaN, as the softmax of all
/// -inf is. One that saw only MASKED scores (no visible key) has LSE -inf.
inline RowStore plain_row(float m, float l) {
  return {0.0f, 1.0f / l, m == MASKED ? -INFINITY : (m + std::log2(l)) / LOG2E};
}

/// A row merged with the held output, whose LSE is `held` (Problem::merge):
/// weights from the two LSEs (log2 domain). A row that saw no key here
/// (MASKED, or no score) keeps what it held; one that held no key (LSE
/// -inf, its output anything) takes this call's.
inline RowStore merged_row(float held, float m, float l) {
  const bool sees = m != MASKED && l > 0.0f;
  const float mine = sees ? m + std::log2(l) : -INFINITY;
  const float held2 = held * LOG2E;
  const float top = held2 > mine ? held2 : mine;
  // Both -inf: the row keeps its held output and LSE.
  const float w_held =
      held2 == -INFINITY ? float(!sees) : std::exp2(held2 - top);
  const float w_mine = sees ? std::exp2(mine - top) : 0.0f;
  const float total = w_held + w_mine;
  return {
      w_held / total, sees ? w_mine / (total * l) : 0.0f,
      sees ? (top + std::log2(total)) / LOG2E : held};
}

/// The rows' outputs stored (and their LSE where asked), each its own or,
/// where the problem merges, merged with the held output and LSE, which
/// may be the buffers written: the sum in fp32, rounded once to T.
template <typename T>
void store_rows(
    const Problem& pr,
    const Inputs<T>& in,
    int b,
    int h,
    int q0,
    int rows,
    const Scratch& sc) {
  const fa::AttnParams& p = pr.p;
  const fa::stride_t* hs = pr.held_o_strides;
  const fa::stride_t* ls = pr.held_lse_strides;
  for (int i = 0; i < rows; ++i) {
    const int row = q0 + i;
    const RowStore w = pr.merge
        ? merged_row(
              pr.held_lse[b * ls[0] + h * ls[1] + row * ls[2]], sc.m[i],
              sc.l[i])
        : plain_row(sc.m[i], sc.l[i]);
    const T* ho = static_cast<const T*>(pr.held_out);
    if (pr.merge) {
      ho += b * hs[0] + h * hs[1] + row * hs[2];
    }
    T* o = in.out + b * p.o_strides[0] + h * p.o_strides[1] +
        row * p.o_strides[2];
    const float* acc = sc.o.data() + size_t(i) * p.D_v;
    for (int d = 0; d < p.D_v; ++d) {
      const float mine = w.acc * acc[d];
      o[d] = from_float<T>(
          w.held == 0.0f ? mine : w.held * to_float(ho[d * hs[3]]) + mine);
    }
    if (pr.lse != nullptr) {
      pr.lse[lse_row(p, b, h, row)] = w.lse;
    }
  }
}

/// The rows' running max, sum and unnormalised output, as one split of the
/// keys leaves them for the merge.
inline void store_partials(
    const fa::AttnParams& p,
    const KeySpan& keys,
    int b,
    int h,
    int q0,
    int rows,
    const Scratch& sc) {
  const Partials& part = *keys.partials;
  const int64_t first = keys.split * part.rows + lse_row(p, b, h, q0);
  std::memcpy(part.m + first, sc.m.data(), rows * sizeof(float));
  std::memcpy(part.l + first, sc.l.data(), rows * sizeof(float));
  std::memcpy(
      part.o + first * p.D_v, sc.o.data(), size_t(rows) * p.D_v * sizeof(float));
}

template <typename T, MaskKind MASK, typename KV>
void attend(
    const Problem& pr,
    const Inputs<T>& in,
    const KV& kv,
    int b,
    int h,
    int q0,
    const KeySpan& keys,
    Scratch& sc) {
  const fa::AttnParams& p = pr.p;
  const int D = p.D, D_v = p.D_v;
  const int rows = std::min(BLOCK_Q, p.L_q - q0);
  const int h_kv = h / p.gqa_factor;

  const T* q = in.q + b * p.q_strides[0] + h * p.q_strides[1] +
      q0 * p.q_strides[2];
  load_rows(q, p.q_strides[2], pr.q_dstride, rows, D, p.scale_log2, sc.q.data());
  start_rows(in, p, h, q0, rows, keys, sc);
  const int k_end = key_end<MASK>(p, q0, rows, keys);
  // A bool mask's key blocks that hide every score of these rows are
  // skipped (padding, windows), unless a row hides every key: it averages
  // all of V.
  const stride_t* ms = p.mask_strides;
  const stride_t mask_rows = b * ms[0] + h * ms[1] + q0 * ms[2];
  const bool* bool_rows = MASK == MaskKind::Bool
      ? static_cast<const bool*>(pr.mask_data) + mask_rows
      : nullptr;
  const bool skip_hidden = MASK == MaskKind::Bool &&
      every_row_sees_a_key(bool_rows, ms, rows, p.L_k);

  for (int k0 = keys.begin; k0 < k_end; k0 += BLOCK_K) {
    const int n = std::min(BLOCK_K, k_end - k0);
    if (skip_hidden && !shows_any(bool_rows, ms, rows, k0, n)) {
      continue;
    }
    kv.load(b, h_kv, k0, n, sc);
    scores(sc.q.data(), sc.kt.data(), rows, D, sc.s.data());

    for (int i = 0; i < rows; ++i) {
      float* s = sc.s.data() + i * BLOCK_K;
      mask_row<T, MASK>(
          pr, s, n, q0 + i, k0, mask_rows + i * ms[2] + k0 * ms[3]);
      rescale_row(
          sc.o.data() + i * D_v, D_v, softmax_step(s, n, sc.m[i], sc.l[i]));
    }
    accumulate_pv(sc.s.data(), sc.v.data(), rows, n, D_v, sc.o.data());
  }
  if (keys.partials != nullptr) {
    store_partials(p, keys, b, h, q0, rows, sc);
  } else {
    store_rows(pr, in, b, h, q0, rows, sc);
  }
}

template <typename T, MaskKind MASK>
void run_typed(const Problem& pr) {
  const fa::AttnParams& p = pr.p;
  const Inputs<T> in{
      static_cast<const T*>(pr.q),
      static_cast<const T*>(pr.sinks),
      static_cast<T*>(pr.out)};
  const FloatKv<T> kv{pr};
  const KeySpan keys{0, p.L_k, 0, nullptr};
  const int q_blocks = (p.L_q + BLOCK_Q - 1) / BLOCK_Q;
  const int items = p.B * p.H_q * q_blocks;
  parallel_for(items, [&](int item) {
    const int qb = item % q_blocks;
    const int bh = item / q_blocks;
    attend<T, MASK>(
        pr, in, kv, bh / p.H_q, bh % p.H_q, qb * BLOCK_Q, keys,
        thread_scratch<Scratch>(p.D, p.D_v));
  });
}

template <typename T>
struct TypeTag {
  using type = T;
};
template <MaskKind M>
using MaskTag = std::integral_constant<MaskKind, M>;

// fn(TypeTag<T>{}, MaskTag<MASK>{}) for a problem's element type and mask
// kind: the one place that lists the kernels' instantiations.
template <typename Fn>
void for_kernel_types(Dtype dtype, MaskKind mask, Fn&& fn) {
  const auto with_mask = [&](auto type) {
    switch (mask) {
      case MaskKind::None:
        return fn(type, MaskTag<MaskKind::None>{});
      case MaskKind::Causal:
        return fn(type, MaskTag<MaskKind::Causal>{});
      case MaskKind::Bool:
        return fn(type, MaskTag<MaskKind::Bool>{});
      case MaskKind::Additive:
        return fn(type, MaskTag<MaskKind::Additive>{});
    }
  };
  switch (dtype) {
    case Dtype::Float16:
      return with_mask(TypeTag<mlx::core::float16_t>{});
    case Dtype::BFloat16:
      return with_mask(TypeTag<mlx::core::bfloat16_t>{});
    case Dtype::Float32:
      return with_mask(TypeTag<float>{});
  }
}

void run(const Problem& pr) {
  for_kernel_types(pr.dtype, pr.mask, [&](auto type, auto mask) {
    run_typed<typename decltype(type)::type, decltype(mask)::value>(pr);
  });
}

} // namespace mlx_fused_attn::cpu::FA_CPU_ISA
