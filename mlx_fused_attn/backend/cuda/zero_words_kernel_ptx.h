// A kernel that zeroes one 32-bit word a thread of its first output, as
// PTX. Launched through MLX's CustomKernel primitive in place of the no-op
// kernel (no_op_kernel_ptx.h) where the memory made must start at zero:
// the counters by which the last split of each query block merges
// (kernels/cuda/split_merge.cuh). PTX 7.0 for sm_80, as the no-op kernel.
#pragma once

#include <cstdint>

namespace mlx_fused_attn::cuda {

/// The entry's name in kZeroWordsKernelPtx.
inline constexpr const char* kZeroWordsKernelName = "mlx_fused_attn_zero_words";

/// The threads of a block of the launch: the zeroed array holds a multiple
/// of this many words, one a thread, so that no thread writes past it.
inline constexpr int kZeroWordsThreads = 128;

/// The words of an array that holds `n` counters and can be zeroed whole.
inline int64_t zeroed_words(int64_t n) {
  return (n + kZeroWordsThreads - 1) / kZeroWordsThreads * kZeroWordsThreads;
}

/// One pointer parameter: CustomKernel passes the outputs' addresses, of
/// which the launch reads only the first; thread i of the grid zeroes its
/// word i.
inline constexpr const char* kZeroWordsKernelPtx = R"PTX(
.version 7.0
.target sm_80
.address_size 64

.visible .entry mlx_fused_attn_zero_words(.param .u64 out)
{
  .reg .b32 %r<5>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.u32 [%rd4], 0;
  ret;
}
)PTX";

} // namespace mlx_fused_attn::cuda
