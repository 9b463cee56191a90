#include "mlx_fused_attn/backend/cuda/device_buffer.h"

#include <optional>
#include <vector>

#include "mlx/fast.h"
#include "mlx/primitives.h"
#include "mlx_fused_attn/backend/cuda/no_op_kernel_ptx.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;

void set_device_data(mx::array& a, mx::Stream s) {
  // CustomKernel takes its outputs from cu::malloc_async and, without an
  // init value, writes nothing before its kernel: the no-op kernel costs one
  // empty launch, where a fill (mx::zeros) would write a.nbytes().
  std::vector<mx::array> made = mx::fast::precompiled_cuda_kernel(
      /* name = */ kNoOpKernelName,
      /* compiled_source = */ kNoOpKernelPtx,
      /* inputs = */ {},
      /* output_shapes = */ {a.shape()},
      /* output_dtypes = */ {a.dtype()},
      /* scalars = */ {},
      /* grid = */ {1, 1, 1},
      /* threadgroup = */ {1, 1, 1},
      /* shared_memory = */ 0,
      /* init_value = */ std::nullopt,
      /* ensure_row_contiguous = */ false,
      /* s = */ s);
  // Evaluated here, inside this eval_gpu: its node precedes the kernel's.
  made[0].primitive().eval_gpu(made[0].inputs(), made);
  a.copy_shared_buffer(made[0]);
}

} // namespace mlx_fused_attn::cuda
