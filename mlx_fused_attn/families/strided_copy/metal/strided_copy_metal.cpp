#include "mlx_fused_attn/families/strided_copy/metal/strided_copy_metal.h"

#include <algorithm>
#include <string>

#include "mlx/allocator.h"
#include "mlx_fused_attn/backend/strided_copy_parts.h"
#include "mlx_fused_attn/kernels/attention_kernel_name.h"
#include "mlx_fused_attn/plan/launch_plan.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

/// Threads a threadgroup of the strided copy (at most).
constexpr size_t kCopyThreads = 256;

} // namespace

MetalPipeline strided_copy_pipeline(fa::DType dtype) {
  MetalPipeline p;
  p.family = KernelFamily::Copy;
  p.kernel_name = std::string("fa_strided_copy_") + fa::dtype_name(dtype);
  p.hash_name = p.kernel_name;
  p.threads = kCopyThreads;
  return p;
}

mx::array row_contiguous_copy(
    const mx::array& x,
    fa::DType dtype,
    mx::metal::Device& d,
    mx::metal::CommandEncoder& enc) {
  mx::array copy(x.shape(), x.dtype(), nullptr, {});
  copy.set_data(mx::allocator::malloc(copy.nbytes()));
  enc.set_compute_pipeline_state(get_pipeline(d, strided_copy_pipeline(dtype)));
  for (const StridedCopyPart& part : strided_copy_parts(x)) {
    const fa::StridedCopyParams& p = part.params;
    enc.set_input_array(x, 0, part.src_offset * x.itemsize());
    enc.set_output_array(copy, 1, part.dst_offset * x.itemsize());
    enc.set_bytes(p, 2);
    const size_t inner = size_t(p.shape[2]) * p.shape[3];
    MTL::Size grid(inner, p.shape[1], p.shape[0]);
    MTL::Size group(std::min(inner, kCopyThreads), 1, 1);
    enc.dispatch_threads(grid, group);
  }
  enc.add_temporary(copy);
  return copy;
}

mx::array with_contiguous_rows(
    const mx::array& x,
    fa::DType dtype,
    mx::metal::Device& d,
    mx::metal::CommandEncoder& enc) {
  return needs_row_copy(x) ? row_contiguous_copy(x, dtype, d, enc) : x;
}

} // namespace mlx_fused_attn::gpu
