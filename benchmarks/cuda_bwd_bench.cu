// Times the fused attention backward's CUDA kernels (kernels/
// attention_backward.h: D, dK/dV, dQ) on the issue-17 cases, after the
// forward kernel has written O and the LSE (has_lse), and checks every
// gradient of a small case against a plain fp32 reference. Standalone: no
// MLX; nvcc builds it on the GPU machine (from the repository root):
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. \
//     benchmarks/cuda_bwd_bench.cu -o bwd_bench
//   ./bwd_bench            # check lines, then: case, time, TFLOP/s, both
//                          # forms (two kernels; one: dQ through atomics)
//   ./bwd_bench check      # the checks only (tests/test_cuda_backward_gpu.py)
//   ./bwd_bench sweep      # the tile sweep: a line a candidate (sweep());
//                          # -DFA_SWEEP_QUICK: three candidates
//
// TFLOP/s counts the backward as 2.5 forwards (five products of the
// forward's two), the causal triangle exactly; the kernels run seven (dQ
// recomputes S and dP), so the hardware does 1.4x the count.
//
// The sweep times every candidate's dK/dV and dQ kernels alone and the
// whole backward, with its registers and local bytes a thread (ptxas's:
// local memory is spills and stack) and a check of its gradients.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "benchmarks/cuda_sweep_util.cuh"
#include "mlx_fused_attn/families/attention_backward/attention_backward_kernel.cuh"
#include "mlx_fused_attn/families/attention/attention_kernel.cuh"
#include "mlx_fused_attn/tile/dtype_of.h"

struct Problem {
  int B, H, L, D;
  bool causal;
};

// The reference's arrays: the inputs, its forward's rows (LSE, O, D) and
// its gradients, fp32.
template <typename T>
struct RefArrays {
  const T *q, *k, *v, *dout;
  float *lse, *o, *d, *dq, *dk, *dv;
};

// The reference, one thread a query row (LSE, O, D) or key row (dK, dV).
template <typename T>
__global__ void ref_rows(const RefArrays<T> a, int L, int D, float scale,
                         bool causal) {
  const T *q = a.q, *k = a.k, *v = a.v, *dout = a.dout;
  float *lse = a.lse, *o = a.o, *d = a.d;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t bh = blockIdx.y;
  if (i >= L) return;
  const T* qi = q + (bh * L + i) * D;
  const int end = causal ? i + 1 : L;
  float m = -INFINITY;
  for (int j = 0; j < end; ++j) {
    float s = 0.f;
    for (int c = 0; c < D; ++c) s += float(qi[c]) * float(k[(bh * L + j) * D + c]);
    m = fmaxf(m, s * scale);
  }
  float sum = 0.f;
  float* oi = o + (bh * L + i) * D;
  for (int c = 0; c < D; ++c) oi[c] = 0.f;
  for (int j = 0; j < end; ++j) {
    float s = 0.f;
    for (int c = 0; c < D; ++c) s += float(qi[c]) * float(k[(bh * L + j) * D + c]);
    const float p = expf(s * scale - m);
    sum += p;
    for (int c = 0; c < D; ++c) oi[c] += p * float(v[(bh * L + j) * D + c]);
  }
  float di = 0.f;
  for (int c = 0; c < D; ++c) {
    oi[c] /= sum;
    di += oi[c] * float(dout[(bh * L + i) * D + c]);
  }
  lse[bh * L + i] = m + logf(sum);
  d[bh * L + i] = di;
}

// dS of (row i, key j) from the reference's LSE and D.
template <typename T>
__device__ float ref_ds(const RefArrays<T>& a, size_t bh, int i, int j, int L,
                        int D, float scale, float* p_out) {
  float s = 0.f, dp = 0.f;
  for (int c = 0; c < D; ++c) {
    s += float(a.q[(bh * L + i) * D + c]) * float(a.k[(bh * L + j) * D + c]);
    dp += float(a.dout[(bh * L + i) * D + c]) * float(a.v[(bh * L + j) * D + c]);
  }
  const float p = expf(s * scale - a.lse[bh * L + i]);
  *p_out = p;
  return p * (dp - a.d[bh * L + i]);
}

template <typename T>
__global__ void ref_grads(const RefArrays<T> a, int L, int D, float scale,
                          bool causal) {
  const T *q = a.q, *k = a.k, *dout = a.dout;
  float *dq = a.dq, *dk = a.dk, *dv = a.dv;
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t bh = blockIdx.y;
  if (r >= L) return;
  float p;
  for (int c = 0; c < D; ++c) {
    dq[(bh * L + r) * D + c] = 0.f;
    dk[(bh * L + r) * D + c] = 0.f;
    dv[(bh * L + r) * D + c] = 0.f;
  }
  for (int j = 0; j < (causal ? r + 1 : L); ++j) {  // r a query row
    const float ds = ref_ds(a, bh, r, j, L, D, scale, &p);
    for (int c = 0; c < D; ++c) dq[(bh * L + r) * D + c] += scale * ds * float(k[(bh * L + j) * D + c]);
  }
  for (int i = causal ? r : 0; i < L; ++i) {  // r a key row
    const float ds = ref_ds(a, bh, i, r, L, D, scale, &p);
    for (int c = 0; c < D; ++c) {
      dk[(bh * L + r) * D + c] += scale * ds * float(q[(bh * L + i) * D + c]);
      dv[(bh * L + r) * D + c] += p * float(dout[(bh * L + i) * D + c]);
    }
  }
}

/// The library's tiles of each kernel on this build's sm_90a
/// (choose_attention_backward_tiles).
template <typename T, int D>
struct DefaultTiles {
  static constexpr fa::AttnBwdTiles t = fa::choose_attention_backward_tiles(
      D, fa::DTypeOf<T>::value, fa::Backend::Cuda, /*wgmma=*/true);
  template <fa::BwdKernel k>
  using of = fa::AttnTilesOf<t.of(k).bq, t.of(k).bk, t.of(k).warps, t.of(k).stages,
                             t.of(k).min_blocks, t.of(k).wgmma, t.of(k).q_shared>;
  typedef of<fa::BwdKernel::DkDv> dkdv;
  typedef of<fa::BwdKernel::Dq> dq;
};

/// Which kernels a launch runs: the whole backward, or one of the two tiled ones.
enum class Part { All, DkDv, Dq };

/// kOneKernel: the one-kernel form (dK/dV accumulates dQ in fp32 through
/// atomics; the row dot zeroes the accumulator, a conversion writes dQ).
template <typename T, int D, typename KvTiles = typename DefaultTiles<T, D>::dkdv,
          typename QTiles = typename DefaultTiles<T, D>::dq, bool kOneKernel = false>
struct Backward {
  static constexpr fa::AttnTiles kv = KvTiles::value;
  static constexpr fa::AttnTiles qt = QTiles::value;
  static constexpr int kKvSmem = fa::attention_backward_smem_bytes(
      kv, D, fa::DTypeOf<T>::value, fa::Backend::Cuda, kOneKernel);
  static constexpr int kQSmem =
      fa::attention_backward_smem_bytes(qt, D, fa::DTypeOf<T>::value, fa::Backend::Cuda);
  typedef fa::AttnTilesOf<64, 64, 4, 2> FwdTiles;

  Problem pr;
  fa::AttnBwdParams p{};
  fa::AttnFeatures f{};
  T *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float *lse, *d, *dq_acc = nullptr;

  explicit Backward(const Problem& pr_) : pr(pr_) {
    const size_t n = size_t(pr.B) * pr.H * pr.L * D;
    for (T** x : {&q, &k, &v, &o, &dout, &dq, &dk, &dv}) {
      CHECK(cudaMalloc(x, n * sizeof(T)));
    }
    CHECK(cudaMalloc(&lse, n / D * sizeof(float)));
    CHECK(cudaMalloc(&d, n / D * sizeof(float)));
    if (kOneKernel) CHECK(cudaMalloc(&dq_acc, n * sizeof(float)));
    unsigned seed = 1;
    for (T* x : {q, k, v, dout}) fill_random<<<1024, 256>>>(x, n, seed++);
    fa::AttnParams& a = p.fwd;
    a.B = pr.B; a.H_q = pr.H; a.H_kv = pr.H; a.gqa_factor = 1;
    a.L_q = pr.L; a.L_k = pr.L; a.D = D; a.D_v = D; a.causal_offset = 0;
    a.scale_log2 = (1.0f / std::sqrt(float(D))) * 1.4426950408889634f;
    const fa::stride_t s[3] = {fa::stride_t(pr.H) * pr.L * D, fa::stride_t(pr.L) * D, D};
    for (fa::stride_t* x : {a.q_strides, a.k_strides, a.v_strides, a.o_strides,
                         p.do_strides, p.dq_strides, p.dk_strides, p.dv_strides}) {
      std::memcpy(x, s, sizeof(s));
    }
    f.causal = pr.causal;
    raise_smem<false>();
    raise_smem<true>();
  }
  ~Backward() {
    for (void* x : {(void*)q, (void*)k, (void*)v, (void*)o, (void*)dout, (void*)dq,
                    (void*)dk, (void*)dv, (void*)lse, (void*)d, (void*)dq_acc}) {
      cudaFree(x);
    }
  }

  template <bool C>
  void forward() {
    fa::AttnFeatures ff = f;
    ff.has_lse = true;
    ff.align_q = pr.L % 64 == 0;
    ff.align_k = pr.L % 64 == 0;
    const int smem = fa::attention_smem_bytes(FwdTiles::value, D, D, fa::DTypeOf<T>::value, fa::Backend::Cuda);
    auto kernel = fa::attention_kernel<T, D, D, FwdTiles, C, false>;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<dim3((pr.L + 63) / 64, pr.H, pr.B), 128, smem>>>(
        q, k, v, o, p.fwd, nullptr, nullptr, ff, nullptr, nullptr, nullptr, 1, lse, nullptr);
    CHECK(cudaGetLastError());
  }

  /// The tiled kernels may take more than the default 48 KB, as the host's
  /// load_kernel allows them.
  template <bool C>
  static void raise_smem() {
    CHECK(cudaFuncSetAttribute(fa::attention_bwd_dkdv_kernel<T, D, KvTiles, C, false, kOneKernel>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, kKvSmem));
    CHECK(cudaFuncSetAttribute(fa::attention_bwd_dq_kernel<T, D, QTiles, C, false>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, kQSmem));
  }

  template <bool C>
  void backward(Part part) {
    if (part == Part::All) {
      fa::attention_bwd_row_dot_kernel<4, T><<<dim3((pr.L + 3) / 4, pr.H, pr.B), 128>>>(o, dout, d, dq_acc, p);
    }
    fa::AttnBwdKernelArgs<T> a{};
    a.q = q; a.k = k; a.v = v; a.dout = dout; a.lse = lse; a.d = d; a.params = p;
    if (part != Part::Dq) {
      fa::AttnBwdKernelArgs<T> ak = a;
      ak.dk = dk; ak.dv = dv; ak.dq_acc = dq_acc;
      ak.features = f;
      ak.features.align_q = pr.L % kv.bk == 0;
      ak.features.align_k = pr.L % kv.bq == 0;
      fa::attention_bwd_dkdv_kernel<T, D, KvTiles, C, false, kOneKernel>
          <<<dim3((pr.L + kv.bq - 1) / kv.bq, pr.H, pr.B), kv.warps * 32, kKvSmem>>>(ak);
    }
    if (kOneKernel && part != Part::DkDv) {
      fa::attention_bwd_dq_convert_kernel<4, T><<<dim3((pr.L + 3) / 4, pr.H, pr.B), 128>>>(dq_acc, dq, p);
    } else if (part != Part::DkDv) {
      fa::AttnBwdKernelArgs<T> aq = a;
      aq.dq = dq;
      aq.features = f;
      aq.features.align_q = pr.L % qt.bq == 0;
      aq.features.align_k = pr.L % qt.bk == 0;
      fa::attention_bwd_dq_kernel<T, D, QTiles, C, false>
          <<<dim3((pr.L + qt.bq - 1) / qt.bq, pr.H, pr.B), qt.warps * 32, kQSmem>>>(aq);
    }
    CHECK(cudaGetLastError());
  }

  void run_forward() { pr.causal ? forward<true>() : forward<false>(); }
  void run_backward(Part part = Part::All) {
    pr.causal ? backward<true>(part) : backward<false>(part);
  }

  /// Max |fused - reference| of dQ, dK, dV over the largest reference value.
  /// `verbose`: a line a gradient; else only the failures.
  bool check(const char* name, bool verbose = true) {
    run_forward();
    run_backward();
    const size_t n = size_t(pr.B) * pr.H * pr.L * D;
    float *rlse, *ro, *rd, *rdq, *rdk, *rdv;
    CHECK(cudaMalloc(&rlse, n / D * 4));
    CHECK(cudaMalloc(&rd, n / D * 4));
    for (float** x : {&ro, &rdq, &rdk, &rdv}) CHECK(cudaMalloc(x, n * 4));
    const float scale = 1.0f / std::sqrt(float(D));
    const dim3 grid((pr.L + 63) / 64, pr.B * pr.H);
    const RefArrays<T> ref = {q, k, v, dout, rlse, ro, rd, rdq, rdk, rdv};
    ref_rows<<<grid, 64>>>(ref, pr.L, D, scale, pr.causal);
    ref_grads<<<grid, 64>>>(ref, pr.L, D, scale, pr.causal);
    CHECK(cudaDeviceSynchronize());
    bool ok = true;
    const char* names[] = {"dq", "dk", "dv"};
    const T* fused[] = {dq, dk, dv};
    float* refs[] = {rdq, rdk, rdv};
    unsigned* err;
    CHECK(cudaMallocManaged(&err, sizeof(unsigned)));
    for (int g = 0; g < 3; ++g) {
      std::vector<float> h(n);
      CHECK(cudaMemcpy(h.data(), refs[g], n * 4, cudaMemcpyDeviceToHost));
      float top = 0.f;
      for (float x : h) top = fmaxf(top, fabsf(x));
      *err = 0;
      max_error<<<256, 256>>>(fused[g], refs[g], n, err);
      CHECK(cudaDeviceSynchronize());
      float e;
      std::memcpy(&e, err, 4);
      const float tol = (sizeof(T) == 4 ? 1e-4f : 2e-2f) * fmaxf(top, 1e-6f);
      const bool good = e <= tol;
      ok = ok && good;
      if (verbose || !good) std::printf("%s %s %s max error %.3g (tolerance %.3g)\n", good ? "ok" : "FAIL", name, names[g], e, tol);
    }
    for (void* x : {(void*)rlse, (void*)ro, (void*)rd, (void*)rdq, (void*)rdk, (void*)rdv, (void*)err}) cudaFree(x);
    return ok;
  }

  float time_us(int reps, Part part = Part::All) {
    run_forward();
    run_backward();
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i) run_backward(part);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    return 1000.f * ms / reps;
  }
};

/// Both forms: two kernels, then one (named "<name> one-kernel").
template <typename T, int D>
bool check(Problem pr, const char* name) {
  typedef DefaultTiles<T, D> Tiles;
  const std::string one = std::string(name) + " one-kernel";
  return Backward<T, D>(pr).check(name) &
      Backward<T, D, typename Tiles::dkdv, typename Tiles::dq, true>(pr).check(one.c_str());
}

/// Both forms' whole backward (row dot included; one-kernel: the
/// conversion too).
template <typename T, int D>
void bench(Problem pr, const char* name, double fa2_us) {
  typedef DefaultTiles<T, D> Tiles;
  const int reps = pr.L >= 8192 ? 3 : 20;
  const float us = Backward<T, D>(pr).time_us(reps);
  const float one_us =
      Backward<T, D, typename Tiles::dkdv, typename Tiles::dq, true>(pr).time_us(reps);
  const double pairs = pr.causal ? 0.5 * double(pr.L) * (pr.L + 1) : double(pr.L) * pr.L;
  const double flop = 2.5 * 4.0 * pr.B * pr.H * pairs * D;
  std::printf("%-40s two kernels %10.1f us %7.1f TFLOP/s | one kernel %10.1f us %7.1f TFLOP/s"
              " | FA2 %8.0f us\n",
              name, us, flop / us * 1e-6, one_us, flop / one_us * 1e-6, fa2_us);
}

/// Registers and local memory (spills and stack) a thread, from ptxas.
template <typename K>
void print_resources(K kernel) {
  cudaFuncAttributes a;
  CHECK(cudaFuncGetAttributes(&a, kernel));
  std::printf(" %3d regs %4zu B local", a.numRegs, a.localSizeBytes);
}

/// One candidate of the sweep, for both kernels (K: the library's dK/dV
/// tiles, Q: its dQ tiles): its gradients checked on a small ragged case
/// (L = 200) of the same head dim, dtype and mask, then each tiled kernel
/// and the whole backward timed. The kernels' TFLOP/s count the products
/// each runs (dK/dV four, dQ three); the total's counts the backward as
/// 2.5 forwards, as bench() does.
template <typename T, int D, typename Tiles>
bool sweep_one(const Problem& pr) {
  constexpr fa::AttnTiles t = Tiles::value;
  const bool ok = Backward<T, D, Tiles, Tiles>({1, 2, 200, D, pr.causal}).check("candidate", false);
  Backward<T, D, Tiles, Tiles> b(pr);
  const int reps = 10;
  const float dkdv_us = b.time_us(reps, Part::DkDv);
  const float dq_us = b.time_us(reps, Part::Dq);
  const float all_us = b.time_us(reps, Part::All);
  const double pairs = pr.causal ? 0.5 * double(pr.L) * (pr.L + 1) : double(pr.L) * pr.L;
  const double product = 2.0 * pr.B * pr.H * pairs * D * 1e-6;  // MFLOP, over us gives TFLOP/s
  const bool kv_default = std::is_same<Tiles, typename DefaultTiles<T, D>::dkdv>::value;
  const bool q_default = std::is_same<Tiles, typename DefaultTiles<T, D>::dq>::value;
  std::printf("%c%c bq=%3d bk=%3d warps=%d stages=%d %s%s | dkdv", kv_default ? 'K' : ' ',
              q_default ? 'Q' : ' ', t.bq, t.bk, t.warps, t.stages,
              t.wgmma ? "wgmma" : "mma  ", t.q_shared ? " QS" : "   ");
  print_resources(pr.causal ? fa::attention_bwd_dkdv_kernel<T, D, Tiles, true, false>
                            : fa::attention_bwd_dkdv_kernel<T, D, Tiles, false, false>);
  std::printf(" %8.1f us %6.1f TF | dq", dkdv_us, 4 * product / dkdv_us);
  print_resources(pr.causal ? fa::attention_bwd_dq_kernel<T, D, Tiles, true, false>
                            : fa::attention_bwd_dq_kernel<T, D, Tiles, false, false>);
  std::printf(" %8.1f us %6.1f TF | all %8.1f us %6.1f TF | %s\n", dq_us, 3 * product / dq_us,
              all_us, 5 * product / all_us, ok ? "ok" : "FAIL");
  return ok;
}

template <int BK, int W, int ST, bool WG = false, bool QS = false>
using Candidate = fa::AttnTilesOf<16 * W, BK, W, ST, 1, WG, QS>;

/// The candidate tiles of one case, the library's marked '*': a warp owns
/// 16 rows, so 4 warps own 64 keys (dK/dV) or queries (dQ) a block; on
/// Hopper warpgroup products (WG), with the owned rows' operands in shared
/// memory (QS) or registers, and for reference the mma.sync tiles that
/// other GPUs run. With -DFA_SWEEP_QUICK only the first three (what CI
/// builds to keep the code compiling).
template <typename T, int D>
bool sweep(const Problem& pr, const char* name, double fa2_us) {
  std::printf("%s (FA2 %.0f us)\n", name, fa2_us);
  bool ok = Backward<T, D>({1, 2, 200, D, pr.causal}).check("library tiles", false);
  std::printf("   library tiles (K and Q)  | all %8.1f us\n", Backward<T, D>(pr).time_us(10));
  ok &= sweep_one<T, D, Candidate<32, 4, 2, true, true>>(pr);
  ok &= sweep_one<T, D, Candidate<64, 4, 2, true, true>>(pr);
  ok &= sweep_one<T, D, Candidate<32, 4, 2>>(pr);
#ifndef FA_SWEEP_QUICK
  ok &= sweep_one<T, D, Candidate<128, 4, 2, true, true>>(pr);
  ok &= sweep_one<T, D, Candidate<64, 4, 3, true, true>>(pr);
  ok &= sweep_one<T, D, Candidate<64, 8, 2, true, true>>(pr);
  ok &= sweep_one<T, D, Candidate<32, 4, 2, true>>(pr);
  ok &= sweep_one<T, D, Candidate<64, 4, 2, true>>(pr);
  ok &= sweep_one<T, D, Candidate<128, 4, 2, true>>(pr);
  ok &= sweep_one<T, D, Candidate<32, 8, 2, true>>(pr);
  ok &= sweep_one<T, D, Candidate<64, 4, 2>>(pr);
  ok &= sweep_one<T, D, Candidate<128, 4, 2>>(pr);
  ok &= sweep_one<T, D, Candidate<64, 8, 2>>(pr);
#endif
  return ok;
}

int main(int argc, char** argv) {
  bool ok = true;
  ok &= check<fa::half_t, 64>({1, 2, 200, 64, false}, "fp16 D=64 L=200");
  ok &= check<fa::half_t, 64>({1, 2, 200, 64, true}, "fp16 D=64 L=200 causal");
  ok &= check<fa::bfloat_t, 128>({2, 2, 130, 128, true}, "bf16 D=128 L=130 causal");
  ok &= check<float, 32>({1, 3, 77, 32, false}, "fp32 D=32 L=77");
  if (argc > 1 && std::strcmp(argv[1], "check") == 0) {
    return ok ? 0 : 1;
  }
  if (argc > 1 && std::strcmp(argv[1], "sweep") == 0) {
    ok &= sweep<fa::half_t, 64>({1, 32, 1024, 64, false}, "B=1 H=32 L=1024 D=64 fp16", 107);
    ok &= sweep<fa::bfloat_t, 128>({1, 32, 4096, 128, false}, "B=1 H=32 L=4096 D=128 bf16", 2388);
    ok &= sweep<fa::bfloat_t, 128>({1, 32, 4096, 128, true}, "same, causal", 1424);
    return ok ? 0 : 1;
  }
  bench<fa::half_t, 64>({1, 32, 1024, 64, false}, "B=1 H=32 L=1024 D=64 fp16", 107);
  bench<fa::bfloat_t, 128>({1, 32, 4096, 128, false}, "B=1 H=32 L=4096 D=128 bf16", 2388);
  bench<fa::bfloat_t, 128>({1, 32, 4096, 128, true}, "same, causal", 1424);
  bench<fa::bfloat_t, 128>({4, 32, 8192, 128, true}, "B=4 H=32 L=8192 D=128 bf16 causal", 18600);
  return ok ? 0 : 1;
}
