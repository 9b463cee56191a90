#include "mlx_fused_attn/na_support.h"

#include "mlx_fused_attn/backend/cpu/cpu_covers.h"
#include "mlx_fused_attn/backend/gpu_na.h"

namespace mlx_fused_attn {

using namespace mlx::core;

Support neighborhood_support(const NaCall& call) {
  if (call.inputs[0].size() == 0) {
    return Support::no("an input is empty; empty calls run as plain MLX ops");
  }
  if (call.stream.device == Device::cpu) {
    return cpu::kernel_covers(
        KernelFamily::Neighborhood, call.inputs[0].dtype());
  }
  return gpu::na_supports(call.spec, call.inputs);
}

} // namespace mlx_fused_attn
