// Host-side names of the short-sequence kernels (the Metal instantiation
// list, mlx_fused_attn/families/short_attention/short_attention.metal, written by tools/gen_instances.py,
// spells the same names from the same tiles; tests/metal_emu checks that
// they agree), and the sentence that
// can_use_fused reports when a call runs on them.
#pragma once

#include <string>

#include "mlx_fused_attn/kernels/attention_kernel_name.h"
#include "mlx_fused_attn/families/short_attention/short_attention_config.h"
#include "mlx_fused_attn/families/short_attention/short_attention_features.h"

namespace fa {

/// The Metal kernel for (dtype, head dim) with the tiles
/// choose_short_attention_tiles gave for it.
inline std::string
short_attention_kernel_name(DType dtype, int head_dim, ShortAttnTiles tiles) {
  return std::string("fa_short_attention_") + dtype_name(dtype) + "_d" +
      std::to_string(head_dim) + "_s" + std::to_string(tiles.seq) + "_wr" +
      std::to_string(tiles.warp_rows) + "_wm" + std::to_string(tiles.warps) +
      "_np" + std::to_string(tiles.problems);
}

/// The kernel specialised for one set of features (its pipeline cache key).
inline std::string short_attention_pipeline_name(
    const std::string& kernel_name,
    const ShortAttnFeatures& features) {
  std::string name = kernel_name;
#define FA_APPEND_SHORT_FEATURE(feature, index) \
  name += features.feature ? "_" #feature "_t" : "_" #feature "_n";
  FA_SHORT_ATTENTION_FEATURES(FA_APPEND_SHORT_FEATURE)
#undef FA_APPEND_SHORT_FEATURE
  return name;
}

/// What can_use_fused says (with ok = true) when the short kernel runs the
/// call, so that the choice is visible: the general kernel says nothing.
inline std::string short_attention_note(ShortAttnTiles tiles) {
  return "short-sequence kernel: L_q and L_k <= " + std::to_string(tiles.seq) +
      ", held whole in on-chip memory, " + std::to_string(tiles.problems) +
      (tiles.problems == 1 ? " sequence" : " sequences") + " per threadgroup";
}

} // namespace fa
