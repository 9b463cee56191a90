// Times the CUDA attention kernel (kernels/attention.h on the CUDA target)
// under several tile shapes, to choose choose_attention_tiles' CUDA entries
// from measurements. Standalone: no MLX; nvcc builds it on the GPU machine.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. \
//     benchmarks/cuda_tile_sweep.cu -o sweep
//   ./sweep                       # table: case, tiles, time, TFLOP/s, error
//
// With -DFA_SWEEP_QUICK it builds and runs only the cases that decide the
// current choices, against their nearest rivals (a fraction of the compile
// time, for a short device lease).
//
// Each case checks every shape's output against the first shape's (and
// that one against a plain fp32 reference kernel on a small problem), so a
// fast but wrong shape shows up in the error column.
#include "benchmarks/cuda_attention_case.cuh"

#ifdef FA_SWEEP_QUICK
// The choices on Hopper (wgmma). Past one wave at D = 128: the producer
// warpgroup's tiles (128 queries, two math warpgroups, TMA), against one
// warpgroup of 64 queries at 4 blocks a multiprocessor (Q in shared memory,
// wg-sq; K and V a buffer each, staggered copies: stages = 1) and two
// warpgroups of 128 sharing each K/V block at 2, on square grids, chunked
// prefill (128 queries against 4096 keys, GQA 4) and GQA prefill; within
// one wave, 128-key blocks at 2. D = 96: 128 queries at 2 against 64. D =
// 64: one warpgroup of 64 queries at 3 a multiprocessor against the
// producer's tiles of two and three math warpgroups. Everywhere the
// producer has them, its small-grid tiles (one math warpgroup of 64
// queries, two a multiprocessor: choose_small_grid_tiles, opt-in), which
// issue 46's rows (small_grid) rank against the chooser's, with the
// producer's 64-query tiles of 128-key blocks at one a multiprocessor. The
// first shape of each case is its error reference (checked against the
// fp32 reference kernel on the small square cases).
template <typename T>
void d128_past_a_wave(const char* type, Problem pr, int reps) {
  Case<T, 128> c(type, pr);
  c.template shape<fa::AttnTilesOf<128, 128, 8, 3, 1, true, true, true>>(reps);
  c.template shape<fa::AttnTilesOf<64, 64, 4, 1, 4, true, true>>(reps);
  c.template shape<fa::AttnTilesOf<128, 64, 8, 1, 2, true, true>>(reps);
  c.template shape<fa::AttnTilesOf<64, 64, 4, 3, 2, true, true, true>>(reps);
}

// Issue 46's small grids at D = 128: the chooser's tiles past one wave
// and within one against the producer's 64-query tiles, two a
// multiprocessor with 64-key blocks and one with 128-key blocks.
template <typename T>
void d128_small_grid(const char* type, Problem pr, int reps) {
  Case<T, 128> c(type, pr);
  c.template shape<fa::AttnTilesOf<128, 128, 8, 3, 1, true, true, true>>(reps);
  c.template shape<fa::AttnTilesOf<64, 128, 4, 1, 2, true, true>>(reps);
  c.template shape<fa::AttnTilesOf<64, 64, 4, 3, 2, true, true, true>>(reps);
  c.template shape<fa::AttnTilesOf<64, 128, 4, 3, 1, true, true, true>>(reps);
}

int main() {
  for (int L : {512, 1024}) {
    Case<fa::half_t, 128> c("f16", {1, 32, L, 128, false});
    c.shape<fa::AttnTilesOf<64, 128, 4, 1, 2, true, true>>(50);
    c.shape<fa::AttnTilesOf<64, 64, 4, 1, 4, true, true>>(50);
  }
  for (int L : {2048, 4096}) {
    d128_past_a_wave<fa::half_t>("f16", {1, 32, L, 128, false}, 10);
  }
  d128_past_a_wave<fa::bfloat_t>("bf16", {8, 32, 4096, 128, true, 128, 8}, 20);
  d128_past_a_wave<fa::bfloat_t>("bf16", {1, 32, 2048, 128, true, 0, 8}, 20);
  for (bool causal : {false, true}) {
    d128_past_a_wave<fa::bfloat_t>("bf16", {4, 32, 8192, 128, causal}, 3);
  }
  // Causal GQA prefill (32/8 heads) on small grids.
  d128_small_grid<fa::bfloat_t>("bf16", {8, 32, 512, 128, true, 0, 8}, 50);
  d128_small_grid<fa::bfloat_t>("bf16", {4, 32, 1024, 128, true, 0, 8}, 50);
  d128_small_grid<fa::bfloat_t>("bf16", {1, 32, 512, 128, true, 0, 8}, 100);
  d128_small_grid<fa::bfloat_t>("bf16", {2, 32, 2048, 128, true, 0, 8}, 20);
  for (int L : {512, 2048}) {
    Case<fa::half_t, 96> c("f16", {1, 32, L, 96, false});
    const int reps = L < 2048 ? 50 : 10;
    c.shape<fa::AttnTilesOf<64, 64, 4, 1, 4, true, true>>(reps);
    c.shape<fa::AttnTilesOf<128, 64, 8, 1, 2, true, true>>(reps);
  }
  for (bool causal : {false, true}) {
    Case<fa::half_t, 64> c("f16", {1, 32, 2048, 64, causal});
    c.shape<fa::AttnTilesOf<64, 128, 4, 2, 3, true>>(20);
    c.shape<fa::AttnTilesOf<128, 128, 8, 3, 1, true, true, true>>(20);
    c.shape<fa::AttnTilesOf<192, 128, 12, 3, 1, true, true, true>>(20);
  }
  {
    Case<fa::half_t, 64> c("f16", {1, 32, 1024, 64, false});
    c.shape<fa::AttnTilesOf<64, 128, 4, 2, 3, true>>(50);
    c.shape<fa::AttnTilesOf<64, 128, 4, 3, 2, true, true, true>>(50);
  }
  return 0;
}
#else
int main() {
  // Large problems: the throughput that matters.
  for (bool causal : {false, true}) {
    Case<fa::bfloat_t, 128> c("bf16", {4, 32, 8192, 128, causal});
    c.shape<fa::AttnTilesOf<64, 64, 4, 2>>(3);
    c.shape<fa::AttnTilesOf<128, 64, 8, 2>>(3);
    c.shape<fa::AttnTilesOf<128, 32, 4, 2>>(3);
    c.shape<fa::AttnTilesOf<128, 16, 4, 2>>(3);
    c.shape<fa::AttnTilesOf<64, 32, 2, 2>>(3);
    c.shape<fa::AttnTilesOf<128, 32, 4, 3>>(3);
  }
  {
    Case<fa::half_t, 128> c("f16", {1, 32, 4096, 128, false});
    c.shape<fa::AttnTilesOf<64, 64, 4, 2>>(10);
    c.shape<fa::AttnTilesOf<128, 32, 4, 2>>(10);
    c.shape<fa::AttnTilesOf<128, 16, 4, 2>>(10);
    c.shape<fa::AttnTilesOf<64, 32, 2, 2>>(10);
  }
  {
    Case<fa::bfloat_t, 64> c("bf16", {4, 32, 8192, 64, false});
    c.shape<fa::AttnTilesOf<128, 64, 8, 2>>(3);
    c.shape<fa::AttnTilesOf<128, 64, 4, 2>>(3);
    c.shape<fa::AttnTilesOf<64, 64, 2, 2>>(3);
    c.shape<fa::AttnTilesOf<128, 32, 4, 2>>(3);
  }
  for (int D_case = 0; D_case < 2; ++D_case) {
    if (D_case == 0) {
      Case<fa::half_t, 80> c("f16", {1, 32, 2048, 80, false});
      c.shape<fa::AttnTilesOf<64, 64, 4, 2>>(20);
      c.shape<fa::AttnTilesOf<128, 64, 8, 2>>(20);
      c.shape<fa::AttnTilesOf<128, 32, 4, 2>>(20);
      c.shape<fa::AttnTilesOf<128, 64, 4, 2>>(20);
    } else {
      Case<fa::half_t, 96> c("f16", {1, 32, 2048, 96, false});
      c.shape<fa::AttnTilesOf<64, 64, 4, 2>>(20);
      c.shape<fa::AttnTilesOf<128, 64, 8, 2>>(20);
      c.shape<fa::AttnTilesOf<128, 32, 4, 2>>(20);
      c.shape<fa::AttnTilesOf<128, 64, 4, 2>>(20);
    }
  }
  // Small problems: one wave of blocks or less.
  {
    Case<fa::half_t, 64> c("f16", {1, 32, 512, 64, false});
    c.shape<fa::AttnTilesOf<64, 64, 4, 2>>(50);
    c.shape<fa::AttnTilesOf<128, 64, 8, 2>>(50);
    c.shape<fa::AttnTilesOf<128, 64, 4, 2>>(50);
    c.shape<fa::AttnTilesOf<64, 64, 2, 2>>(50);
    c.shape<fa::AttnTilesOf<64, 32, 2, 2>>(50);
  }
  {
    Case<fa::half_t, 128> c("f16", {1, 32, 512, 128, false});
    c.shape<fa::AttnTilesOf<64, 64, 4, 2>>(50);
    c.shape<fa::AttnTilesOf<128, 32, 4, 2>>(50);
    c.shape<fa::AttnTilesOf<64, 32, 2, 2>>(50);
    c.shape<fa::AttnTilesOf<32, 64, 2, 2>>(50);
  }
  {
    Case<fa::half_t, 32> c("f16", {1, 32, 1024, 32, false});
    c.shape<fa::AttnTilesOf<64, 64, 4, 2>>(50);
    c.shape<fa::AttnTilesOf<128, 64, 4, 2>>(50);
    c.shape<fa::AttnTilesOf<128, 64, 8, 2>>(50);
  }
  {
    Case<float, 128> c("f32", {1, 32, 1024, 128, false});
    c.shape<fa::AttnTilesOf<64, 32, 4, 2>>(10);
    c.shape<fa::AttnTilesOf<32, 32, 2, 2>>(10);
  }
  return 0;
}
#endif
