#include "mlx_fused_attn/backend/attention_covers.h"

#include <sstream>
#include <string>

#include "mlx/utils.h"
#include "mlx_fused_attn/kernels/attention_config.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

bool kernel_dtype(mx::Dtype dtype, fa::DType* out) {
  if (dtype == mx::float16) {
    *out = fa::DType::Float16;
  } else if (dtype == mx::bfloat16) {
    *out = fa::DType::BFloat16;
  } else if (dtype == mx::float32) {
    *out = fa::DType::Float32;
  } else {
    return false;
  }
  return true;
}

Support attention_kernel_covers(
    const char* op,
    const std::vector<mx::array>& inputs,
    fa::DType* dtype) {
  const mx::array& q = inputs[0];
  const mx::array& k = inputs[1];
  const mx::array& v = inputs[2];
  if (!kernel_dtype(q.dtype(), dtype)) {
    std::ostringstream msg;
    msg << op << "no kernel for dtype " << q.dtype()
        << " (float16, bfloat16 and float32 have one)";
    return Support::no(msg.str());
  }
  const int D = q.shape(3);
  if (D != v.shape(3)) {
    std::ostringstream msg;
    msg << op << "the kernel needs one head dim for q, k and v; got " << D
        << " for q and k and " << v.shape(3) << " for v";
    return Support::no(msg.str());
  }
  if (!fa::attention_head_dim_supported(D)) {
    std::ostringstream msg;
    msg << op << "no kernel for head dim " << D
        << " (32, 64, 80, 96 and 128 have one)";
    return Support::no(msg.str());
  }
  if (q.size() == 0 || k.size() == 0) {
    return Support::no(std::string(op) + "empty q or k (nothing to launch)");
  }
  return Support::yes();
}

} // namespace mlx_fused_attn::gpu
