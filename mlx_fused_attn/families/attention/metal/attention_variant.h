// Which variant of the Metal attention kernel runs (MetalAttnVariant,
// kernels/attention_config.h): MLX_FUSED_ATTN_METAL_VARIANT, comma-separated
// words, at most one of each pair, unset or empty for the default kernel:
//
//   q_registers | q_threadgroup   where Q is kept (default: registers)
//   bk16 | bk32                   keys per K/V block (default: the chooser's,
//                                 16 at D = 128)
//   stride64 | stride32           K/V row offsets in 64-bit index arithmetic
//                                 (default) or 32 bits with stepped pointers
//
// e.g. MLX_FUSED_ATTN_METAL_VARIANT=q_threadgroup,bk32,stride32. Read when
// each call is planned, as the switches of kernel_switches.h are, so that
// one process can time every variant (benchmarks/sdpa_bench.py
// --metal-variants). The tile words apply where the variant has an instance
// (metal_variant_tiles: D = D_v = 128 in float16 and bfloat16); other calls
// run the default tiles. The pipeline's name says what ran
// (mlx_fused_attn.kernel_outcomes()). Other backends ignore the variable.
//
// Host code only, free of MLX, so that a test compiles it anywhere.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/params.h"

namespace mlx_fused_attn {

constexpr const char* kMetalVariantVariable = "MLX_FUSED_ATTN_METAL_VARIANT";

/// The variant `text` names (the variable's grammar above); throws
/// std::invalid_argument naming the variable, the word and the accepted
/// words.
inline fa::MetalAttnVariant parse_metal_variant(const std::string& text) {
  const std::string accepted =
      "; accepted: comma-separated q_registers or q_threadgroup, bk16 or "
      "bk32, stride64 or stride32 (empty: the default kernel)";
  fa::MetalAttnVariant variant;
  bool q_given = false, bk_given = false, stride_given = false;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    std::string word = text.substr(start, end - start);
    start = end + 1;
    word.erase(0, word.find_first_not_of(" \t"));
    word.erase(word.find_last_not_of(" \t") + 1);
    if (word.empty()) {
      continue;
    }
    bool* given = nullptr;
    if (word == "q_registers" || word == "q_threadgroup") {
      given = &q_given;
      variant.q_threadgroup = word == "q_threadgroup";
    } else if (word == "bk16" || word == "bk32") {
      given = &bk_given;
      variant.bk = word == "bk16" ? 16 : 32;
    } else if (word == "stride64" || word == "stride32") {
      given = &stride_given;
      variant.stride32 = word == "stride32";
    } else {
      throw std::invalid_argument(
          std::string(kMetalVariantVariable) + "=\"" + text +
          "\": unknown word \"" + word + "\"" + accepted);
    }
    if (*given) {
      throw std::invalid_argument(
          std::string(kMetalVariantVariable) + "=\"" + text + "\": \"" + word +
          "\" repeats a choice made before it" + accepted);
    }
    *given = true;
  }
  return variant;
}

/// The variant MLX_FUSED_ATTN_METAL_VARIANT names now.
inline fa::MetalAttnVariant metal_variant_from_env() {
  const char* env = std::getenv(kMetalVariantVariable);
  return env == nullptr ? fa::MetalAttnVariant{} : parse_metal_variant(env);
}

/// Whether the K and V row offsets of `p` fit the feature stride32: every
/// row a key block of `bk` keys addresses (a ragged last block reaches past
/// L_k to a whole block, and a stepped pointer a block further), at the
/// larger row stride, in an int.
inline bool stride32_fits(const fa::AttnParams& p, int bk) {
  const int64_t ld = p.k_strides[2] > p.v_strides[2] ? p.k_strides[2]
                                                     : p.v_strides[2];
  const int64_t rows = int64_t(p.L_k) + 2 * int64_t(bk);
  const int64_t cols = p.D > p.D_v ? p.D : p.D_v;
  return p.k_strides[2] >= 0 && p.v_strides[2] >= 0 &&
      rows * ld + cols <= 2147483647;
}

} // namespace mlx_fused_attn
