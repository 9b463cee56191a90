#include "mlx_fused_attn/backend/cpu/cpu_covers.h"

#include <sstream>

#include "mlx/utils.h"
#include "mlx_fused_attn/launch_plan.h"

namespace mlx_fused_attn::cpu {

Support kernel_covers(KernelFamily family, mlx::core::Dtype dtype) {
  if (!mlx_fused_attn::kernel_dtype(dtype)) {
    std::ostringstream msg;
    msg << "the fused CPU kernel takes float16, bfloat16 or float32, not "
        << dtype << "; this call runs as plain MLX ops";
    return Support::no(msg.str());
  }
  return cpu_kernel_available(family);
}

} // namespace mlx_fused_attn::cpu
