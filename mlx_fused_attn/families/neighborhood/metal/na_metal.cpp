// The neighborhood half of the GPU interface (backend/gpu_na.h) on Metal:
// the kernel of mlx_fused_attn/families/neighborhood/neighborhood.metal, dispatched through MLX's Metal
// device and command encoder, from its family's library (kernel_library.h).
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/gpu_na.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/families/strided_copy/metal/strided_copy_metal.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/families/neighborhood/na_kernel_name.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

constexpr const char* kOp = "[neighborhood_attention] Metal: ";

MetalPipeline na_pipeline(const NaPlan& plan) {
  MetalPipeline p;
  p.family = KernelFamily::Neighborhood;
  p.kernel_name = fa::na_kernel_name(
      plan.spec.n_axes, plan.dtype, plan.params.D, plan.tiles);
  p.hash_name = p.kernel_name;
  p.threads = size_t(fa::kSimdWidth) * plan.tiles.warps;
  return p;
}

} // namespace

Support na_prepare(const NaPlan& plan, mx::Stream s) {
  auto& d = mx::metal::device(s.device);
  if (Support ready = pipeline_ready(d, strided_copy_pipeline(plan.dtype));
      !ready.ok) {
    return named(kOp, ready);
  }
  return named(kOp, pipeline_ready(d, na_pipeline(plan)));
}

void na_run(
    const NaPlan& plan,
    const std::vector<mx::array>& inputs,
    mx::array& out,
    mx::Stream s) {
  auto& d = mx::metal::device(s.device);
  auto& enc = mx::metal::get_command_encoder(s);
  const mx::array q = with_contiguous_rows(inputs[0], plan.dtype, d, enc);
  const mx::array k = with_contiguous_rows(inputs[1], plan.dtype, d, enc);
  const mx::array v = with_contiguous_rows(inputs[2], plan.dtype, d, enc);
  out.set_data(mx::allocator::malloc(out.nbytes()));
  const fa::NaParams params = na_launch_params(plan, q, k, v, out);

  enc.set_compute_pipeline_state(get_pipeline(d, na_pipeline(plan)));
  enc.set_input_array(q, 0);
  enc.set_input_array(k, 1);
  enc.set_input_array(v, 2);
  enc.set_output_array(out, 3);
  enc.set_bytes(params, 4);
  enc.set_bytes(plan.na_grid, 5);
  const MTL::Size grid(plan.grid.x, plan.grid.y, plan.grid.z);
  const MTL::Size group(fa::kSimdWidth, plan.grid.warps, 1);
  enc.dispatch_threadgroups(grid, group);
}

} // namespace mlx_fused_attn::gpu
