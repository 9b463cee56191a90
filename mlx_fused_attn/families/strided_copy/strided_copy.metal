// Metal entry point of the strided copy
// (mlx_fused_attn/families/strided_copy/strided_copy.h). Buffers: 0 source, 1 destination, 2
// params. Grid (threads): (shape[2] * shape[3], shape[1], shape[0]).

#include "mlx_fused_attn/families/strided_copy/strided_copy.h"

using namespace metal;

template <typename T>
[[kernel]] void fa_strided_copy(
    const device T* src [[buffer(0)]],
    device T* dst [[buffer(1)]],
    constant fa::StridedCopyParams& params [[buffer(2)]],
    uint3 gid [[thread_position_in_grid]]) {
  fa::strided_copy_element(src, dst, params, gid.x, gid.y, gid.z);
}

// Names must match strided_copy_kernel_name() in
// mlx_fused_attn/backend/metal/attention_metal.cpp.
#define FA_INSTANTIATE_COPY(tname, T)                          \
  template [[host_name("fa_strided_copy_" #tname)]] [[kernel]] \
  decltype(fa_strided_copy<T>) fa_strided_copy<T>;

FA_INSTANTIATE_COPY(float16, half)
FA_INSTANTIATE_COPY(bfloat16, bfloat)
FA_INSTANTIATE_COPY(float32, float)
