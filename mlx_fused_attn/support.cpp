#include "mlx_fused_attn/support.h"

#include "mlx_fused_attn/backend/cpu/cpu_covers.h"
#include "mlx_fused_attn/backend/gpu.h"

namespace mlx_fused_attn {

using namespace mlx::core;

Support fused_support(const AttentionCall& call) {
  for (const auto& a : call.inputs) {
    if (a.size() == 0) {
      return Support::no("an input is empty; empty calls run as plain MLX ops");
    }
  }
  if (call.stream.device == Device::cpu) {
    return cpu::kernel_covers(KernelFamily::Attention, call.inputs[0].dtype());
  }
  return gpu::supports(call.spec, call.inputs);
}

} // namespace mlx_fused_attn
