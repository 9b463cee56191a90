#include "mlx_fused_attn/backend/cpu/cpu_covers.h"

#include <sstream>

#include "mlx/utils.h"

namespace mlx_fused_attn::cpu {

using namespace mlx::core;

Support kernel_covers(KernelFamily family, Dtype dtype) {
  if (dtype != float16 && dtype != bfloat16 && dtype != float32) {
    std::ostringstream msg;
    msg << "the fused CPU kernel takes float16, bfloat16 or float32, not "
        << dtype << "; this call runs as plain MLX ops";
    return Support::no(msg.str());
  }
  return cpu_kernel_available(family);
}

} // namespace mlx_fused_attn::cpu
