// The fused CPU neighborhood-attention kernel. Included once per instruction
// set by kernel_<isa>.cpp (FA_CPU_ISA names the namespace).
//
// Each query visits only its own neighborhood (the product of the kernel
// sizes, at most a few thousand keys), so its scores fit in a small buffer
// and are softmaxed in two passes (max, then exp2 and sum), no online
// rescaling. A work item is a run of consecutive tokens of one batch entry,
// all heads: heads-last tensors keep every head of a token in one contiguous
// run, whereas walking one head across tokens strides H * D elements and
// missed the TLB on every row (measured 5x slower at H = 16). fp32
// throughout, scale folded into q in the exp2 domain.
#ifndef FA_CPU_ISA
#error "define FA_CPU_ISA before including na_kernel_impl.h"
#endif

#include <cmath>
#include <vector>

#include "mlx_fused_attn/backend/cpu/problem.h"
#include "mlx_fused_attn/backend/cpu/simd_math.h"
#include "mlx_fused_attn/backend/cpu/thread_pool.h"
#include "mlx_fused_attn/na_window.h"

namespace mlx_fused_attn::cpu::FA_CPU_ISA {

namespace na {

// Tokens per work item: enough to amortise a claim from the pool, few enough
// that a 2-D or 3-D problem still spreads over every thread.
constexpr int TOKENS_PER_ITEM = 32;

inline float dot(const float* a, const float* b, int n) {
  float lanes[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      lanes[l] += a[i + l] * b[i + l];
    }
  }
  float s = 0.0f;
  for (; i < n; ++i) {
    s += a[i] * b[i];
  }
  for (int l = 0; l < 8; ++l) {
    s += lanes[l];
  }
  return s;
}

template <typename T>
inline void load(const T* src, fa::stride_t stride, int n, float mul, float* dst) {
  if (stride == 1) {
    convert_row(src, n, mul, dst);
  } else {
    for (int i = 0; i < n; ++i) {
      dst[i] = to_float(src[i * stride]) * mul;
    }
  }
}

struct Scratch {
  std::vector<float> q, row, s, o;
  std::vector<fa::stride_t> k_off, v_off;
};

// The neighbours of `token` as offsets (head 0 of batch 0) into k and v.
inline void neighbours(
    const fa::NaParams& p,
    int token,
    int* coord,
    Scratch& sc) {
  for (int a = fa::kNaMaxAxes - 1; a >= p.n_axes; --a) {
    coord[a] = 0;
  }
  for (int a = p.n_axes - 1, t = token; a >= 0; --a) {
    coord[a] = t % p.axes[a].n;
    t /= p.axes[a].n;
  }
  // Unused axes are {n = k = d = 1}: one window of one position.
  fa::NaWindow win[fa::kNaMaxAxes];
  for (int a = 0; a < fa::kNaMaxAxes; ++a) {
    win[a] = fa::na_window(p.axes[a], coord[a]);
  }

  // Offsets of every neighbour, in the row-major order of the axes.
  sc.k_off.clear();
  sc.v_off.clear();
  for (int i0 = 0; i0 < win[0].count; ++i0) {
    const int c0 = win[0].first + i0 * p.axes[0].d;
    for (int i1 = 0; i1 < win[1].count; ++i1) {
      const int c1 = win[1].first + i1 * p.axes[1].d;
      for (int i2 = 0; i2 < win[2].count; ++i2) {
        const int c2 = win[2].first + i2 * p.axes[2].d;
        sc.k_off.push_back(
            c0 * p.k_strides[1] + c1 * p.k_strides[2] + c2 * p.k_strides[3]);
        sc.v_off.push_back(
            c0 * p.v_strides[1] + c1 * p.v_strides[2] + c2 * p.v_strides[3]);
      }
    }
  }
}

template <typename T>
void attend(
    const NaProblem& pr,
    int b,
    int h,
    const int* coord,
    Scratch& sc) {
  const fa::NaParams& p = pr.p;
  const int n = static_cast<int>(sc.k_off.size());
  sc.s.resize(n);

  const T* q = static_cast<const T*>(pr.q) + b * p.q_strides[0] +
      coord[0] * p.q_strides[1] + coord[1] * p.q_strides[2] +
      coord[2] * p.q_strides[3] + h * p.q_strides[4];
  const T* k = static_cast<const T*>(pr.k) + b * p.k_strides[0] +
      h * p.k_strides[4];
  const T* v = static_cast<const T*>(pr.v) + b * p.v_strides[0] +
      h * p.v_strides[4];
  load(q, pr.q_dstride, p.D, p.scale_log2, sc.q.data());

  float m = -INFINITY;
  for (int j = 0; j < n; ++j) {
    load(k + sc.k_off[j], pr.k_dstride, p.D, 1.0f, sc.row.data());
    const float s = dot(sc.q.data(), sc.row.data(), p.D);
    sc.s[j] = s;
    m = s > m ? s : m;
  }
  // Every query has at least one neighbour (itself), so l > 0 unless the
  // scores are -inf or NaN, which then propagate as in the reference.
  const float shift = m == -INFINITY ? 0.0f : m;
  float l = 0.0f;
  for (int j = 0; j < n; ++j) {
    sc.s[j] = exp2_fast(sc.s[j] - shift);
    l += sc.s[j];
  }
  std::fill(sc.o.begin(), sc.o.end(), 0.0f);
  for (int j = 0; j < n; ++j) {
    load(v + sc.v_off[j], pr.v_dstride, p.D_v, 1.0f, sc.row.data());
    const float pj = sc.s[j];
    for (int c = 0; c < p.D_v; ++c) {
      sc.o[c] += pj * sc.row[c];
    }
  }
  T* o = static_cast<T*>(pr.out) + b * p.o_strides[0] +
      coord[0] * p.o_strides[1] + coord[1] * p.o_strides[2] +
      coord[2] * p.o_strides[3] + h * p.o_strides[4];
  const float inv = 1.0f / l;
  for (int c = 0; c < p.D_v; ++c) {
    o[c] = from_float<T>(sc.o[c] * inv);
  }
}

template <typename T>
void run_typed(const NaProblem& pr) {
  const fa::NaParams& p = pr.p;
  const int chunks = (p.L + TOKENS_PER_ITEM - 1) / TOKENS_PER_ITEM;
  parallel_for(p.B * chunks, [&](int item) {
    thread_local Scratch sc;
    const int width = p.D > p.D_v ? p.D : p.D_v;
    sc.q.resize(p.D);
    sc.row.resize(width);
    sc.o.resize(p.D_v);
    const int chunk = item % chunks;
    const int b = item / chunks;
    const int end = std::min(p.L, (chunk + 1) * TOKENS_PER_ITEM);
    for (int t = chunk * TOKENS_PER_ITEM; t < end; ++t) {
      int coord[fa::kNaMaxAxes];
      neighbours(p, t, coord, sc);
      for (int h = 0; h < p.H; ++h) {
        attend<T>(pr, b, h, coord, sc);
      }
    }
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
