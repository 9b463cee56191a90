// What a family's instance list (families/<folder>/<folder>_instances.h)
// writes through: tools/gen_instances.py compiles every family's list into
// one small program with these helpers, which prints each CUDA instance's
// NVRTC expression (the AOT table's lookup key) and each Metal instance
// line. Host-only: the generator's, never the library's.
#pragma once

#include <cstdio>
#include <initializer_list>
#include <string>

#include "mlx_fused_attn/kernels/attention_kernel_name.h"

namespace mlx_fused_attn::instances {

/// The element types every family instantiates.
inline constexpr fa::DType kDTypes[] = {
    fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};

/// The folder of the family whose list runs (set by the generator).
inline const char* current_folder = "";

inline const char* metal_type(fa::DType t) {
  return t == fa::DType::Float16 ? "half"
      : t == fa::DType::BFloat16 ? "bfloat"
                                 : "float";
}

/// One CUDA kernel of AOT table `group` (one object a group, so that they
/// build in parallel): families/<folder>/aot/<group>.cu.
inline void cuda(const std::string& group, const std::string& expression) {
  std::printf(
      "cuda %s %s %s\n", current_folder, group.c_str(), expression.c_str());
}

/// One instance line `macro(dtype name, metal type, args...)` of the
/// family's .metal file `family`.
inline void metal(
    const char* family,
    const char* macro,
    fa::DType t,
    std::initializer_list<int> args) {
  std::printf(
      "metal %s %s %s(%s, %s",
      current_folder,
      family,
      macro,
      fa::dtype_name(t),
      metal_type(t));
  for (int a : args) {
    std::printf(", %d", a);
  }
  std::printf(")\n");
}

} // namespace mlx_fused_attn::instances
