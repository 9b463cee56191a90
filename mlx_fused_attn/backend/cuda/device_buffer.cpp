#include "mlx_fused_attn/backend/cuda/device_buffer.h"

#include <optional>
#include <stdexcept>
#include <vector>

#include "mlx/fast.h"
#include "mlx/primitives.h"
#include "mlx_fused_attn/backend/cuda/no_op_kernel_ptx.h"
#include "mlx_fused_attn/backend/cuda/zero_words_kernel_ptx.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;

void set_device_data(mx::array& a, mx::Stream s) {
  set_device_data(std::vector<mx::array*>{&a}, s);
}

void set_device_data(
    const std::vector<mx::array*>& arrays,
    mx::Stream s,
    bool zero_first) {
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  for (const mx::array* a : arrays) {
    shapes.push_back(a->shape());
    dtypes.push_back(a->dtype());
  }
  // CustomKernel takes its outputs from cu::malloc_async and, without an
  // init value, writes nothing before its kernel: the no-op kernel costs one
  // empty launch, where a fill (mx::zeros) would write every byte. It
  // declares one parameter, so the launch reads only the first output's
  // address of those CustomKernel passes. Zeroing the first array instead
  // is the same one launch, a thread a word (a multiple of the block's).
  const int words = zero_first ? static_cast<int>(arrays[0]->nbytes() / 4) : 1;
  if (zero_first &&
      (arrays[0]->itemsize() != 4 || words % kZeroWordsThreads != 0)) {
    throw std::logic_error(
        "[set_device_data] internal error: the zeroed array must hold 32-bit "
        "words, a multiple of kZeroWordsThreads");
  }
  const int threads = zero_first ? kZeroWordsThreads : 1;
  std::vector<mx::array> made = mx::fast::precompiled_cuda_kernel(
      /* name = */ zero_first ? kZeroWordsKernelName : kNoOpKernelName,
      /* compiled_source = */ zero_first ? kZeroWordsKernelPtx : kNoOpKernelPtx,
      /* inputs = */ {},
      /* output_shapes = */ shapes,
      /* output_dtypes = */ dtypes,
      /* scalars = */ {},
      /* grid = */ {words, 1, 1},
      /* threadgroup = */ {threads, 1, 1},
      /* shared_memory = */ 0,
      /* init_value = */ std::nullopt,
      /* ensure_row_contiguous = */ false,
      /* s = */ s);
  // Evaluated here, inside this eval_gpu: its node precedes the kernel's.
  made[0].primitive().eval_gpu(made[0].inputs(), made);
  for (size_t i = 0; i < arrays.size(); ++i) {
    arrays[i]->copy_shared_buffer(made[i]);
  }
}

} // namespace mlx_fused_attn::cuda
