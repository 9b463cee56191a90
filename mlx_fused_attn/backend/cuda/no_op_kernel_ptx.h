// A kernel that does nothing, as PTX. Launched through MLX's CustomKernel
// primitive, whose only work here is to allocate its output from MLX's
// device allocator (device_buffer.cpp). PTX 7.0 for sm_80: every driver that
// runs the other kernels JIT-compiles it for its own GPU.
#pragma once

namespace mlx_fused_attn::cuda {

/// The entry's name in kNoOpKernelPtx.
inline constexpr const char* kNoOpKernelName = "mlx_fused_attn_no_op";

/// One pointer parameter: CustomKernel passes the outputs' addresses, of
/// which the launch reads only the first.
inline constexpr const char* kNoOpKernelPtx = R"PTX(
.version 7.0
.target sm_80
.address_size 64

.visible .entry mlx_fused_attn_no_op(.param .u64 out)
{
  ret;
}
)PTX";

} // namespace mlx_fused_attn::cuda
