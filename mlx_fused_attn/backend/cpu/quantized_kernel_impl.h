// The fused CPU attention over a quantized K/V cache: the float kernel's
// blocked online softmax (attention_kernel_impl.h) with a K/V loader that
// dequantizes each block of keys and values to fp32 as it is loaded, so the
// cache is read once, at its packed size, and never dequantized whole.
// Included once per instruction set, as attention_kernel_impl.h.
//
// Decode (few query blocks) splits the keys across the threads: each split
// keeps its rows' running max, sum and unnormalised output, and a last pass
// merges them by their log-sum-exp.
#pragma once
#ifndef FA_CPU_ISA
#error "define FA_CPU_ISA before including quantized_kernel_impl.h"
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mlx_fused_attn/backend/cpu/attention_kernel_impl.h"
#include "mlx_fused_attn/backend/cpu/quantized_problem.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace mlx_fused_attn::cpu::FA_CPU_ISA {

static_assert(
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
    "mx.quantize's bit stream is read as little-endian words");

// out[i] = scale * code_i + bias for the 8 codes that start at `codes`: 8
// codes of BITS bits fill exactly BITS bytes of the row's bit stream, code i
// at bit BITS * i.
template <int BITS>
inline void dequantize8(const uint8_t* codes, float scale, float bias, float* out) {
  uint64_t word = 0;
  std::memcpy(&word, codes, BITS);
#if defined(__AVX2__)
  // Codes 0-3 and 4-7 each fit 32 bits (4 * BITS <= 32): one variable shift
  // a lane extracts all eight.
  const __m256i halves = _mm256_set_m128i(
      _mm_set1_epi32(static_cast<int>(word >> (4 * BITS))),
      _mm_set1_epi32(static_cast<int>(word)));
  const __m256i shifts = _mm256_setr_epi32(
      0, BITS, 2 * BITS, 3 * BITS, 0, BITS, 2 * BITS, 3 * BITS);
  const __m256i code = _mm256_and_si256(
      _mm256_srlv_epi32(halves, shifts), _mm256_set1_epi32((1 << BITS) - 1));
  _mm256_storeu_ps(
      out,
      _mm256_fmadd_ps(
          _mm256_cvtepi32_ps(code), _mm256_set1_ps(scale),
          _mm256_set1_ps(bias)));
#else
  for (int i = 0; i < 8; ++i) {
    const uint32_t code = (word >> (BITS * i)) & ((1u << BITS) - 1);
    out[i] = static_cast<float>(code) * scale + bias;
  }
#endif
}

#if defined(__AVX2__)
// out[i] = scale * code_i + bias for 8 codes widened to 32-bit lanes.
inline void store_dequantized(__m128i codes8, __m256 scale, __m256 bias, float* out) {
  _mm256_storeu_ps(
      out,
      _mm256_fmadd_ps(
          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(codes8)), scale, bias));
}

// The widths mlx-lm's cache uses, a byte-wise unpack instead of
// dequantize8's shifts: 8 bits, 8 codes a load; 4 bits, 32 codes (16 bytes,
// code 2i in byte i's low nibble, 2i + 1 in its high one) a load.
template <int BITS>
inline void dequantize_group_bytes(
    const uint8_t* codes,
    int group,
    float scale,
    float bias,
    float* out) {
  const __m256 s = _mm256_set1_ps(scale), b = _mm256_set1_ps(bias);
  if (BITS == 8) {
    for (int i = 0; i < group; i += 8) {
      store_dequantized(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)), s, b,
          out + i);
    }
    return;
  }
  const __m128i nibble = _mm_set1_epi8(0x0f);
  for (int i = 0; i < group; i += 32) {
    const __m128i x =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i / 2));
    const __m128i lo = _mm_and_si128(x, nibble);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), nibble);
    const __m128i first = _mm_unpacklo_epi8(lo, hi); // codes 0-15
    const __m128i second = _mm_unpackhi_epi8(lo, hi); // codes 16-31
    store_dequantized(first, s, b, out + i);
    store_dequantized(_mm_srli_si128(first, 8), s, b, out + i + 8);
    store_dequantized(second, s, b, out + i + 16);
    store_dequantized(_mm_srli_si128(second, 8), s, b, out + i + 24);
  }
}
#endif

// A row of `n` values from its codes (the row's bit stream), scales and
// biases (one a group of `group` values, `*_step` apart).
template <typename T, int BITS>
void dequantize_row(
    const uint8_t* codes,
    const T* scales,
    fa::stride_t scale_step,
    const T* biases,
    fa::stride_t bias_step,
    int n,
    int group,
    float* out) {
  for (int g = 0; g < n / group; ++g) {
    const float scale = to_float(scales[g * scale_step]);
    const float bias = to_float(biases[g * bias_step]);
    const uint8_t* c = codes + g * group * BITS / 8;
    float* o = out + g * group;
#if defined(__AVX2__)
    if (BITS == 4 || BITS == 8) {
      dequantize_group_bytes<BITS>(c, group, scale, bias, o);
      continue;
    }
#endif
    for (int i = 0; i < group; i += 8) {
      dequantize8<BITS>(c + i * BITS / 8, scale, bias, o + i);
    }
  }
}

template <typename T>
using DequantizeRow = void (*)(
    const uint8_t*,
    const T*,
    fa::stride_t,
    const T*,
    fa::stride_t,
    int,
    int,
    float*);

// The one place that lists the code widths.
template <typename T>
DequantizeRow<T> dequantize_row_for(int bits) {
  switch (bits) {
    case 2:
      return dequantize_row<T, 2>;
    case 3:
      return dequantize_row<T, 3>;
    case 4:
      return dequantize_row<T, 4>;
    case 5:
      return dequantize_row<T, 5>;
    case 6:
      return dequantize_row<T, 6>;
    default:
      return dequantize_row<T, 8>;
  }
}

// Keys dequantized row-major before their transpose into Scratch::kt.
struct DequantizedKeys {
  std::vector<float> rows;
  DequantizedKeys(int D, int) : rows(BLOCK_K * D) {}
};

// The quantized keys and values of every (batch, key/value head): the
// float kernel's FloatKv for mx.quantize's layout.
template <typename T>
struct QuantizedKv {
  const QuantProblem& pr;
  DequantizeRow<T> dequantize;

  // `n` rows of one operand from row `k0` of head h of batch b, row j at
  // out + j * out_row.
  void rows(
      const fa::QuantKvOperand& op,
      const uint32_t* words,
      const void* scales,
      const void* biases,
      int b,
      int h,
      int k0,
      int n,
      int dim,
      float* out,
      int out_row) const {
    const auto at = [&](const fa::stride_t* s, int k) {
      return b * s[0] + h * s[1] + k * s[2];
    };
    for (int j = 0; j < n; ++j) {
      dequantize(
          reinterpret_cast<const uint8_t*>(words + at(op.word_strides, k0 + j)),
          static_cast<const T*>(scales) + at(op.scale_strides, k0 + j),
          op.scale_group_stride,
          static_cast<const T*>(biases) + at(op.bias_strides, k0 + j),
          op.bias_group_stride, dim, pr.kv.group_size, out + j * out_row);
    }
  }

  void load(int b, int h, int k0, int n, Scratch& sc) const {
    const int D = pr.attn.p.D, D_v = pr.attn.p.D_v;
    float* keys = thread_scratch<DequantizedKeys>(D, D_v).rows.data();
    rows(pr.kv.k, pr.k_words, pr.k_scales, pr.k_biases, b, h, k0, n, D, keys, D);
    transpose(keys, n, D, sc.kt.data(), BLOCK_K);
    for (int d = 0; d < D; ++d) {
      std::fill(sc.kt.data() + d * BLOCK_K + n, sc.kt.data() + (d + 1) * BLOCK_K, 0.0f);
    }
    rows(pr.kv.v, pr.v_words, pr.v_scales, pr.v_biases, b, h, k0, n, D_v,
         sc.v.data(), D_v);
  }
};

// How many ways to split the keys: enough work items to keep every thread
// busy (4 a thread balance uneven items), none shorter than 8 key blocks.
inline int key_splits(int64_t groups, int L_k) {
  const int64_t wanted = 4 * int64_t(num_threads());
  if (groups >= wanted) {
    return 1;
  }
  const int64_t most = std::max(1, L_k / (8 * BLOCK_K));
  return static_cast<int>(std::min((wanted + groups - 1) / groups, most));
}

// Row r of the output: the splits' partial rows merged by their
// log-sum-exp (exp2 domain), normalised and stored.
template <typename T>
void merge_partials(
    const fa::AttnParams& p,
    const Partials& part,
    int splits,
    T* out) {
  const int64_t rows = part.rows;
  parallel_for(static_cast<int>((rows + BLOCK_Q - 1) / BLOCK_Q), [&](int blk) {
    std::vector<float> acc(p.D_v);
    const int64_t end = std::min(rows, int64_t(blk + 1) * BLOCK_Q);
    for (int64_t r = int64_t(blk) * BLOCK_Q; r < end; ++r) {
      float m = -INFINITY;
      for (int s = 0; s < splits; ++s) {
        m = std::max(m, part.m[s * rows + r]);
      }
      // Rows that saw only -inf (additive masks) keep l = 0: NaN below, as
      // the unsplit kernel gives.
      const float shift = m == -INFINITY ? 0.0f : m;
      float l = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int s = 0; s < splits; ++s) {
        const float w = exp2_fast(part.m[s * rows + r] - shift);
        l += w * part.l[s * rows + r];
        const float* os = part.o + (s * rows + r) * p.D_v;
        for (int c = 0; c < p.D_v; ++c) {
          acc[c] += w * os[c];
        }
      }
      const int i = static_cast<int>(r % p.L_q);
      const int64_t bh = r / p.L_q;
      T* dst = out + (bh / p.H_q) * p.o_strides[0] +
          (bh % p.H_q) * p.o_strides[1] + i * p.o_strides[2];
      const float inv = 1.0f / l;
      for (int c = 0; c < p.D_v; ++c) {
        dst[c] = from_float<T>(acc[c] * inv);
      }
    }
  });
}

template <typename T, MaskKind MASK>
void run_quantized(const QuantProblem& qp) {
  const Problem& pr = qp.attn;
  const fa::AttnParams& p = pr.p;
  const Inputs<T> in{
      static_cast<const T*>(pr.q),
      static_cast<const T*>(pr.sinks),
      static_cast<T*>(pr.out),
      qp.packed_gqa};
  const QuantizedKv<T> kv{qp, dequantize_row_for<T>(qp.kv.bits)};
  const int q_blocks = (p.L_q + BLOCK_Q - 1) / BLOCK_Q;
  const int groups = p.B * p.H_q * q_blocks;
  const int splits = key_splits(groups, p.L_k);
  const auto item_of = [&](int group, const KeySpan& keys) {
    const int qb = group % q_blocks;
    const int bh = group / q_blocks;
    attend<T, MASK>(
        pr, in, kv, bh / p.H_q, bh % p.H_q, qb * BLOCK_Q, keys,
        thread_scratch<Scratch>(p.D, p.D_v));
  };
  if (splits == 1) {
    parallel_for(groups, [&](int g) { item_of(g, {0, p.L_k, 0, nullptr}); });
    return;
  }
  const int64_t rows = int64_t(p.B) * p.H_q * p.L_q;
  std::vector<float> o(splits * rows * p.D_v), m(splits * rows),
      l(splits * rows);
  const Partials part{o.data(), m.data(), l.data(), rows};
  // Whole key blocks a split, so that the blocks match the unsplit kernel's.
  const int blocks = (p.L_k + BLOCK_K - 1) / BLOCK_K;
  const int per_split = (blocks + splits - 1) / splits * BLOCK_K;
  parallel_for(groups * splits, [&](int item) {
    const int split = item % splits;
    const int begin = split * per_split;
    item_of(
        item / splits,
        {begin, std::min(p.L_k, begin + per_split), split, &part});
  });
  merge_partials(p, part, splits, static_cast<T*>(pr.out));
}

void run(const QuantProblem& qp) {
  for_kernel_types(qp.attn.dtype, qp.attn.mask, [&](auto type, auto mask) {
    run_quantized<typename decltype(type)::type, decltype(mask)::value>(qp);
  });
}

} // namespace mlx_fused_attn::cpu::FA_CPU_ISA
