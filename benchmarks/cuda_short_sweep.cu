// Times the CUDA short-sequence kernel (families/short_attention/short_attention.h on the CUDA
// target) under several tile shapes on the two shapes it was built for, to
// choose choose_short_attention_tiles' CUDA entries from measurements.
// Standalone: no MLX; nvcc builds it on the GPU machine.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. benchmarks/cuda_short_sweep.cu -o sweep
//   ./sweep     # table: case, tiles, time, TB/s, share of copy bandwidth, error
//
// Every shape's output is checked against a plain fp32 kernel (one thread
// per query row), so a fast but wrong shape shows in the error column.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "benchmarks/cuda_sweep_util.cuh"
#include "mlx_fused_attn/families/short_attention/short_attention_kernel.cuh"
#include "mlx_fused_attn/families/short_attention/short_attention_config.h"
#include "mlx_fused_attn/tile/dtype_of.h"


/// softmax(scale q k^T) v per query row in fp32, for contiguous
/// [sequences, L, D] inputs: the reference.
template <typename T>
__global__ void reference(
    const T* q, const T* k, const T* v, float* o, long long rows, int L, int D,
    float scale) {
  const long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= rows) {
    return;
  }
  const long long seq = row / L;
  const T* qr = q + row * D;
  const T* ks = k + seq * L * D;
  const T* vs = v + seq * L * D;
  float m = -INFINITY;
  for (int j = 0; j < L; ++j) {
    float s = 0.f;
    for (int c = 0; c < D; ++c) s += float(qr[c]) * float(ks[j * D + c]);
    m = fmaxf(m, s * scale);
  }
  float* out = o + row * D;
  for (int c = 0; c < D; ++c) out[c] = 0.f;
  float sum = 0.f;
  for (int j = 0; j < L; ++j) {
    float s = 0.f;
    for (int c = 0; c < D; ++c) s += float(qr[c]) * float(ks[j * D + c]);
    const float p = expf(s * scale - m);
    sum += p;
    for (int c = 0; c < D; ++c) out[c] += p * float(vs[j * D + c]);
  }
  for (int c = 0; c < D; ++c) out[c] /= sum;
}

template <typename T, int D>
struct Case {
  int B, H, L;
  double copy;
  size_t n;
  T *q, *k, *v, *o;
  float* ref;
  unsigned* err;

  Case(int B_, int H_, int L_, double copy_)
      : B(B_), H(H_), L(L_), copy(copy_) {
    n = size_t(B) * H * L * D;
    CHECK(cudaMalloc(&q, n * sizeof(T)));
    CHECK(cudaMalloc(&k, n * sizeof(T)));
    CHECK(cudaMalloc(&v, n * sizeof(T)));
    CHECK(cudaMalloc(&o, n * sizeof(T)));
    CHECK(cudaMalloc(&ref, n * sizeof(float)));
    CHECK(cudaMalloc(&err, sizeof(unsigned)));
    fill_random<<<1024, 256>>>(q, n, 1);
    fill_random<<<1024, 256>>>(k, n, 2);
    fill_random<<<1024, 256>>>(v, n, 3);
    const long long rows = (long long)B * H * L;
    reference<<<unsigned((rows + 127) / 128), 128>>>(
        q, k, v, ref, rows, L, D, 1.0f / std::sqrt(float(D)));
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
  }
  ~Case() {
    cudaFree(q);
    cudaFree(k);
    cudaFree(v);
    cudaFree(o);
    cudaFree(ref);
    cudaFree(err);
  }

  /// One tile shape: a type whose `value` is a ShortAttnTiles
  /// (kernel_tiles.h).
  template <typename Tiles>
  void shape(int reps) {
    constexpr fa::DType dtype = fa::DTypeOf<T>::value;
    constexpr fa::ShortAttnTiles tiles = Tiles::value;
    const int smem = fa::short_attention_smem_bytes(tiles, D, dtype);
    auto kernel = fa::short_attention_kernel<T, D, Tiles>;
    CHECK(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    fa::AttnParams p{};
    p.B = B;
    p.H_q = H;
    p.H_kv = H;
    p.gqa_factor = 1;
    p.L_q = L;
    p.L_k = L;
    p.D = D;
    p.D_v = D;
    p.scale_log2 = 1.4426950408889634f / std::sqrt(float(D));
    for (auto* s : {p.q_strides, p.k_strides, p.v_strides, p.o_strides}) {
      s[0] = (long long)H * L * D;
      s[1] = (long long)L * D;
      s[2] = D;
    }
    const fa::ShortAttnFeatures f{};
    const unsigned grid = unsigned((size_t(B) * H + tiles.problems - 1) / tiles.problems);

    CHECK(cudaMemset(o, 0xff, n * sizeof(T)));
    CHECK(cudaMemset(err, 0, sizeof(unsigned)));
    kernel<<<grid, tiles.warps * 32, smem>>>(q, k, v, o, p, nullptr, nullptr, f);
    CHECK(cudaGetLastError());
    max_error<<<1024, 256>>>(o, ref, n, err);
    unsigned err_bits;
    CHECK(cudaMemcpy(&err_bits, err, sizeof(unsigned), cudaMemcpyDeviceToHost));
    float max_err;
    std::memcpy(&max_err, &err_bits, sizeof(float));

    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaEventRecord(e0));
    for (int i = 0; i < reps; ++i) {
      kernel<<<grid, tiles.warps * 32, smem>>>(q, k, v, o, p, nullptr, nullptr, f);
    }
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    CHECK(cudaGetLastError());
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double us = ms * 1e3 / reps;
    const double tbps = 4.0 * n * sizeof(T) / (us * 1e-6) / 1e12;
    const bool chosen = tiles == fa::choose_short_attention_tiles(
                                     D, dtype, fa::Backend::Cuda, tiles.seq) &&
        tiles.seq == fa::short_attention_seq(L, L);
    std::printf(
        "B=%d H=%d L=%d D=%d %zuB  seq=%d warps=%d problems=%d smem=%6d "
        "%8.1f us %5.2f TB/s %4.0f%% of copy  err %.2e%s\n",
        B, H, L, D, sizeof(T), tiles.seq, tiles.warps, tiles.problems, smem, us, tbps,
        100.0 * tbps / copy, max_err, chosen ? "  (chosen)" : "");
    std::fflush(stdout);
  }
};

int main() {
  const double copy = copy_tbps();
  std::printf("copy bandwidth %.2f TB/s\n", copy);
  {
    Case<fa::half_t, 64> c(1000, 80, 32, copy);
    c.shape<fa::ShortTilesOf<32, 16, 4, 2>>(20);
    c.shape<fa::ShortTilesOf<32, 16, 4, 1>>(20);
    c.shape<fa::ShortTilesOf<32, 16, 4, 4>>(20);
    c.shape<fa::ShortTilesOf<32, 16, 2, 1>>(20);
    c.shape<fa::ShortTilesOf<32, 16, 8, 4>>(20);
    c.shape<fa::ShortTilesOf<32, 16, 8, 8>>(20);
    c.shape<fa::ShortTilesOf<64, 16, 4, 1>>(20);
  }
  {
    Case<fa::half_t, 32> c(1000, 160, 48, copy);
    c.shape<fa::ShortTilesOf<64, 16, 4, 2>>(20);
    c.shape<fa::ShortTilesOf<64, 16, 4, 1>>(20);
    c.shape<fa::ShortTilesOf<64, 16, 4, 4>>(20);
    c.shape<fa::ShortTilesOf<64, 16, 8, 4>>(20);
    c.shape<fa::ShortTilesOf<48, 16, 4, 2>>(20);
    c.shape<fa::ShortTilesOf<48, 16, 4, 4>>(20);
    c.shape<fa::ShortTilesOf<48, 16, 3, 1>>(20);
    c.shape<fa::ShortTilesOf<48, 16, 6, 2>>(20);
  }
  return 0;
}
