// Times calls whose keys the library splits (decoding against a long cache,
// GQA; few queries against one) through the library's kernels as the
// library plans them: at L_q = 1 a KV head's query heads packed as rows
// (attention_planner.cpp, pack_gqa_rows), the keys split across threadgroups
// up to a wave (key_splits), then the combine, or the last split merging
// (kernels/cuda/split_merge.cuh: one kernel); under the tiles the library
// runs there and their nearest rivals, each with the split count its wave
// gives. Standalone: no MLX.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. \
//     benchmarks/cuda_decode_sweep.cu -o decode_sweep
//   ./decode_sweep [case]   # case, tiles, splits, us, % of the copy floor
//
// Times are the mean of many calls between two events: both kernels, the
// split kernel's launches alone, the combine's alone, and the one kernel
// with its counters' memset (which the library folds into the launch that
// makes the temporaries). Small grids are
// paced by the host's launches here (a few us a launch), which MLX's graphs
// do not pay; CUPTI's kernel time (gpu_bench.py) is the number to record.
// The floor is K and V's bytes at the copy bandwidth measured here.
#include "benchmarks/cuda_attention_case.cuh"
#include "mlx_fused_attn/plan/split_count.h"

namespace {

constexpr int kSms = 132;

/// Lq = 1 packs a KV head's query heads as its rows, as the library does.
struct Decode {
  int B, Hq, Hkv, Lq, Lk;
  bool causal;
  bool packed() const { return Lq == 1; }
  int rows() const { return packed() ? Hq / Hkv : Lq; }
  int heads() const { return packed() ? Hkv : Hq; }
};

/// The library's split count (attention_planner.cpp, at the share of a grid
/// that fills a wave).
int splits_for(const Decode& d, const fa::AttnTiles& t, int D) {
  const int rows = d.rows();
  const long groups = long((rows + t.bq - 1) / t.bq) * d.heads() * d.B;
  return mlx_fused_attn::key_split_count(
      groups, long(t.min_blocks) * kSms, (d.Lk + t.bk - 1) / t.bk,
      mlx_fused_attn::splits_worth_their_partials(
          d.Lk, std::min(t.bq, rows), D, D, 2, 2 * groups >= kSms ? 16 : 8));
}

float copy_tb_s() {
  const size_t n = size_t(1) << 28;
  char *a, *b;
  CHECK(cudaMalloc(&a, n));
  CHECK(cudaMalloc(&b, n));
  const float ms = launch_ms([&] { CHECK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); }, 20);
  cudaFree(a);
  cudaFree(b);
  return 2.0f * n / (ms * 1e-3f) / 1e12f;
}

template <typename T, int D>
struct DecodeCase {
  Decode d;
  T *q, *k, *v, *o;
  float *ref, *o_part, *stats;
  unsigned int* counters;
  size_t n;
  bool has_ref = false;
  float floor_us;

  DecodeCase(Decode d_, float tb_s) : d(d_) {
    n = size_t(d.B) * d.Hq * d.Lq * D;
    const size_t n_kv = size_t(d.B) * d.Hkv * d.Lk * D;
    CHECK(cudaMalloc(&q, n * sizeof(T)));
    CHECK(cudaMalloc(&k, n_kv * sizeof(T)));
    CHECK(cudaMalloc(&v, n_kv * sizeof(T)));
    CHECK(cudaMalloc(&o, n * sizeof(T)));
    CHECK(cudaMalloc(&ref, n * sizeof(float)));
    CHECK(cudaMalloc(&o_part, 128 * n * sizeof(float)));
    CHECK(cudaMalloc(&stats, 2 * 128 * n / D * sizeof(float)));
    CHECK(cudaMalloc(&counters, n / D * sizeof(unsigned int)));
    fill_random<<<1024, 256>>>(q, n, 1);
    fill_random<<<1024, 256>>>(k, n_kv, 2);
    fill_random<<<1024, 256>>>(v, n_kv, 3);
    CHECK(cudaDeviceSynchronize());
    floor_us = 2.0f * n_kv * sizeof(T) / (tb_s * 1e12f) * 1e6f;
  }
  ~DecodeCase() {
    for (void* x : {(void*)q, (void*)k, (void*)v, (void*)o, (void*)ref, (void*)o_part,
                    (void*)stats, (void*)counters})
      cudaFree(x);
  }

  /// The parameters as planned (packed at Lq = 1).
  fa::AttnParams params() const {
    return contiguous_params(d.B, d.heads(), d.Hkv, d.rows(), d.Lk, D);
  }

  template <typename Tiles>
  void shape(int reps) {
    constexpr fa::AttnTiles t = Tiles::value;
    const fa::AttnParams p = params();
    const int splits = splits_for(d, t, D);
    fa::AttnFeatures f{};
    f.causal = d.causal;
    f.align_q = p.L_q % t.bq == 0;
    f.align_k = p.L_k % t.bk == 0;
    f.split_keys = splits > 1;
    const dim3 grid(((p.L_q + t.bq - 1) / t.bq) * splits, p.H_q, p.B);
    auto finish = [&] {
      if (splits > 1)
        split_combine_launch(o_part, stats, o, p, splits);
    };
    CHECK(cudaMemset(o, 0xff, n * sizeof(T)));
    float ms, ms_main, ms_combine = 0, ms_one = 0;
    double err = 0, err_one = 0;
    // The split kernel alone, with the combine (its output checked), and
    // the combine alone; then the one kernel, its output checked too.
    const size_t counter_bytes = size_t(grid.x / splits) * grid.y * grid.z * sizeof(unsigned int);
    auto time = [&](auto split_kernel, auto one_kernel) {
      ms_main = launch_ms(split_kernel, reps);
      ms = launch_ms([&] { split_kernel(); finish(); }, reps);
      if (!has_ref) {  // the first shape is the others' reference
        to_float<<<1024, 256>>>(o, ref, n);
        has_ref = true;
      }
      err = max_diff(o, ref, n);
      if (splits > 1) {
        ms_combine = launch_ms(finish, reps);
        CHECK(cudaMemset(o, 0xff, n * sizeof(T)));
        ms_one = launch_ms([&] {
          CHECK(cudaMemsetAsync(counters, 0, counter_bytes));
          one_kernel();
        }, reps);
        err_one = max_diff(o, ref, n);
      }
    };
    if (d.causal) {
      time(attention_launch<T, D, Tiles, true>(p, f, grid, q, k, v, o, o_part, stats, splits),
           attention_launch<T, D, Tiles, true>(p, f, grid, q, k, v, o, o_part, stats, splits,
                                               counters));
    } else {
      time(attention_launch<T, D, Tiles, false>(p, f, grid, q, k, v, o, o_part, stats, splits),
           attention_launch<T, D, Tiles, false>(p, f, grid, q, k, v, o, o_part, stats, splits,
                                                counters));
    }
    std::printf("B=%d H=%d/%d Lq=%3d Lk=%6d D=%d %-6s bq=%3d bk=%3d warps=%2d stages=%d blocks/SM>=%d "
                "splits=%3d %8.1f us (splits alone %6.1f, combine alone %5.1f; one kernel %6.1f, "
                "err %.2e)  %5.1f%% of floor  err %.2e\n",
                d.B, d.Hq, d.Hkv, d.Lq, d.Lk, D, t.producer ? "wg-tma" : t.q_shared ? "wg-sq" : "wg-rq",
                t.bq, t.bk, t.warps, t.stages, t.min_blocks, splits, ms * 1e3, ms_main * 1e3, ms_combine * 1e3,
                ms_one * 1e3, err_one,
                100.0f * floor_us / (ms * 1e3f), err);
    std::fflush(stdout);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int only = argc > 1 ? std::atoi(argv[1]) : -1;  // one case, for a profiler
  const float tb_s = copy_tb_s();
  std::printf("copy %.2f TB/s\n", tb_s);
  int index = 0;
  for (Decode d : {Decode{1, 32, 8, 1, 32768, false}, Decode{1, 32, 8, 1, 4096, false},
                   Decode{8, 32, 8, 1, 32768, false}, Decode{1, 32, 8, 16, 32768, true},
                   Decode{1, 32, 8, 128, 32768, true}}) {
    if (only >= 0 && index++ != only) continue;
    DecodeCase<fa::bfloat_t, 128> c(d, tb_s);
    const int reps = d.Lk > 4096 ? 200 : 1000;
    // The library's tiles within a wave (choose_attention_tiles), then two
    // stages of 128 keys at one block a multiprocessor, and the producer
    // warpgroup's tiles (TMA).
    c.shape<fa::AttnTilesOf<64, 128, 4, 1, 2, true, true>>(reps);
    c.shape<fa::AttnTilesOf<64, 128, 4, 2, 1, true, true>>(reps);
    c.shape<fa::AttnTilesOf<128, 128, 8, 3, 1, true, true, true>>(reps);
  }
  return 0;
}
