#include "mlx_fused_attn/support.h"

#include <sstream>

#include "mlx/utils.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/kernel_family.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

Support cpu_support(const AttentionCall& call) {
  const Dtype dt = call.inputs[0].dtype();
  if (dt != float16 && dt != bfloat16 && dt != float32) {
    std::ostringstream msg;
    msg << "the fused CPU kernel takes float16, bfloat16 or float32, not "
        << dt << "; this call runs as plain MLX ops";
    return Support::no(msg.str());
  }
  return cpu_kernel_available(KernelFamily::Attention);
}

} // namespace

Support fused_support(const AttentionCall& call) {
  for (const auto& a : call.inputs) {
    if (a.size() == 0) {
      return Support::no("an input is empty; empty calls run as plain MLX ops");
    }
  }
  if (call.stream.device == Device::cpu) {
    return cpu_support(call);
  }
  return gpu::supports(call.spec, call.inputs);
}

} // namespace mlx_fused_attn
