// CpuPrimitive: the base of a primitive that an op builds only for the CPU
// stream (attention_merge's two, merge_primitive.h). It names the
// primitive, and its GPU eval is an internal error: the op takes another
// path on a GPU stream.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "mlx/primitives.h"

namespace mlx_fused_attn {

class CpuPrimitive : public mlx::core::Primitive {
 public:
  /// `name`: a string literal, the primitive's name.
  CpuPrimitive(mlx::core::Stream stream, const char* name)
      : mlx::core::Primitive(stream), name_(name) {}

  void eval_gpu(
      const std::vector<mlx::core::array>&,
      std::vector<mlx::core::array>&) final {
    throw std::logic_error(
        std::string("[") + name_ + "] internal error: built for a GPU stream");
  }
  const char* name() const final {
    return name_;
  }

 private:
  const char* name_;
};

} // namespace mlx_fused_attn
