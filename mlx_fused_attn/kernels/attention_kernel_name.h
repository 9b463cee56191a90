// Host-side names of the attention kernels: the one place they are built.
// The Metal instantiation list (mlx_fused_attn/families/attention/attention.metal, written by
// tools/gen_instances.py) spells the same names from the same tiles, and
// tests/metal_emu checks that they agree.
#pragma once

#include <string>

#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"

namespace fa {

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float32:
      return "float32";
  }
  return "";
}

/// The kernel for (dtype, head dim of q and k, head dim of v) with the
/// tiles choose_attention_tiles gave for it; "_qs" ends the name of a
/// kernel that keeps Q in threadgroup memory (a Metal variant).
inline std::string attention_kernel_name(
    DType dtype,
    int head_dim,
    int head_dim_v,
    AttnTiles tiles) {
  return std::string("fa_attention_") + dtype_name(dtype) + "_d" +
      std::to_string(head_dim) + "_dv" + std::to_string(head_dim_v) + "_bq" +
      std::to_string(tiles.bq) + "_bk" + std::to_string(tiles.bk) + "_wm" +
      std::to_string(tiles.warps) + (tiles.q_shared ? "_qs" : "");
}

/// The combine of split keys (split_keys.h) writing `dtype`.
inline std::string split_combine_kernel_name(DType dtype) {
  return std::string("fa_split_combine_") + dtype_name(dtype);
}

/// The kernel specialised for one set of features (its pipeline cache key).
inline std::string attention_pipeline_name(
    const std::string& kernel_name,
    const AttnFeatures& features) {
  std::string name = kernel_name;
#define FA_APPEND_FEATURE(feature, index) \
  name += features.feature ? "_" #feature "_t" : "_" #feature "_n";
  FA_ATTENTION_FEATURES(FA_APPEND_FEATURE)
#undef FA_APPEND_FEATURE
  return name;
}

} // namespace fa
