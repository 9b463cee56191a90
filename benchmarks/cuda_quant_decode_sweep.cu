// Times decode against a quantized K/V cache (mlx-lm's QuantizedKVCache:
// mx.quantize's affine layout) through the library's quantized kernel as
// the library plans it (quantized_attention_planner.cpp): a KV head's query
// heads packed as rows, the keys split by the quantized bytes, then the
// combine (or the last split merging: one kernel). Beside it the rivals of
// the plan (its split count halved and doubled, the plain one-stage K/V
// schedule in place of the register stage), its variants (the loader's
// chunk policies, tile/cuda_quantized_chunks.h: the arithmetic in 16-bit
// pairs, then also the words in 16-byte loads, then also consecutive
// threads on consecutive rows; the decode tiles of one warp,
// choose_quantized_decode_tiles, with each, at twice the plan's rule's
// split count for them, and with none and all at the rule's) and the
// library's bf16 decode of the same cache dequantized, whose output is
// each quantized run's reference: the same math on the same values, so a
// fast but wrong variant shows in its error. The package's plan runs
// "plan, packed, 16B, rows" or "decode, packed, 16B x2", by
// plan/quantized_kernel_choice.h's rule. Standalone: no MLX.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. \
//     benchmarks/cuda_quant_decode_sweep.cu -o quant_decode_sweep
//   ./quant_decode_sweep [case]  # us, % of the byte floor, error
//
// Times are the mean of many calls between two events, each call on the
// next of several copies of the cache, enough copies to pass the L2 (50 MB
// on an H100: one 4-bit cache of 32K keys, 38 MB, would fit and flatter).
// The floor is each variant's K and V bytes at the copy bandwidth measured
// here. Small grids are paced by the host's launches (a few us a launch),
// which MLX's graphs do not pay.
#include <functional>

#include "benchmarks/cuda_attention_case.cuh"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_kernel.cuh"
#include "mlx_fused_attn/plan/split_count.h"

namespace {

constexpr int kSms = 132;
constexpr int kD = 128;
constexpr int kBits = 4;
constexpr int kGroup = 64;
typedef fa::bfloat_t T;
/// The library's tiles: the quantized chooser's at D = 128 in bf16, and the
/// float decode's within a wave (choose_attention_tiles, sm_90a).
typedef fa::AttnTilesOf<64, 64, 4, 1, 2> QuantTiles;
typedef fa::AttnTilesOf<64, 128, 4, 1, 2, true, true> FloatTiles;
static_assert(
    QuantTiles::value ==
        fa::choose_quantized_attention_tiles(kD, fa::DType::BFloat16, fa::Backend::Cuda),
    "the sweep's quantized tiles are the chooser's");
/// The quantized decode tiles (one warp, 16 rows, 32-key blocks).
typedef fa::AttnTilesOf<16, 32, 1, 1, 8> DecodeTiles;
static_assert(DecodeTiles::value == fa::choose_quantized_decode_tiles(),
              "the sweep's decode tiles are the chooser's");
/// The key-slice tiles (16 rows in four warps, each with a quarter of a
/// block's keys).
typedef fa::AttnTilesOf<16, 64, 4, 1, 2, false, false, false, false, false, true> SlicedTiles;
static_assert(SlicedTiles::value == fa::choose_quantized_sliced_tiles(),
              "the sweep's key-slice tiles are the chooser's");
/// The loader's chunk policies (tile/cuda_quantized_chunks.h): the
/// arithmetic in 16-bit pairs; with it the words 16 bytes a load (the
/// sweep's caches are contiguous: every chunk 16-byte aligned); with both,
/// consecutive threads on consecutive rows.
typedef fa::QuantizedPackedChunks Packed;
typedef fa::QuantizedAlignedWords<Packed> PackedWide;
typedef fa::QuantizedRowsFastest<PackedWide> PackedWideRows;

/// Decode (L_q = 1): a KV head's query heads as its rows.
struct Decode {
  int B, Hq, Hkv, Lk;
  int rows() const { return Hq / Hkv; }
};

constexpr int kWords = kD * kBits / 32;  // a row's words
constexpr int kGroups = kD / kGroup;     // a row's scales (and biases)

/// The quantized K/V bytes of one key (split_count.h), as the planner counts them.
int64_t bytes_a_key() {
  return mlx_fused_attn::quantized_kv_bytes_a_key(kD, kD, kBits, kGroup, sizeof(T));
}

/// The planner's quantized split count (quantized_attention_planner.cpp's
/// quantized_key_splits, at the share of a grid that fills a wave), for
/// the tiles `t`.
int quant_splits(const Decode& d, fa::AttnTiles t) {
  const long groups = long(d.Hkv) * d.B;
  const long per_sm =
      mlx_fused_attn::blocks_for_bytes_in_flight(t.bk * bytes_a_key(), t.min_blocks);
  return mlx_fused_attn::key_split_count(
      groups, per_sm * kSms, (d.Lk + t.bk - 1) / t.bk,
      mlx_fused_attn::splits_worth_their_partials_of(
          d.Lk, d.rows(), kD, bytes_a_key(), 2 * groups >= kSms ? 16 : 8));
}

/// The float planner's split count (family_planning.cpp's key_splits).
int float_splits(const Decode& d) {
  constexpr fa::AttnTiles t = FloatTiles::value;
  const long groups = long(d.Hkv) * d.B;
  return mlx_fused_attn::key_split_count(
      groups, long(t.min_blocks) * kSms, (d.Lk + t.bk - 1) / t.bk,
      mlx_fused_attn::splits_worth_their_partials(
          d.Lk, d.rows(), kD, kD, sizeof(T), 2 * groups >= kSms ? 16 : 8));
}

/// The quantized family's combine (quantized_attention_kernel.cuh).
void quantized_split_combine_launch(const float* o_part, const float* stats, T* o,
                                    const fa::AttnParams& p, int splits) {
  static constexpr CombineKernel<T> kernels[] = {
      fa::quantized_split_combine_kernel<T, fa::SplitCombineForm::OneElement>,
      fa::quantized_split_combine_kernel<T, fa::SplitCombineForm::Grouped>,
      fa::quantized_split_combine_kernel<T, fa::SplitCombineForm::RowThreadgroup>};
  combine_launch(kernels, o_part, stats, o, p, splits);
}

/// One thread a (row, group) of x [rows, kD]: mx.quantize's affine form
/// (scale (max - min) / (2^bits - 1), bias min, both rounded to T, codes
/// rounded to the nearest), its codes packed into the row's bit stream.
__global__ void quantize_rows(const T* x, size_t rows, unsigned* words, T* scales, T* biases) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= rows * kGroups) return;
  const size_t row = i / kGroups;
  const int g = int(i % kGroups);
  const T* v = x + row * kD + g * kGroup;
  float lo = float(v[0]), hi = lo;
  for (int j = 1; j < kGroup; ++j) {
    lo = fminf(lo, float(v[j]));
    hi = fmaxf(hi, float(v[j]));
  }
  const T scale = T(hi > lo ? (hi - lo) / float((1 << kBits) - 1) : 1.0f);
  const T bias = T(lo);
  scales[i] = scale;
  biases[i] = bias;
  unsigned* w = words + row * kWords + g * kGroup * kBits / 32;
  for (int k = 0; k < kGroup * kBits / 32; ++k) w[k] = 0;
  for (int j = 0; j < kGroup; ++j) {
    const float c = rintf((float(v[j]) - float(bias)) / float(scale));
    const unsigned code = unsigned(fminf(fmaxf(c, 0.0f), float((1 << kBits) - 1)));
    w[j * kBits / 32] |= code << (j * kBits % 32);
  }
}

/// x = scale * code + bias in fp32, rounded once to T: the kernel's values.
__global__ void dequantize_rows(const unsigned* words, const T* scales, const T* biases,
                                size_t rows, T* x) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < rows * kD;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / kD;
    const int col = int(i % kD);
    const unsigned code =
        (words[row * kWords + col * kBits / 32] >> (col * kBits % 32)) & ((1u << kBits) - 1);
    const size_t g = row * kGroups + col / kGroup;
    x[i] = T(float(scales[g]) * float(code) + float(biases[g]));
  }
}

/// One copy of the cache: quantized, and dequantized for the bf16 decode.
struct Cache {
  unsigned *k_words, *v_words;
  T *k_scales, *k_biases, *v_scales, *v_biases;
  T *k, *v;  // dequantized
};

struct QuantDecodeCase {
  Decode d;
  size_t n, n_kv;
  T *q, *o;
  float *ref, *o_part, *stats;
  unsigned* counters;
  std::vector<Cache> caches;
  float tb_s;

  QuantDecodeCase(Decode d_, float tb_s_) : d(d_), tb_s(tb_s_) {
    n = size_t(d.B) * d.Hq * kD;
    n_kv = size_t(d.B) * d.Hkv * d.Lk * kD;
    CHECK(cudaMalloc(&q, n * sizeof(T)));
    CHECK(cudaMalloc(&o, n * sizeof(T)));
    CHECK(cudaMalloc(&ref, n * sizeof(float)));
    CHECK(cudaMalloc(&o_part, 256 * n * sizeof(float)));
    CHECK(cudaMalloc(&stats, 2 * 256 * n / kD * sizeof(float)));
    CHECK(cudaMalloc(&counters, n / kD * sizeof(unsigned)));
    fill_random<<<1024, 256>>>(q, n, 1);
    // Copies enough for ~150 MB of quantized cache, three L2s (the bf16
    // copies are larger still).
    const double bytes = double(bytes_a_key()) * d.B * d.Hkv * d.Lk;
    const int copies = std::max(1, std::min(32, int(std::ceil(150e6 / bytes))));
    caches.resize(copies);
    caches[0] = make_cache();
    for (int c = 1; c < copies; ++c) caches[c] = copy_cache(caches[0]);
    CHECK(cudaDeviceSynchronize());
  }
  ~QuantDecodeCase() {
    for (const Cache& c : caches)
      for (void* x : {(void*)c.k_words, (void*)c.v_words, (void*)c.k_scales, (void*)c.k_biases,
                      (void*)c.v_scales, (void*)c.v_biases, (void*)c.k, (void*)c.v})
        cudaFree(x);
    for (void* x : {(void*)q, (void*)o, (void*)ref, (void*)o_part, (void*)stats, (void*)counters})
      cudaFree(x);
  }

  void alloc(Cache& c) const {
    const size_t rows = n_kv / kD;
    CHECK(cudaMalloc(&c.k_words, rows * kWords * 4));
    CHECK(cudaMalloc(&c.v_words, rows * kWords * 4));
    for (T** s : {&c.k_scales, &c.k_biases, &c.v_scales, &c.v_biases})
      CHECK(cudaMalloc(s, rows * kGroups * sizeof(T)));
    CHECK(cudaMalloc(&c.k, n_kv * sizeof(T)));
    CHECK(cudaMalloc(&c.v, n_kv * sizeof(T)));
  }

  /// Random K and V, quantized, then dequantized into c.k and c.v.
  Cache make_cache() const {
    Cache c;
    alloc(c);
    const size_t rows = n_kv / kD;
    const unsigned blocks = unsigned((rows * kGroups + 255) / 256);
    fill_random<<<1024, 256>>>(c.k, n_kv, 2);
    fill_random<<<1024, 256>>>(c.v, n_kv, 3);
    quantize_rows<<<blocks, 256>>>(c.k, rows, c.k_words, c.k_scales, c.k_biases);
    quantize_rows<<<blocks, 256>>>(c.v, rows, c.v_words, c.v_scales, c.v_biases);
    dequantize_rows<<<1024, 256>>>(c.k_words, c.k_scales, c.k_biases, rows, c.k);
    dequantize_rows<<<1024, 256>>>(c.v_words, c.v_scales, c.v_biases, rows, c.v);
    CHECK(cudaGetLastError());
    return c;
  }

  Cache copy_cache(const Cache& from) const {
    Cache c;
    alloc(c);
    const size_t rows = n_kv / kD;
    auto copy = [](void* to, const void* src, size_t bytes) {
      CHECK(cudaMemcpy(to, src, bytes, cudaMemcpyDeviceToDevice));
    };
    copy(c.k_words, from.k_words, rows * kWords * 4);
    copy(c.v_words, from.v_words, rows * kWords * 4);
    copy(c.k_scales, from.k_scales, rows * kGroups * sizeof(T));
    copy(c.k_biases, from.k_biases, rows * kGroups * sizeof(T));
    copy(c.v_scales, from.v_scales, rows * kGroups * sizeof(T));
    copy(c.v_biases, from.v_biases, rows * kGroups * sizeof(T));
    copy(c.k, from.k, n_kv * sizeof(T));
    copy(c.v, from.v, n_kv * sizeof(T));
    return c;
  }

  /// The packed parameters: H_kv heads of H_q / H_kv rows. Scores 16 times
  /// 1/sqrt(D)'s: a softmax that picks out a few keys a row, so that a
  /// block read wrong or left out moves the output by far more than two
  /// right kernels differ (uniform weights over 32K keys would average any
  /// one block away).
  fa::AttnParams params() const {
    fa::AttnParams p = contiguous_params(d.B, d.Hkv, d.Hkv, d.rows(), d.Lk, kD);
    p.scale_log2 *= 16.0f;
    return p;
  }

  fa::QuantKvParams qparams() const {
    fa::QuantKvParams qp{};
    qp.bits = kBits;
    qp.group_size = kGroup;
    for (fa::QuantKvOperand* x : {&qp.k, &qp.v}) {
      x->word_strides[2] = kWords;
      x->word_strides[1] = x->word_strides[2] * d.Lk;
      x->word_strides[0] = x->word_strides[1] * d.Hkv;
      x->scale_strides[2] = x->bias_strides[2] = kGroups;
      x->scale_strides[1] = x->bias_strides[1] = int64_t(kGroups) * d.Lk;
      x->scale_strides[0] = x->bias_strides[0] = int64_t(kGroups) * d.Lk * d.Hkv;
      x->scale_group_stride = x->bias_group_stride = 1;
    }
    return qp;
  }

  double floor_us(int64_t bytes) const { return bytes / (tb_s * 1e12) * 1e6; }

  /// Mean us of `launch(cache)` over the copies in turn.
  template <typename Launch>
  float time_us(Launch launch, int reps) {
    int i = 0;
    return 1e3f * launch_ms([&] { launch(caches[i++ % caches.size()]); }, reps);
  }

  double error() const { return max_diff(o, ref, n); }

  /// The library's bf16 decode of the dequantized cache: the reference.
  void float_decode(int reps) {
    constexpr fa::AttnTiles t = FloatTiles::value;
    const fa::AttnParams p = params();
    const int splits = float_splits(d);
    fa::AttnFeatures f{};
    f.align_q = p.L_q % t.bq == 0;
    f.align_k = p.L_k % t.bk == 0;
    f.split_keys = splits > 1;
    const dim3 grid(((p.L_q + t.bq - 1) / t.bq) * splits, p.H_q, p.B);
    std::vector<std::function<void()>> runs;
    for (const Cache& c : caches)
      runs.push_back(attention_launch<T, kD, FloatTiles, false>(p, f, grid, q, c.k, c.v, o,
                                                                 o_part, stats, splits));
    int i = 0;
    const float us = 1e3f * launch_ms([&] {
      runs[i++ % runs.size()]();
      if (splits > 1)
        split_combine_launch(o_part, stats, o, p, splits);
    }, reps);
    to_float<<<1024, 256>>>(o, ref, n);
    CHECK(cudaDeviceSynchronize());
    std::printf("  bf16 decode (dequantized cache) splits=%3d %8.1f us  %5.1f%% of its floor "
                "(%.1f MB)\n",
                splits, us, 100.0 * floor_us(2 * int64_t(n_kv) * sizeof(T)) / us,
                2e-6 * n_kv * sizeof(T));
  }

  /// The quantized kernel of tiles `Tiles` with `splits` splits,
  /// register-staged or plain, its word loads and arithmetic `Decode`'s:
  /// split kernel and combine, then the one kernel (the last split
  /// merging).
  template <typename Tiles, bool kStaged, typename Decode = fa::QuantizedFloatChunks>
  void quant_decode(int splits, const char* what, int reps) {
    constexpr fa::AttnTiles t = Tiles::value;
    auto kernel =
        fa::quantized_attention_kernel<T, kD, kBits, Tiles, false, false, kStaged, Decode>;
    const int smem = fa::attention_smem_bytes(t, kD, kD, fa::DType::BFloat16, fa::Backend::Cuda);
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    if (fa::attention_prefers_max_shared(t)) {  // as the library does (its kernel key)
      CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared));
    }
    fa::QuantAttnKernelArgs<T> a{};
    a.q = q;
    a.out = o;
    a.o_part = o_part;
    a.stats = stats;
    a.params = params();
    a.qparams = qparams();
    a.features.align_q = a.params.L_q % t.bq == 0;
    a.features.align_k = a.params.L_k % t.bk == 0;
    a.features.split_keys = splits > 1;
    a.n_splits = splits;
    const fa::AttnParams p = a.params;
    const dim3 grid(((p.L_q + t.bq - 1) / t.bq) * splits, p.H_q, p.B);
    const size_t counter_bytes = size_t(p.H_q) * p.B * sizeof(unsigned);
    auto with_cache = [a](const Cache& c, unsigned* counters) {
      fa::QuantAttnKernelArgs<T> x = a;
      x.k_words = c.k_words;
      x.k_scales = c.k_scales;
      x.k_biases = c.k_biases;
      x.v_words = c.v_words;
      x.v_scales = c.v_scales;
      x.v_biases = c.v_biases;
      x.split_counters = counters;
      return x;
    };
    const int threads = t.warps * 32;
    CHECK(cudaMemset(o, 0xff, n * sizeof(T)));
    const float us = time_us([&](const Cache& c) {
      kernel<<<grid, threads, smem>>>(with_cache(c, nullptr));
      if (splits > 1)
        quantized_split_combine_launch(o_part, stats, o, p, splits);
    }, reps);
    const double err = error();
    float us_one = 0;
    double err_one = 0;
    if (splits > 1) {
      CHECK(cudaMemset(o, 0xff, n * sizeof(T)));
      us_one = time_us([&](const Cache& c) {
        CHECK(cudaMemsetAsync(counters, 0, counter_bytes));
        kernel<<<grid, threads, smem>>>(with_cache(c, counters));
      }, reps);
      err_one = error();
    }
    // bf16 outputs of values below 1: a right kernel differs from the
    // reference by a few roundings of P and O (~1e-3); a wrong one by far
    // more.
    const bool ok = err < 1e-2 && err_one < 1e-2;
    std::printf("  %-25s splits=%3d %8.1f us  %5.1f%% of floor (%.1f MB)  err %.2e  "
                "one kernel %8.1f us  err %.2e  %s\n",
                what, splits, us, 100.0 * floor_us(int64_t(bytes_a_key()) * d.B * d.Hkv * d.Lk) / us,
                1e-6 * bytes_a_key() * d.B * d.Hkv * d.Lk, err, us_one, err_one,
                ok ? "ok" : "WRONG");
    std::fflush(stdout);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int only = argc > 1 ? std::atoi(argv[1]) : -1;  // one case, for a profiler
  const float tb_s = float(copy_tbps());
  std::printf("copy %.2f TB/s; %d-bit K and V in groups of %d, bf16, D=%d\n", tb_s, kBits,
              kGroup, kD);
  int index = 0;
  // The last case's keys end inside a block: a ragged quarter, and a
  // quarter past the last key, under the key slices.
  for (Decode d : {Decode{1, 32, 8, 32768}, Decode{1, 32, 8, 4096}, Decode{8, 32, 8, 32768},
                   Decode{1, 32, 8, 4133}}) {
    if (only >= 0 && index++ != only) continue;
    std::printf("B=%d H=%d/%d Lq=1 Lk=%d\n", d.B, d.Hq, d.Hkv, d.Lk);
    QuantDecodeCase c(d, tb_s);
    const int reps = d.Lk > 4096 ? 200 : 1000;
    c.float_decode(reps);
    const int s = quant_splits(d, QuantTiles::value);
    c.quant_decode<QuantTiles, true>(s, "plan (register stage)", reps);
    if (s > 1) c.quant_decode<QuantTiles, true>((s + 1) / 2, "plan splits x0.5", reps);
    c.quant_decode<QuantTiles, true>(std::min(2 * s, mlx_fused_attn::kMaxKeySplits),
                                     "plan splits x2", reps);
    c.quant_decode<QuantTiles, false>(s, "one stage (old)", reps);
    c.quant_decode<QuantTiles, true, Packed>(s, "plan, packed", reps);
    c.quant_decode<QuantTiles, true, PackedWide>(s, "plan, packed, 16B", reps);
    c.quant_decode<QuantTiles, true, PackedWideRows>(s, "plan, packed, 16B, rows", reps);
    const int ss = quant_splits(d, SlicedTiles::value);
    c.quant_decode<SlicedTiles, true, PackedWideRows>(ss, "slices, packed, 16B, rows", reps);
    c.quant_decode<SlicedTiles, true, PackedWideRows>(
        std::min(2 * ss, mlx_fused_attn::kMaxKeySplits), "slices, pk, 16B, rows x2", reps);
    if (ss > 1) c.quant_decode<SlicedTiles, true, PackedWideRows>((ss + 1) / 2, "slices, pk, 16B, rows x0.5", reps);
    c.quant_decode<SlicedTiles, true>(ss, "slices (float chunks)", reps);
    const int sd = quant_splits(d, DecodeTiles::value);
    const int sd2 = std::min(2 * sd, mlx_fused_attn::kMaxKeySplits);
    c.quant_decode<DecodeTiles, true>(sd, "decode tiles", reps);
    c.quant_decode<DecodeTiles, true>(sd2, "decode tiles x2", reps);
    c.quant_decode<DecodeTiles, true, Packed>(sd2, "decode, packed x2", reps);
    c.quant_decode<DecodeTiles, true, PackedWide>(sd2, "decode, packed, 16B x2", reps);
    c.quant_decode<DecodeTiles, true, PackedWideRows>(sd, "decode, packed, 16B, rows", reps);
    c.quant_decode<DecodeTiles, true, PackedWideRows>(sd2, "decode, pk, 16B, rows x2", reps);
  }
  return 0;
}
