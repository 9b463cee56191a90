// Times the general CUDA attention kernel under an array mask of each class
// by block (kernels/mask_visits.h), against the same call without a mask:
// the cost of each class alone. B=1 H=32 L=2048 D=64 fp16, the tiles the
// library runs there (64 x 128, warpgroup products). Standalone: no MLX;
// the classes are built here on the host as op/mask_block_lists.cpp builds them.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. \
//     benchmarks/cuda_mask_sweep.cu -o mask_sweep
//   ./mask_sweep        # case, us, x unmasked, output checksum
//
// Cases: every block shown (the visit list alone), every block two-valued
// (a random bool mask, read as bits), every block of values (a random fp16
// additive mask, [1, 1, L, L], which L2 holds: a pair of columns a load,
// and one a load as where mask_pairs is 0; and [1, H, L, L], ALiBi's shape,
// which streams from memory), and mlx-lm's causal mask as a bool array
// (blocks above the diagonal skipped, below shown, on it two-valued).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "benchmarks/cuda_sweep_util.cuh"
#include "mlx_fused_attn/families/attention/attention_kernel.cuh"
#include "mlx_fused_attn/kernels/mask_visits.h"

namespace {

constexpr int B = 1, H = 32, L = 2048, D = 64;
typedef fa::AttnTilesOf<64, 128, 4, 2, 3, true, false> Tiles;
constexpr fa::AttnTiles kT = Tiles::value;
constexpr int kQB = L / kT.bq, kKB = L / kT.bk;
constexpr int kRowWords = kKB + 3;  // count, off_row, off_col, entries
constexpr int kBitWords = L / fa::kMaskWordBits;

enum class Kind { None, Shown, TwoValued, Values, ValuesOneByOne, HeadValues, CausalArray };

/// The classes of one [L, L] mask slice; `shown(r, c)` gives each score's
/// bit, `kind(qb, kb)` each block's class (-1: skipped).
template <typename Shown, typename KindOf>
std::vector<unsigned> classes(Shown shown, KindOf kind) {
  std::vector<unsigned> v(size_t(kQB) * kRowWords + size_t(L) * kBitWords, 0);
  for (int qb = 0; qb < kQB; ++qb) {
    unsigned* row = &v[size_t(qb) * kRowWords];
    int n = 0;
    for (int kb = 0; kb < kKB; ++kb) {
      const int c = kind(qb, kb);
      if (c >= 0) row[3 + n++] = unsigned(kb * 4 + c);
    }
    row[0] = unsigned(n);
  }
  unsigned* bits = &v[size_t(kQB) * kRowWords];
  for (int r = 0; r < L; ++r)
    for (int c = 0; c < L; ++c)
      if (shown(r, c)) bits[size_t(r) * kBitWords + c / 32] |= 1u << (c % 32);
  return v;
}

unsigned hash(unsigned i) {
  i = i * 2654435761u;
  i ^= i >> 16;
  return i * 0x85ebca6bu;
}

template <bool kHasMask>
float run(const fa::half_t* q, const fa::half_t* k, const fa::half_t* v,
          fa::half_t* o, const unsigned char* mask, const unsigned* blocks,
          bool bool_mask, int reps, bool per_head = false, bool pairs = true) {
  fa::AttnParams p{};
  p.B = B; p.H_q = H; p.H_kv = H; p.gqa_factor = 1;
  p.L_q = L; p.L_k = L; p.D = D; p.D_v = D;
  p.scale_log2 = (1.0f / std::sqrt(float(D))) * 1.4426950408889634f;
  for (auto* s : {p.q_strides, p.k_strides, p.v_strides, p.o_strides}) {
    s[0] = (long long)H * L * D; s[1] = (long long)L * D; s[2] = D;
  }
  p.mask_strides[1] = per_head ? (long long)L * L : 0;  // [1, H or 1, L, L]
  p.mask_strides[2] = L; p.mask_strides[3] = 1;
  p.mask_block_strides[2] = kRowWords; p.mask_block_strides[3] = kBitWords;
  p.mask_pairs = !bool_mask && pairs;  // as launch_params: aligned, even L
  fa::AttnFeatures f{};
  f.align_q = f.align_k = true;
  f.bool_mask = bool_mask;
  f.mask_blocks = blocks != nullptr;
  const int smem = fa::attention_smem_bytes(kT, D, D, fa::DType::Float16, fa::Backend::Cuda);
  auto kernel = fa::attention_kernel<fa::half_t, D, D, Tiles, false, kHasMask>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared));
  const dim3 grid(kQB, H, B);
  return 1e3f * launch_ms([&] {
    kernel<<<grid, kT.warps * 32, smem>>>(q, k, v, o, p, mask, nullptr, f, nullptr, nullptr, nullptr, 1,
                                          nullptr, blocks);
  }, reps);
}

}  // namespace

int main() {
  const size_t n = size_t(B) * H * L * D;
  fa::half_t *q, *k, *v, *o;
  CHECK(cudaMalloc(&q, n * 2));
  CHECK(cudaMalloc(&k, n * 2));
  CHECK(cudaMalloc(&v, n * 2));
  CHECK(cudaMalloc(&o, n * 2));
  fill_random<<<1024, 256>>>(q, n, 1);
  fill_random<<<1024, 256>>>(k, n, 2);
  fill_random<<<1024, 256>>>(v, n, 3);

  // A random bool mask (about 3 in 4 shown) and a random fp16 additive one.
  std::vector<unsigned char> bools(size_t(L) * L);
  std::vector<fa::half_t> adds(size_t(L) * L);
  for (size_t i = 0; i < bools.size(); ++i) {
    bools[i] = (hash(unsigned(i)) >> 28) >= 4;
    adds[i] = fa::half_t(float(hash(unsigned(i) + 7u) >> 16) / 65536.0f * -4.0f);
  }
  unsigned char *bool_mask, *add_mask, *head_mask;
  CHECK(cudaMalloc(&bool_mask, bools.size()));
  CHECK(cudaMalloc(&add_mask, adds.size() * 2));
  CHECK(cudaMalloc(&head_mask, adds.size() * 2 * H));
  CHECK(cudaMemcpy(bool_mask, bools.data(), bools.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(add_mask, adds.data(), adds.size() * 2, cudaMemcpyHostToDevice));
  for (int h = 0; h < H; ++h) {  // every head the same values: the checksum matches [1, 1]
    CHECK(cudaMemcpy(head_mask + adds.size() * 2 * h, adds.data(), adds.size() * 2,
                     cudaMemcpyHostToDevice));
  }

  auto every = [](int c) { return [c](int, int) { return c; }; };
  auto random_bit = [&](int r, int c) { return bools[size_t(r) * L + c] != 0; };
  auto causal_bit = [](int r, int c) { return c <= r; };
  auto causal_kind = [](int qb, int kb) {
    const int first = qb * kT.bq, last = first + kT.bq - 1;
    if (kb * kT.bk > last) return -1;
    return kb * kT.bk + kT.bk - 1 <= first ? fa::kMaskShown : fa::kMaskTwoValued;
  };
  struct Case {
    const char* name;
    Kind kind;
    std::vector<unsigned> blocks;
  } cases[] = {
      {"no mask", Kind::None, {}},
      {"every block shown", Kind::Shown, classes(random_bit, every(fa::kMaskShown))},
      {"every block two-valued (bool)", Kind::TwoValued,
       classes(random_bit, every(fa::kMaskTwoValued))},
      {"every block values (fp16 add)", Kind::Values,
       classes(random_bit, every(fa::kMaskValues))},
      {"same, read one value a load", Kind::ValuesOneByOne,
       classes(random_bit, every(fa::kMaskValues))},
      {"same, a mask per head", Kind::HeadValues,
       classes(random_bit, every(fa::kMaskValues))},
      {"causal as a bool array", Kind::CausalArray, classes(causal_bit, causal_kind)},
  };
  // The causal array's bool mask: shown on and below the diagonal.
  std::vector<unsigned char> causal(size_t(L) * L);
  for (int r = 0; r < L; ++r)
    for (int c = 0; c < L; ++c) causal[size_t(r) * L + c] = c <= r;
  unsigned char* causal_mask;
  CHECK(cudaMalloc(&causal_mask, causal.size()));
  CHECK(cudaMemcpy(causal_mask, causal.data(), causal.size(), cudaMemcpyHostToDevice));

  std::vector<fa::half_t> out(n);
  float base = 0;
  for (const Case& c : cases) {
    unsigned* blocks = nullptr;
    if (!c.blocks.empty()) {
      CHECK(cudaMalloc(&blocks, c.blocks.size() * 4));
      CHECK(cudaMemcpy(blocks, c.blocks.data(), c.blocks.size() * 4, cudaMemcpyHostToDevice));
    }
    const int reps = 50;
    float us;
    switch (c.kind) {
      case Kind::None: us = run<false>(q, k, v, o, nullptr, nullptr, false, reps); break;
      case Kind::Shown:
      case Kind::TwoValued: us = run<true>(q, k, v, o, bool_mask, blocks, true, reps); break;
      case Kind::Values: us = run<true>(q, k, v, o, add_mask, blocks, false, reps); break;
      case Kind::ValuesOneByOne: us = run<true>(q, k, v, o, add_mask, blocks, false, reps, false, false); break;
      case Kind::HeadValues: us = run<true>(q, k, v, o, head_mask, blocks, false, reps, true); break;
      case Kind::CausalArray: us = run<true>(q, k, v, o, causal_mask, blocks, true, reps); break;
    }
    if (c.kind == Kind::None) base = us;
    CHECK(cudaMemcpy(out.data(), o, n * 2, cudaMemcpyDeviceToHost));
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += std::fabs(float(out[i]));
    std::printf("%-32s %8.1f us  %5.2fx  checksum %.6e\n", c.name, us, us / base, sum);
    if (blocks) CHECK(cudaFree(blocks));
  }
  return 0;
}
