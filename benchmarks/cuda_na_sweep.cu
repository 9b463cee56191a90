// Times the CUDA neighborhood kernel (families/neighborhood/na_attention.h on the CUDA
// target) under several tile shapes on the issue's 1-D and 2-D cases, to
// choose choose_na_tiles' CUDA entries from measurements. Standalone: no
// MLX; nvcc builds it on the GPU machine.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. benchmarks/cuda_na_sweep.cu -o sweep
//   ./sweep     # table: case, tiles, time, share of the memory floor, error
//
// Inputs are [1, *spatial, H, D] fp16, heads-last as the op passes them.
// Every shape's output is checked against a plain fp32 kernel (one thread
// per query row over its window, written from NATTEN's definition), so a
// fast but wrong shape shows in the error column. Times: 20 back-to-back
// launches between CUDA events after a warm-up (an upper bound on the
// kernel's own time).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "benchmarks/cuda_sweep_util.cuh"
#include "mlx_fused_attn/families/neighborhood/na_kernel.cuh"
#include "mlx_fused_attn/plan/na_grid_choice.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/tile/dtype_of.h"


typedef fa::half_t T;
constexpr int D = 64;
constexpr int H = 16;

/// First key of a query's window along one axis (no dilation, not causal):
/// the window is centred and shifted inward at the borders.
__device__ int window_start(int i, int n, int k) {
  int s = i - k / 2;
  s = s < 0 ? 0 : s;
  return s > n - k ? n - k : s;
}

/// The reference: per query (token t, head h), softmax over its window of
/// scale q.k (scale 1/sqrt(D)), times v, in fp32. 1-D: ny = 1, ky = 1.
__global__ void reference(
    const T* q, const T* k, const T* v, float* o, int ny, int nx, int ky,
    int kx) {
  const float scale = 1.0f / sqrtf(float(D));
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= ny * nx * H) {
    return;
  }
  const int h = row % H;
  const int t = row / H;
  const int y = t / nx;
  const int x = t % nx;
  const int y0 = window_start(y, ny, ky);
  const int x0 = window_start(x, nx, kx);
  const T* qr = q + size_t(row) * D;
  float m = -INFINITY;
  for (int yy = y0; yy < y0 + ky; ++yy) {
    for (int xx = x0; xx < x0 + kx; ++xx) {
      const T* kr = k + (size_t(yy * nx + xx) * H + h) * D;
      float s = 0.f;
      for (int c = 0; c < D; ++c) s += float(qr[c]) * float(kr[c]);
      m = fmaxf(m, s * scale);
    }
  }
  float acc[D];
  for (int c = 0; c < D; ++c) acc[c] = 0.f;
  float sum = 0.f;
  for (int yy = y0; yy < y0 + ky; ++yy) {
    for (int xx = x0; xx < x0 + kx; ++xx) {
      const size_t key = (size_t(yy * nx + xx) * H + h) * D;
      float s = 0.f;
      for (int c = 0; c < D; ++c) s += float(qr[c]) * float(k[key + c]);
      const float p = expf(s * scale - m);
      sum += p;
      for (int c = 0; c < D; ++c) acc[c] += p * float(v[key + c]);
    }
  }
  for (int c = 0; c < D; ++c) o[size_t(row) * D + c] = acc[c] / sum;
}

/// NA_SWEEP_PROFILE=1: only the chosen 1-D tiles, with runs and without,
/// each launched twice (the check and one timed launch), for ncu.
bool profile() {
  return std::getenv("NA_SWEEP_PROFILE") != nullptr;
}

/// One case: a 1-D sequence (ny = 1) or a 2-D image, with its kernel size.
template <int N>
struct Case {
  const char* name;
  int ny, nx, ky, kx;
  double copy;
  size_t n;
  T *q, *k, *v, *o;
  float* ref;
  unsigned* err;

  Case(const char* name_, int ny_, int nx_, int ky_, int kx_, double copy_)
      : name(name_), ny(ny_), nx(nx_), ky(ky_), kx(kx_), copy(copy_) {
    n = size_t(ny) * nx * H * D;
    CHECK(cudaMalloc(&q, n * sizeof(T)));
    CHECK(cudaMalloc(&k, n * sizeof(T)));
    CHECK(cudaMalloc(&v, n * sizeof(T)));
    CHECK(cudaMalloc(&o, n * sizeof(T)));
    CHECK(cudaMalloc(&ref, n * sizeof(float)));
    CHECK(cudaMalloc(&err, sizeof(unsigned)));
    fill_random<<<1024, 256>>>(q, n, 1);
    fill_random<<<1024, 256>>>(k, n, 2);
    fill_random<<<1024, 256>>>(v, n, 3);
    const int rows = ny * nx * H;
    reference<<<(rows + 127) / 128, 128>>>(q, k, v, ref, ny, nx, ky, kx);
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

  /// One tile shape, a type whose `value` holds the tiles (kernel_tiles.h).
  /// `waves` > 0: 1-D runs of tiles (fa::na_run_for) sized for that many
  /// rounds of resident threadgroups; 0: a tile a threadgroup.
  template <typename Tiles>
  void shape(int reps, int waves = 1) {
    constexpr auto tiles = Tiles::value;
    const int smem = fa::na_smem_bytes(tiles, D, fa::DType::Float16, N);
    auto kernel = fa::na_attention_kernel<T, D, Tiles, N>;
    CHECK(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, kernel, tiles.warps * 32, smem));

    fa::NaParams p{};
    p.B = 1;
    p.H = H;
    p.D = D;
    p.D_v = D;
    p.n_axes = N;
    p.L = ny * nx;
    p.scale_log2 = 1.4426950408889634f / std::sqrt(float(D));
    const int lengths[2] = {ny, nx};
    const int kernels[2] = {ky, kx};
    fa::NaAxis axes[fa::kNaMaxAxes];
    for (int a = 0; a < fa::kNaMaxAxes; ++a) {
      axes[a] = fa::NaAxis{1, 1, 1, 0};
    }
    // Axis a of N is the a-th of (ny, nx) counted from the end.
    for (int a = 0; a < N; ++a) {
      axes[a] = fa::NaAxis{lengths[2 - N + a], kernels[2 - N + a], 1, 0};
      p.axes[a] = axes[a];
    }
    for (int a = N; a < fa::kNaMaxAxes; ++a) {
      p.axes[a] = axes[a];
    }
    for (auto* s : {p.q_strides, p.k_strides, p.v_strides, p.o_strides}) {
      s[0] = (long long)ny * nx * H * D;
      for (int a = 0; a < fa::kNaMaxAxes; ++a) {
        s[1 + a] = 0;
      }
      s[N] = (long long)H * D; // the fastest axis in use
      if (N == 2) {
        s[1] = (long long)nx * H * D;
      }
      s[4] = D;
    }
    fa::NaGrid grid = fa::na_choose_grid(
        axes, N, tiles.warps, tiles.warp_rows, tiles.key_block);
    if (waves > 0) {
      int sms = 0;
      CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
      grid = fa::na_run_for(
          grid, axes, N, tiles.key_block, tiles.stages, H, (long long)waves * sms * per_sm, 0);
    }
    const dim3 blocks(grid.blocks, H, 1);

    CHECK(cudaMemset(o, 0xff, n * sizeof(T)));
    CHECK(cudaMemset(err, 0, sizeof(unsigned)));
    kernel<<<blocks, tiles.warps * 32, smem>>>(q, k, v, o, p, grid);
    CHECK(cudaGetLastError());
    max_error<<<1024, 256>>>(o, ref, n, err);
    unsigned err_bits;
    CHECK(cudaMemcpy(&err_bits, err, sizeof(unsigned), cudaMemcpyDeviceToHost));
    float max_err;
    std::memcpy(&max_err, &err_bits, sizeof(float));

    for (int i = 0; i < (profile() ? 0 : 3); ++i) {
      kernel<<<blocks, tiles.warps * 32, smem>>>(q, k, v, o, p, grid);
    }
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaEventRecord(e0));
    for (int i = 0; i < reps; ++i) {
      kernel<<<blocks, tiles.warps * 32, smem>>>(q, k, v, o, p, grid);
    }
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    CHECK(cudaGetLastError());
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double us = ms * 1e3 / reps;
    const double floor_us = 4.0 * n * sizeof(T) / (copy * 1e12) * 1e6;
    const bool chosen = tiles ==
            fa::choose_na_tiles(D, fa::DType::Float16, fa::Backend::Cuda, N) &&
        waves == 1;
    std::printf(
        "%-9s bq=%3d bk=%2d warps=%2d stages=%2d min_blocks=%d "
        "(%d/SM) smem=%6d run=%3d (%5d groups) %7.1f us %3.0f%% of floor  "
        "err %.2e%s\n",
        name, fa::na_tile_queries(tiles), tiles.key_block, tiles.warps, tiles.stages, tiles.min_blocks,
        per_sm, smem, grid.run, grid.blocks * H, us,
        100.0 * floor_us / us, max_err, chosen ? "  (chosen)" : "");
    std::fflush(stdout);
  }
};

/// The 1-D candidates, on one case: runs of tiles through a ring of key
/// blocks (one or two rounds of threadgroups) against a tile a threadgroup
/// (waves = 0, the kernel before), over 2 to 8 warps; a ring needs the box
/// (bq + k - 1 keys, at worst alignment) in stages - 1 blocks.
void sweep_1d(Case<1>& c) {
  c.shape<fa::NaTilesOf<16, 32, 4, 6, 4>>(20, 0);
  c.shape<fa::NaTilesOf<16, 32, 4, 6, 4>>(20, 1);
  c.shape<fa::NaTilesOf<16, 32, 4, 6, 4>>(20, 2);
  c.shape<fa::NaTilesOf<16, 32, 4, 6, 3>>(20, 1);
  c.shape<fa::NaTilesOf<16, 32, 2, 5, 6>>(20, 1);
  c.shape<fa::NaTilesOf<16, 32, 8, 8, 2>>(20, 1);
}

/// The 2-D tiles: the chosen one and the 8-warp one before it (no runs in
/// 2-D; a check that the 1-D change leaves them where they were).
void sweep_2d(Case<2>& c) {
  c.shape<fa::NaTilesOf<16, 64, 8, 3, 2>>(20, 0);
  c.shape<fa::NaTilesOf<16, 64, 4, 3, 4>>(20, 0);
}

int main() {
  const double copy = copy_tbps();
  std::printf("copy bandwidth %.2f TB/s\n", copy);
  if (profile()) {
    Case<1> c63("1d k63", 1, 16384, 1, 63, copy);
    c63.shape<fa::NaTilesOf<16, 32, 4, 6, 4>>(1, 1);
    c63.shape<fa::NaTilesOf<16, 32, 4, 6, 4>>(1, 0);
    Case<1> c7("1d k7", 1, 16384, 1, 7, copy);
    c7.shape<fa::NaTilesOf<16, 32, 4, 6, 4>>(1, 1);
    return 0;
  }
  {
    Case<1> c("1d k7", 1, 16384, 1, 7, copy);
    sweep_1d(c);
  }
  {
    Case<1> c("1d k63", 1, 16384, 1, 63, copy);
    sweep_1d(c);
  }
  {
    Case<2> c("2d 7x7", 128, 128, 7, 7, copy);
    sweep_2d(c);
  }
  {
    Case<2> c("2d 13x13", 128, 128, 13, 13, copy);
    sweep_2d(c);
  }
  return 0;
}
