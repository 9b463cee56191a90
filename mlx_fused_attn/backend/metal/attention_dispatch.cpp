#include "mlx_fused_attn/backend/metal/attention_dispatch.h"

#include "mlx/allocator.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/families/strided_copy/metal/strided_copy_metal.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

Support copies_ready(fa::DType dtype, mx::metal::Device& d) {
  return pipeline_ready(d, strided_copy_pipeline(dtype));
}

AttentionBuffers attention_buffers(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    mx::array& out,
    mx::metal::Device& d,
    mx::metal::CommandEncoder& enc) {
  const CallInputs call = call_inputs(plan.spec, inputs, plan.visits_input);
  AttentionBuffers b{
      with_contiguous_rows(call.q, plan.dtype, d, enc),
      with_contiguous_rows(call.k, plan.dtype, d, enc),
      with_contiguous_rows(call.v, plan.dtype, d, enc)};
  if (call.sinks != nullptr) {
    b.sinks = with_contiguous_rows(*call.sinks, plan.dtype, d, enc);
  }
  b.mask = call.mask;
  b.visits = call.visits;
  out.set_data(mx::allocator::malloc(out.nbytes()));
  b.params = launch_params(plan, b.q, b.k, b.v, out, b.mask, b.visits);
  return b;
}

void bind_attention_buffers(
    const AttentionBuffers& b,
    mx::array& out,
    mx::metal::CommandEncoder& enc) {
  enc.set_input_array(b.q, 0);
  enc.set_input_array(b.k, 1);
  enc.set_input_array(b.v, 2);
  enc.set_output_array(out, 3);
  enc.set_bytes(b.params, 4);
  if (b.mask != nullptr) {
    enc.set_input_array(*b.mask, 5);
  }
  if (b.sinks) {
    enc.set_input_array(*b.sinks, 6);
  }
}

void dispatch_grid(const AttentionPlan& plan, mx::metal::CommandEncoder& enc) {
  const MTL::Size grid(plan.grid.x, plan.grid.y, plan.grid.z);
  const MTL::Size group(fa::kSimdWidth, plan.grid.warps, 1);
  enc.dispatch_threadgroups(grid, group);
}

} // namespace mlx_fused_attn::gpu
