// One attention problem run through the library's kernel under a chosen
// tile shape (a producer warpgroup's too, with the tensor maps the library
// would encode), its output checked against the first shape's (or a plain
// fp32 reference kernel on small square problems), for the forward's tile
// sweep (cuda_tile_sweep.cu); its launch, set up as the library sets it up,
// also serves the decode sweep (cuda_decode_sweep.cu).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "benchmarks/cuda_sweep_util.cuh"
#include "mlx_fused_attn/families/attention/attention_kernel.cuh"
#include "mlx_fused_attn/backend/cuda/panel_tensor_map.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/plan/split_count.h"
#include "mlx_fused_attn/tile/dtype_of.h"

template <typename T>
__global__ void to_float(const T* x, float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    y[i] = float(x[i]);
  }
}

// One thread per query row, fp32, two passes: the reference.
template <typename T>
__global__ void reference(const T* q, const T* k, const T* v, float* o,
                          int L, int D, float scale, bool causal) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int bh = blockIdx.y;
  if (row >= L) return;
  const T* qr = q + (size_t(bh) * L + row) * D;
  const T* kh = k + size_t(bh) * L * D;
  const T* vh = v + size_t(bh) * L * D;
  float m = -INFINITY, s = 0.f;
  const int end = causal ? row + 1 : L;
  for (int j = 0; j < end; ++j) {
    float d = 0.f;
    for (int c = 0; c < D; ++c) d += float(qr[c]) * float(kh[size_t(j) * D + c]);
    m = fmaxf(m, d * scale);
  }
  float* out = o + (size_t(bh) * L + row) * D;
  for (int c = 0; c < D; ++c) out[c] = 0.f;
  for (int j = 0; j < end; ++j) {
    float d = 0.f;
    for (int c = 0; c < D; ++c) d += float(qr[c]) * float(kh[size_t(j) * D + c]);
    const float p = expf(d * scale - m);
    s += p;
    for (int c = 0; c < D; ++c) out[c] += p * float(vh[size_t(j) * D + c]);
  }
  for (int c = 0; c < D; ++c) out[c] /= s;
}

/// L keys; Lq queries (0: L) and Hkv key/value heads (0: H), as in chunked
/// prefill (causal bottom-right, as MLX aligns it).
struct Problem {
  int B, H, L, D;
  bool causal;
  int Lq = 0;
  int Hkv = 0;
  int lq() const { return Lq ? Lq : L; }
  int hkv() const { return Hkv ? Hkv : H; }
};

double flops(const Problem& p) {
  double pairs = 0;
  for (int i = 0; i < p.lq(); ++i) {
    pairs += p.causal ? std::min(p.L, i + p.L - p.lq() + 1) : p.L;
  }
  return 4.0 * p.B * p.H * pairs * p.D;
}

/// The producer tiles' map of a contiguous [B, H, L, D] array, encoded as
/// the library encodes it (backend/cuda/panel_tensor_map.h).
template <typename T>
fa::TmaMap panel_map(const T* x, int B, int H, int L, int D, int rows) {
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(L), cuuint64_t(H), cuuint64_t(B)};
  const cuuint64_t strides[3] = {D * sizeof(T), cuuint64_t(L) * D * sizeof(T),
                                 cuuint64_t(H) * L * D * sizeof(T)};
  fa::TmaMap map;
  if (fa::encode_panel_tensor_map(&map, fa::DTypeOf<T>::value, x, dims, strides, rows) !=
      CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
    std::exit(1);
  }
  return map;
}

/// The parameters of contiguous [B, H, L, D] inputs: Hq query heads of Lq
/// rows against Hkv key/value heads of Lk keys, the softmax scale 1/sqrt(D).
inline fa::AttnParams contiguous_params(int B, int Hq, int Hkv, int Lq, int Lk, int D) {
  fa::AttnParams p{};
  p.B = B; p.H_q = Hq; p.H_kv = Hkv; p.gqa_factor = Hq / Hkv;
  p.L_q = Lq; p.L_k = Lk; p.D = D; p.D_v = D;
  p.causal_offset = Lk - Lq;
  p.scale_log2 = (1.0f / std::sqrt(float(D))) * 1.4426950408889634f;
  for (auto* s : {p.q_strides, p.o_strides}) {
    s[2] = D; s[1] = (long long)Lq * D; s[0] = s[1] * Hq;
  }
  for (auto* s : {p.k_strides, p.v_strides}) {
    s[2] = D; s[1] = (long long)Lk * D; s[0] = s[1] * Hkv;
  }
  return p;
}

/// The plain kernel's instance of `Tiles` that merges its splits, as the
/// library picks it where the last split merges (AttnTiles::split_merge).
template <typename Tiles>
struct MergingTiles {
  static constexpr fa::AttnTiles value = [] {
    fa::AttnTiles t = Tiles::value;
    t.split_merge = true;
    return t;
  }();
};

/// A launch of the library's kernel under `Tiles` as the library sets it
/// up (the producer warpgroup's with K's and V's tensor maps, or the plain
/// one; each with its shared-memory carveout), on the grid `grid`; split keys
/// write `o_part` and `stats` where n_splits > 1, and with `counters` (zeroed,
/// one a query block, head and batch) the last split merges them
/// (kernels/cuda/split_merge.cuh; the plain kernel's merging instance).
/// Returns the launch.
template <typename T, int D, typename Tiles, bool C>
auto attention_launch(const fa::AttnParams& p, const fa::AttnFeatures& f, dim3 grid,
                      const T* q, const T* k, const T* v, T* o, float* o_part, float* stats,
                      int n_splits, unsigned int* counters = nullptr) {
  constexpr fa::AttnTiles t = Tiles::value;
  const int smem = fa::attention_smem_bytes(
      t, D, D, fa::DTypeOf<T>::value, fa::Backend::Cuda);
  const int threads = fa::attention_launch_warps(t) * 32;
  if constexpr (t.producer) {
    auto kernel = fa::attention_producer_kernel<T, D, D, Tiles, C, false>;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    if (fa::attention_prefers_max_shared(t)) {  // as the library does (attention_kernel_key.h)
      CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared));
    }
    const fa::TmaMap k_map = panel_map(k, p.B, p.H_kv, p.L_k, D, t.bk);
    const fa::TmaMap v_map = panel_map(v, p.B, p.H_kv, p.L_k, D, t.bk);
    return [=] {
      kernel<<<grid, threads, smem>>>(q, k, v, o, p, nullptr, nullptr, f, o_part, stats,
                                      counters, n_splits, nullptr, nullptr, k_map, v_map);
    };
  } else {
    auto kernel = counters != nullptr
        ? fa::attention_kernel<T, D, D, MergingTiles<Tiles>, C, false>
        : fa::attention_kernel<T, D, D, Tiles, C, false>;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    if (fa::attention_prefers_max_shared(t)) {  // as the library does (attention_kernel_key.h)
      CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared));
    }
    return [=] {
      kernel<<<grid, threads, smem>>>(q, k, v, o, p, nullptr, nullptr, f, o_part, stats,
                                      counters, n_splits, nullptr, nullptr);
    };
  }
}

/// A family's combine kernel of one form (split_combine_block).
template <typename T>
using CombineKernel = void (*)(const float*, const float*, T*, const fa::AttnParams, int);

/// The combine of `n_splits` splits of p's output through `kernels` (one a
/// form, in SplitCombineForm's order), in the form the library plans for
/// them on this GPU (plan/split_count.h), over that form's grid.
template <typename T>
void combine_launch(const CombineKernel<T> (&kernels)[3], const float* o_part,
                    const float* stats, T* o, const fa::AttnParams& p, int n_splits) {
  static const int sms = [] {
    int n = 0;
    CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
    return n;
  }();
  const fa::SplitCombineForm form =
      mlx_fused_attn::split_combine_form(fa::Backend::Cuda, n_splits, p, sms);
  const dim3 grid(mlx_fused_attn::split_combine_blocks_x(form, p), p.H_q, p.B);
  kernels[int(form)]<<<grid, fa::kSplitCombineThreads>>>(o_part, stats, o, p, n_splits);
}

/// The general family's combine (attention_kernel.cuh).
template <typename T>
void split_combine_launch(const float* o_part, const float* stats, T* o,
                          const fa::AttnParams& p, int n_splits) {
  static constexpr CombineKernel<T> kernels[] = {
      fa::split_combine_kernel<T, fa::SplitCombineForm::OneElement>,
      fa::split_combine_kernel<T, fa::SplitCombineForm::Grouped>,
      fa::split_combine_kernel<T, fa::SplitCombineForm::RowThreadgroup>};
  combine_launch(kernels, o_part, stats, o, p, n_splits);
}

template <typename T, int D, typename Tiles, bool C>
float run(const Problem& pr, const T* q, const T* k, const T* v, T* o,
          int reps) {
  constexpr fa::AttnTiles t = Tiles::value;
  const fa::AttnParams p = contiguous_params(pr.B, pr.H, pr.hkv(), pr.lq(), pr.L, D);
  fa::AttnFeatures f{};
  f.align_q = pr.lq() % t.bq == 0;
  f.align_k = pr.L % t.bk == 0;
  const dim3 grid((pr.lq() + t.bq - 1) / t.bq, pr.H, pr.B);
  return launch_ms(
      attention_launch<T, D, Tiles, C>(p, f, grid, q, k, v, o, nullptr, nullptr, 1), reps);
}

template <typename T>
double max_diff(const T* x, const float* ref, size_t n) {
  float *xf;
  CHECK(cudaMalloc(&xf, n * sizeof(float)));
  to_float<<<1024, 256>>>(x, xf, n);
  std::vector<float> hx(n), hr(n);
  CHECK(cudaMemcpy(hx.data(), xf, n * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hr.data(), ref, n * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(xf));
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(hx[i]) - hr[i]);
    if (!(d <= m)) m = d;  // NaN propagates as the max
  }
  return m;
}

template <typename T, int D>
struct Case {
  const char* type;
  Problem pr;
  T *q, *k, *v, *o;
  float* ref;  // fp32 output of the first shape (or the reference kernel)
  size_t n;

  Case(const char* type_, Problem p) : type(type_), pr(p) {
    n = size_t(p.B) * p.H * p.lq() * D;
    const size_t n_kv = size_t(p.B) * p.hkv() * p.L * D;
    CHECK(cudaMalloc(&q, n * sizeof(T)));
    CHECK(cudaMalloc(&k, n_kv * sizeof(T)));
    CHECK(cudaMalloc(&v, n_kv * sizeof(T)));
    CHECK(cudaMalloc(&o, n * sizeof(T)));
    CHECK(cudaMalloc(&ref, n * sizeof(float)));
    fill_random<<<1024, 256>>>(q, n, 1);
    fill_random<<<1024, 256>>>(k, n_kv, 2);
    fill_random<<<1024, 256>>>(v, n_kv, 3);
    // The reference kernel takes square problems without GQA.
    if (p.lq() == p.L && p.hkv() == p.H && size_t(p.B) * p.H * p.L <= (1u << 16)) {
      dim3 grid((p.L + 127) / 128, p.B * p.H);
      reference<<<grid, 128>>>(q, k, v, ref, p.L, D,
                               1.0f / std::sqrt(float(D)), p.causal);
      has_ref = true;
    }
    CHECK(cudaDeviceSynchronize());
  }
  ~Case() {
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(ref);
  }
  bool has_ref = false;

  /// One tile shape: a type whose `value` is an AttnTiles (kernel_tiles.h).
  template <typename Tiles>
  void shape(int reps) {
    constexpr fa::AttnTiles t = Tiles::value;
    CHECK(cudaMemset(o, 0xff, n * sizeof(T)));
    const float ms =
        pr.causal ? run<T, D, Tiles, true>(pr, q, k, v, o, reps)
                  : run<T, D, Tiles, false>(pr, q, k, v, o, reps);
    if (!has_ref) {  // the first shape becomes the reference
      to_float<<<1024, 256>>>(o, ref, n);
      has_ref = true;
    }
    const double err = max_diff(o, ref, n);
    std::printf("%-5s B=%d H=%d/%d Lq=%5d Lk=%5d D=%3d %-6s %-6s bq=%3d bk=%3d warps=%d stages=%d "
                "blocks/SM>=%d %9.1f us %6.1f TFLOP/s  err %.2e\n",
                type, pr.B, pr.H, pr.hkv(), pr.lq(), pr.L, D, pr.causal ? "causal" : "full",
                t.producer ? "wg-tma" : t.wgmma ? (t.q_shared ? "wg-sq" : "wg-rq") : "mma", t.bq, t.bk,
                t.warps, t.stages, t.min_blocks, ms * 1e3,
                flops(pr) / (ms * 1e-3) / 1e12, err);
    std::fflush(stdout);
  }
};
