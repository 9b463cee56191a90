// An experimental decode kernel for the quantized decode sweep
// (cuda_quant_decode_sweep.cu): plain fp32 arithmetic, no tensor cores,
// laid out for memory-level parallelism rather than for MMA tiles. The
// library's quantized kernels spend 16- or 64-row MMA tiles on a KV head's
// 4 query rows and stage each K/V block through shared memory; this one
// reads each packed word once into registers, dequantizes it once and uses
// it for all 4 query heads of its KV head.
//
// Layout (mx.quantize's affine cache, as the sweep builds it): 4-bit codes,
// groups of 64, D = 128; K and V words [B, H_kv, L_k, 16] uint32 (8 codes a
// word, low bits first), scales and biases [B, H_kv, L_k, 2] bf16; value =
// bf16(scale * code + bias), the dequantized cache's rounding, so that the
// kernel reads the very values of the sweep's bf16 reference.
//
// Grid (splits, H_kv, B); a CTA of kWarps warps takes a contiguous run of
// keys_per_split keys of one KV head and its 4 query heads:
//   K pass: the 8 lanes of an octet share a key, each lane 16 of its 128
//     dims (an 8-byte load: a warp's load is 4 whole keys, 256 contiguous
//     bytes); a lane issues the loads of U keys before any arithmetic, then
//     dots its 16 dims with 4 query heads held in registers; an octet
//     reduce-scatter leaves each lane U/8 keys' 4 scores, stored in shared
//     memory.
//   Softmax: the CTA's max per head, scores turned into probabilities in
//     place, their sums.
//   V pass: the same loads; each lane accumulates its 16 dims of 4 heads
//     over its octet's keys, then the octets and warps are summed.
// It writes normalised fp32 partials with their max and sum, as
// split_keys.h lays them out for query rows (KV head, query head within
// it), and split_combine below merges the splits.
//
// The loads in flight are bound by the registers (3 CTAs an SM, a lane's
// U keys a pass); kPrefetch adds sm_90's bulk L2 prefetch of each split's K
// and V ahead of its passes, so that a warp's loads after its first wait
// on the L2 rather than on DRAM.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

namespace quant_simt {

constexpr int kD = 128;
constexpr int kGroup = 64;
constexpr int kHeads = 4;  // query heads a KV head (GQA 4)
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kLaneDims = kD / 8;   // an octet's 8 lanes cover a key's dims
constexpr int kRowWords = kD / 8;   // 8 4-bit codes a word
constexpr int kRowGroups = kD / kGroup;
/// A CTA's keys at most: its scores' shared memory (16 bytes a key).
constexpr int kMaxKeys = 1024;

struct DecodeArgs {
  const __nv_bfloat16* q;  // [B, H_kv * 4, D]
  const unsigned *k_words, *v_words;
  const __nv_bfloat16 *k_scales, *k_biases, *v_scales, *v_biases;
  float* o_part;  // [splits, B * H_kv * 4, D]
  float* stats;   // [splits, B * H_kv * 4] maxima, then as many sums
  int L_k;
  int keys_per_split;  // at most kMaxKeys
  float scale_log2;  // the softmax scale times log2(e): scores in exp2's domain
};

/// Keys a split for `groups` (batch, KV head) pairs of L_k keys, so that
/// about `ctas` CTAs run (a multiple of the resident ones: the waves), in
/// whole passes of `pass` keys (a warp's loads), at most kMaxKeys. A warp,
/// not the CTA: an SM's work is its CTAs' keys, while a warp left without
/// a pass only gives its issue slots to the others.
inline int keys_per_split(int groups, int L_k, int ctas, int pass) {
  const int splits = std::max(1, ctas / groups);
  const int keys = ((L_k + splits - 1) / splits + pass - 1) / pass * pass;
  return std::min(keys, kMaxKeys);
}

/// A bf16's value.
__device__ __forceinline__ float bf16_bits(unsigned bits) {
  return __uint_as_float(bits << 16);
}

/// The bf16 pair of a word's bits, and back: a pair (0, x) is x's fp32.
__device__ __forceinline__ __nv_bfloat162 bf16_pair(unsigned bits) {
  __nv_bfloat162 x;
  memcpy(&x, &bits, sizeof(x));
  return x;
}
__device__ __forceinline__ float pair_bits_as_float(__nv_bfloat162 x) {
  float f;
  memcpy(&f, &x, sizeof(f));
  return f;
}

/// (x & 0x000F000F) | base in one LOP3 (written in C, its two constants
/// would take two instructions).
__device__ __forceinline__ unsigned mask_or(unsigned x, unsigned base) {
  unsigned y;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(y) : "r"(x), "r"(0x000F000Fu), "r"(base));
  return y;
}

/// One operand (K or V) of a KV head, at a lane's slice of key 0: its
/// words (16 dims, two words) and its group's scale and bias.
struct LaneOperand {
  const uint2* words;
  const unsigned short *scales, *biases;  // bf16 bits
};

__device__ __forceinline__ LaneOperand lane_operand(const unsigned* words,
                                                    const __nv_bfloat16* scales,
                                                    const __nv_bfloat16* biases, size_t head_key0,
                                                    int lane8) {
  const size_t group = head_key0 * kRowGroups + lane8 / 4;
  return {reinterpret_cast<const uint2*>(words) + head_key0 * (kRowWords / 2) + lane8,
          reinterpret_cast<const unsigned short*>(scales) + group,
          reinterpret_cast<const unsigned short*>(biases) + group};
}

/// A lane's slice of U keys of one operand: two words a key and the
/// group's scale and bias, each the high half of a bf16 pair whose low
/// half is 0.
template <int U>
struct Slices {
  uint2 words[U];
  unsigned scale_hi[U], bias_hi[U];
};

/// Loads the slices of keys `key` + 4u (u < U), all the loads issued
/// before any is used. A key at or past `end` reads nothing and gets zeros
/// (no weight from the caller): a predicate, not a clamped key, so that
/// each load is the first's address plus a constant.
template <int U>
__device__ __forceinline__ Slices<U> load_slices(const LaneOperand& x, int key, int end) {
  const uint2* words = x.words + key * (kRowWords / 2);
  const unsigned short* scales = x.scales + key * kRowGroups;
  const unsigned short* biases = x.biases + key * kRowGroups;
  Slices<U> s;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const bool in = key + 4 * u < end;
    s.words[u] = in ? __ldg(words + 4 * u * (kRowWords / 2)) : make_uint2(0, 0);
    s.scale_hi[u] = in ? unsigned(__ldg(scales + 4 * u * kRowGroups)) << 16 : 0u;
    s.bias_hi[u] = in ? unsigned(__ldg(biases + 4 * u * kRowGroups)) << 16 : 0u;
  }
  return s;
}

/// The 16 values of a lane's slice of one key, dims in the lane's order,
/// each a bf16 as an fp32. Shifting a word by 4n puts codes n and n + 4
/// at bits 0..3 and 16..19; or-ing in the bits of 128 makes the bf16 pair
/// 128 + code exactly (its ulp is 1), and subtracting 128 leaves the
/// codes. Each code's fma with (0, scale) and (0, bias) then rounds as the
/// dequantized cache does and leaves (0, value): the fp32 of the value, no
/// unpacking; code n reaches the high half by the pair's low-half
/// broadcast, an operand swizzle of the fma.
__device__ __forceinline__ void dequantize(uint2 w, unsigned scale_hi, unsigned bias_hi,
                                           float (&x)[kLaneDims]) {
  constexpr unsigned k128 = 0x43004300u, kOne = 0x3F803F80u, kMinus128 = 0xC300C300u;
  const __nv_bfloat162 scale = bf16_pair(scale_hi), bias = bf16_pair(bias_hi);
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const unsigned word = e == 0 ? w.x : w.y;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const __nv_bfloat162 codes = __hfma2(bf16_pair(mask_or(word >> (4 * n), k128)),
                                           bf16_pair(kOne), bf16_pair(kMinus128));
      x[8 * e + n] = pair_bits_as_float(__hfma2(__low2bfloat162(codes), scale, bias));
      x[8 * e + n + 4] = pair_bits_as_float(__hfma2(codes, scale, bias));
    }
  }
}

/// Asks the L2 for bytes [p, p + bytes), rounded inward to 16 bytes
/// (sm_90's bulk prefetch: one instruction, no registers, no completion to
/// wait for).
__device__ __forceinline__ void prefetch_l2(const void* p, size_t bytes) {
  const size_t a = reinterpret_cast<size_t>(p);
  const size_t first = (a + 15) & ~size_t(15), last = (a + bytes) & ~size_t(15);
  if (last > first) {
    asm volatile(
        "{\n\t.reg .u64 g;\n\tcvta.to.global.u64 g, %0;\n\t"
        "cp.async.bulk.prefetch.L2.global [g], %1;\n\t}" ::"l"(first),
        "r"(unsigned(last - first))
        : "memory");
  }
}

/// Prefetches into the L2 an operand's keys [key0, end) of the KV head
/// whose key 0 is `head_key0`.
__device__ __forceinline__ void prefetch_keys(const unsigned* words, const __nv_bfloat16* scales,
                                              const __nv_bfloat16* biases, size_t head_key0,
                                              int key0, int end) {
  const size_t key = head_key0 + key0, keys = end - key0;
  prefetch_l2(words + key * kRowWords, keys * kRowWords * sizeof(unsigned));
  prefetch_l2(scales + key * kRowGroups, keys * kRowGroups * sizeof(__nv_bfloat16));
  prefetch_l2(biases + key * kRowGroups, keys * kRowGroups * sizeof(__nv_bfloat16));
}

/// One step of a reduce-scatter over the lanes that differ in `mask`: the
/// first N values become N / 2 sums over the lane pair, the lane with the
/// mask bit keeping the upper half, its partner the lower, so each lane
/// sends and adds N / 2 values, not N.
template <int N, int M>
__device__ __forceinline__ void fold_halves(float (&t)[M], int mask) {
  static_assert(N <= M && N % 2 == 0, "folds the first N of M values");
  const bool upper = (threadIdx.x & mask) != 0;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const float send = upper ? t[i] : t[i + N / 2];
    const float keep = upper ? t[i + N / 2] : t[i];
    t[i] = keep + __shfl_xor_sync(0xffffffffu, send, mask);
  }
}

/// The CTA's max (kMax) or sum of each of its threads' 4 values, in every
/// thread. `scratch` is the CTA's [kWarps][4]; a call syncs the CTA twice.
template <bool kMax>
__device__ __forceinline__ void cta_reduce4(float (&v)[kHeads], float (*scratch)[kHeads]) {
  const auto op = [](float a, float b) { return kMax ? fmaxf(a, b) : a + b; };
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
#pragma unroll
    for (int mask = 16; mask > 0; mask /= 2)
      v[h] = op(v[h], __shfl_xor_sync(0xffffffffu, v[h], mask));
  }
  __syncthreads();  // scratch's last readers are done
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int h = 0; h < kHeads; ++h) scratch[threadIdx.x / 32][h] = v[h];
  }
  __syncthreads();
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    v[h] = scratch[0][h];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) v[h] = op(v[h], scratch[w][h]);
  }
}

/// One split of one KV head's keys (header). U: keys an octet loads a
/// pass (a multiple of 8: the reduce-scatter leaves each lane whole keys).
/// kPrefetch: one thread asks the L2 for the split's K at the start and
/// for its V when its K pass ends, so that the warps' loads after their
/// first wait on the L2, not on DRAM, while the registers bound the loads
/// in flight.
template <int U, bool kPrefetch>
__global__ void __launch_bounds__(kThreads, 3) decode_kernel(const DecodeArgs a) {
  static_assert(U % 8 == 0, "each lane ends the K pass holding U / 8 whole keys");
  constexpr int kPass = kWarps * 4 * U;  // keys a CTA's warps load at once
  __shared__ float4 scores[kMaxKeys];  // a key's 4 heads: scores, then probabilities
  __shared__ float partial[kWarps][kHeads][kD];
  __shared__ float scratch[kWarps][kHeads];

  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const size_t bh = size_t(b) * gridDim.y + kvh;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int octet = lane / 8, lane8 = lane % 8;
  const int key0 = split * a.keys_per_split;
  const int end = min(key0 + a.keys_per_split, a.L_k);
  if (kPrefetch && threadIdx.x == 0)
    prefetch_keys(a.k_words, a.k_scales, a.k_biases, bh * a.L_k, key0, end);

  // The lane's 16 dims of the 4 query heads, scaled into exp2's domain.
  float q[kHeads][kLaneDims];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    const uint4* src =
        reinterpret_cast<const uint4*>(a.q + (bh * kHeads + h) * kD + lane8 * kLaneDims);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const uint4 u = __ldg(src + c);
      const unsigned bits[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        q[h][8 * c + 2 * i] = bf16_bits(bits[i] & 0xFFFFu) * a.scale_log2;
        q[h][8 * c + 2 * i + 1] = bf16_bits(bits[i] >> 16) * a.scale_log2;
      }
    }
  }

  const LaneOperand k_lane =
      lane_operand(a.k_words, a.k_scales, a.k_biases, bh * a.L_k, lane8);
  const LaneOperand v_lane =
      lane_operand(a.v_words, a.v_scales, a.v_biases, bh * a.L_k, lane8);

  // K pass. Scores of keys key0 + i at scores[i]; each lane's max per head.
  float m[kHeads] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  for (int first = key0 + warp * 4 * U; first < end; first += kPass) {
    const Slices<U> k = load_slices<U>(k_lane, first + octet, end);
    float t[4 * U];  // key u, head h at 4u + h: the lane's 16 dims' share
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float x[kLaneDims];
      dequantize(k.words[u], k.scale_hi[u], k.bias_hi[u], x);
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kLaneDims; ++i) dot = fmaf(q[h][i], x[i], dot);
        t[4 * u + h] = dot;
      }
    }
    // Lane lane8 of the octet ends with values lane8 * U / 2 .. + U / 2:
    // keys u = lane8 * U / 8 + r, r < U / 8, whole over the octet.
    fold_halves<4 * U>(t, 4);
    fold_halves<2 * U>(t, 2);
    fold_halves<U>(t, 1);
#pragma unroll
    for (int r = 0; r < U / 8; ++r) {
      const int key = first + 4 * (lane8 * U / 8 + r) + octet;
      if (key < end) {
        scores[key - key0] = make_float4(t[4 * r], t[4 * r + 1], t[4 * r + 2], t[4 * r + 3]);
#pragma unroll
        for (int h = 0; h < kHeads; ++h) m[h] = fmaxf(m[h], t[4 * r + h]);
      }
    }
  }

  if (kPrefetch && threadIdx.x == 0)
    prefetch_keys(a.v_words, a.v_scales, a.v_biases, bh * a.L_k, key0, end);

  // Softmax over the split: every split has a key, so the max is finite.
  cta_reduce4<true>(m, scratch);
  float l[kHeads] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = threadIdx.x; i < end - key0; i += kThreads) {
    const float4 s = scores[i];
    const float4 p = make_float4(exp2f(s.x - m[0]), exp2f(s.y - m[1]), exp2f(s.z - m[2]),
                                 exp2f(s.w - m[3]));
    scores[i] = p;
    l[0] += p.x;
    l[1] += p.y;
    l[2] += p.z;
    l[3] += p.w;
  }
  cta_reduce4<false>(l, scratch);  // its syncs also publish the probabilities

  // V pass: o[h][i] of the lane's 16 dims over its octet's keys.
  float o[kHeads * kLaneDims] = {};
  for (int first = key0 + warp * 4 * U; first < end; first += kPass) {
    const Slices<U> v = load_slices<U>(v_lane, first + octet, end);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int key = first + 4 * u + octet;
      const float4 p = key < end ? scores[key - key0] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      const float ph[kHeads] = {p.x, p.y, p.z, p.w};
      float x[kLaneDims];
      dequantize(v.words[u], v.scale_hi[u], v.bias_hi[u], x);
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
#pragma unroll
        for (int i = 0; i < kLaneDims; ++i)
          o[h * kLaneDims + i] = fmaf(ph[h], x[i], o[h * kLaneDims + i]);
      }
    }
  }

  // Sum the 4 octets (each lane then holds head `octet`'s 16 dims), then
  // the warps, and write the normalised partials.
  fold_halves<kHeads * kLaneDims>(o, 16);
  fold_halves<kHeads * kLaneDims / 2>(o, 8);
#pragma unroll
  for (int i = 0; i < kLaneDims; ++i) partial[warp][octet][lane8 * kLaneDims + i] = o[i];
  __syncthreads();
  const size_t rows = size_t(gridDim.z) * gridDim.y * kHeads;
  const size_t row0 = split * rows + bh * kHeads;  // split_keys.h's split_row
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w][h][threadIdx.x];
    a.o_part[(row0 + h) * kD + threadIdx.x] = sum / l[h];
  }
  static_assert(kThreads == kD, "a thread per dim writes the partials");
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    if (threadIdx.x == h) {
      a.stats[row0 + h] = m[h];
      a.stats[gridDim.x * rows + row0 + h] = l[h];
    }
  }
}

constexpr int kCombineWarps = 8;

/// Merges the splits of one query row (blockIdx.x: batch * H_q + head, the
/// output's row) exactly, as split_keys.h states: each warp takes every
/// kCombineWarps-th split, a lane 4 dims, so that a row's splits are read
/// by many loads at once rather than one chain.
__global__ void __launch_bounds__(kCombineWarps * 32)
    split_combine(const float* o_part, const float* stats, __nv_bfloat16* out, int n_splits) {
  const int row = blockIdx.x, rows = gridDim.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __shared__ float4 acc_of[kCombineWarps][kD / 4];
  __shared__ float weight_of[kCombineWarps];
  float max_all = -INFINITY;
  for (int i = lane; i < n_splits; i += 32) max_all = fmaxf(max_all, stats[i * rows + row]);
#pragma unroll
  for (int mask = 16; mask > 0; mask /= 2)
    max_all = fmaxf(max_all, __shfl_xor_sync(0xffffffffu, max_all, mask));
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float weight_sum = 0.0f;
#pragma unroll 4
  for (int i = warp; i < n_splits; i += kCombineWarps) {
    const size_t r = size_t(i) * rows + row;
    const float w = stats[size_t(n_splits) * rows + r] * exp2f(stats[r] - max_all);
    const float4 x = reinterpret_cast<const float4*>(o_part + r * kD)[lane];
    weight_sum += w;
    acc.x = fmaf(w, x.x, acc.x);
    acc.y = fmaf(w, x.y, acc.y);
    acc.z = fmaf(w, x.z, acc.z);
    acc.w = fmaf(w, x.w, acc.w);
  }
  acc_of[warp][lane] = acc;
  if (lane == 0) weight_of[warp] = weight_sum;
  __syncthreads();
  if (threadIdx.x < kD) {
    const int d = threadIdx.x;
    float sum = 0.0f, weights = 0.0f;
#pragma unroll
    for (int w = 0; w < kCombineWarps; ++w) {
      sum += reinterpret_cast<const float*>(&acc_of[w][0])[d];
      weights += weight_of[w];
    }
    out[size_t(row) * kD + d] = __float2bfloat16(sum / weights);
  }
}

}  // namespace quant_simt
