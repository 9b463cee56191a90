// The Metal libraries of the kernel families, and the checks that decide,
// before a graph is built, whether a family's kernel can run: its library
// builds or loads, and the specialised pipeline fits the dispatch.
//
// A kernel's library is its family's metallib installed beside this library
// (AOT, mlx_fused_attn_<family>.metallib), or, when MLX_FUSED_ATTN_JIT=1 or
// the build has no metallibs, the JIT library of the one instantiation that
// defines it: the family's embedded text without its instantiation list
// plus that line (jit_source.h), so a call compiles the kernel it runs and
// not the family's 30. One library a family or an instantiation: one
// family's compile error leaves the others running.
#pragma once

#include <string>
#include <vector>

#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/kernel_availability.h"

namespace mlx_fused_attn::gpu {

/// A boolean [[function_constant(index)]] value.
struct BoolConstant {
  int index;
  bool value;
};

/// One specialised pipeline of a family, as eval will ask MLX for it.
struct MetalPipeline {
  KernelFamily family;
  std::string kernel_name; ///< [[host_name]] in the family's library
  std::string hash_name; ///< MLX's cache key: the name and the constants
  std::vector<BoolConstant> constants;
  size_t threads; ///< threads per threadgroup of the dispatch
};

/// Whether the pipeline's library builds or loads (decided once a library),
/// and the pipeline builds and takes the dispatch: at least `threads`
/// threads a threadgroup, and static threadgroup memory within the device's
/// limit (decided once per pipeline).
Support pipeline_ready(mlx::core::metal::Device& d, const MetalPipeline& p);

/// The pipeline, built (or found in MLX's cache) for eval.
MTL::ComputePipelineState* get_pipeline(
    mlx::core::metal::Device& d,
    const MetalPipeline& p);

} // namespace mlx_fused_attn::gpu
