// What the standalone CUDA sweeps and benches (cuda_*_sweep.cu,
// cuda_bwd_bench.cu) share: error checks, the inputs,
// the error measure against a reference, and the copy bandwidth that their
// memory floors use.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                    \
  do {                                                              \
    cudaError_t e = (x);                                            \
    if (e != cudaSuccess) {                                         \
      std::fprintf(                                                 \
          stderr, "%s:%d %s\n", __FILE__, __LINE__,                 \
          cudaGetErrorString(e));                                   \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

/// Uniform values in [-1, 1) from a hash of the index: no zeros to flatter.
template <typename T>
__global__ void fill_random(T* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ (seed * 0x9e3779b9u);
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    x[i] = T(float(h & 0xffff) / 32768.0f - 1.0f);
  }
}

/// *err = max |x - ref| as float bits (non-negative floats order as their
/// bits); a NaN anywhere gives the largest value.
template <typename T>
__global__ void max_error(const T* x, const float* ref, size_t n, unsigned* err) {
  unsigned local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float d = fabsf(float(x[i]) - ref[i]);
    const unsigned bits = d == d ? __float_as_uint(d) : 0x7f800000u;
    local = bits > local ? bits : local;
  }
  atomicMax(err, local);
}

/// Milliseconds a call of launch() takes: one call first (it loads the
/// kernel and warms the caches), then the mean of `reps` between two events.
template <typename Launch>
float launch_ms(Launch launch, int reps) {
  launch();
  CHECK(cudaGetLastError());
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i) {
    launch();
  }
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  CHECK(cudaGetLastError());
  float ms;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms / reps;
}

/// Device-to-device copy bandwidth (bytes read plus written per second).
inline double copy_tbps() {
  const size_t bytes = size_t(2) << 30;
  void *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const int reps = 10;
  CHECK(cudaEventRecord(e0));
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  }
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return 2.0 * bytes * reps / (ms * 1e-3) / 1e12;
}
