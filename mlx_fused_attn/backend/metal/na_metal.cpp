// The neighborhood half of the GPU interface (backend/gpu_na.h) on Metal:
// the kernel of metal/neighborhood.metal, dispatched through MLX's Metal
// device and command encoder, from its family's library (kernel_library.h).
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/gpu/copy.h"
#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/gpu_na.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/backend/na_launch.h"
#include "mlx_fused_attn/kernels/na_config.h"
#include "mlx_fused_attn/kernels/na_kernel_name.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

constexpr const char* kOp = "[neighborhood_attention] Metal: ";

MetalPipeline na_pipeline(int n_axes, fa::DType dtype, int head_dim) {
  const fa::AttnTiles tiles =
      fa::choose_na_tiles(head_dim, dtype, fa::Backend::Metal, n_axes);
  MetalPipeline p;
  p.family = KernelFamily::Neighborhood;
  p.kernel_name = fa::na_kernel_name(n_axes, dtype, head_dim, tiles);
  p.hash_name = p.kernel_name;
  p.threads = size_t(fa::kSimdWidth) * tiles.warps;
  return p;
}

/// `x` as the kernel reads it, with a unit stride along the head dim (its
/// loads take any other stride): `x` itself, or MLX's row-contiguous copy,
/// kept alive until the command buffer completes. Encodes its own dispatch,
/// so it runs before the kernel's pipeline is set.
mx::array with_unit_head_stride(
    const mx::array& x,
    mx::metal::CommandEncoder& enc,
    mx::Stream s) {
  if (x.strides().back() == 1 || x.shape(-1) == 1) {
    return x;
  }
  mx::array copy = mx::contiguous_copy_gpu(x, s);
  enc.add_temporary(copy);
  return copy;
}

} // namespace

Support na_supports(const NaSpec& spec, const std::vector<mx::array>& inputs) {
  fa::DType dtype;
  if (Support covered = na_kernel_covers(kOp, inputs, &dtype); !covered.ok) {
    return covered;
  }
  auto& d = mx::metal::device(mx::Device::gpu);
  const Support ready = pipeline_ready(
      d, na_pipeline(spec.n_axes, dtype, inputs[0].shape(-1)));
  return ready.ok ? ready : Support::no(kOp + ready.reason);
}

void na_eval(
    const NaSpec& spec,
    const std::vector<mx::array>& inputs,
    mx::array& out,
    mx::Stream s) {
  fa::DType dtype;
  const Support covered = na_kernel_covers(kOp, inputs, &dtype);
  if (!covered.ok) {
    throw std::logic_error(
        std::string(kOp) + "internal error: eval of an uncovered call: " +
        covered.reason);
  }
  auto& d = mx::metal::device(s.device);
  auto& enc = mx::metal::get_command_encoder(s);
  const mx::array q = with_unit_head_stride(inputs[0], enc, s);
  const mx::array k = with_unit_head_stride(inputs[1], enc, s);
  const mx::array v = with_unit_head_stride(inputs[2], enc, s);
  out.set_data(mx::allocator::malloc(out.nbytes()));
  const NaLaunch l = na_launch(spec, fa::Backend::Metal, dtype, q, k, v, out);

  enc.set_compute_pipeline_state(
      get_pipeline(d, na_pipeline(l.n_axes, dtype, l.head_dim)));
  enc.set_input_array(q, 0);
  enc.set_input_array(k, 1);
  enc.set_input_array(v, 2);
  enc.set_output_array(out, 3);
  enc.set_bytes(l.params, 4);
  enc.set_bytes(l.grid, 5);
  const MTL::Size grid(l.grid.blocks, l.params.H, l.params.B);
  const MTL::Size group(fa::kSimdWidth, l.tiles.warps, 1);
  enc.dispatch_threadgroups(grid, group);
}

} // namespace mlx_fused_attn::gpu
