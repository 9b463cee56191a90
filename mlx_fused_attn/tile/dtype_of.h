// Maps the kernel's element type to its DType tag, so kernels can ask the
// tile chooser about their own type.
#pragma once

#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/platform.h"

namespace fa {

template <typename T>
struct DTypeOf;

template <>
struct DTypeOf<half_t> {
  FA_CONST DType value = DType::Float16;
};

template <>
struct DTypeOf<bfloat_t> {
  FA_CONST DType value = DType::BFloat16;
};

template <>
struct DTypeOf<float> {
  FA_CONST DType value = DType::Float32;
};

} // namespace fa
