#include "mlx_fused_attn/backend/metal/split_partials.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "mlx/allocator.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

/// Threads a threadgroup of the combine (at most).
constexpr size_t kCombineThreads = 256;

/// An fp32 temporary of `n` elements, kept until the command buffer ends.
mx::array temporary_floats(int64_t n, mx::metal::CommandEncoder& enc) {
  mx::array a({static_cast<int>(n)}, mx::float32, nullptr, {});
  a.set_data(mx::allocator::malloc(a.nbytes()));
  enc.add_temporary(a);
  return a;
}

} // namespace

MetalPipeline split_combine_pipeline(
    KernelFamily family,
    std::string kernel_name) {
  MetalPipeline p;
  p.family = family;
  p.kernel_name = std::move(kernel_name);
  p.hash_name = p.kernel_name;
  p.threads = kCombineThreads;
  return p;
}

SplitPartials bind_split_partials(
    const fa::AttnParams& p,
    int key_splits,
    mx::metal::CommandEncoder& enc) {
  const int64_t rows = split_rows(key_splits, p);
  SplitPartials parts = {
      temporary_floats(rows * p.D_v, enc), temporary_floats(2 * rows, enc)};
  enc.set_output_array(parts.o_part, 7);
  enc.set_output_array(parts.stats, 8);
  enc.set_bytes(key_splits, 9);
  return parts;
}

void combine_splits(
    const MetalPipeline& combine,
    const fa::AttnParams& p,
    int key_splits,
    const SplitPartials& parts,
    mx::array& out,
    mx::metal::Device& d,
    mx::metal::CommandEncoder& enc) {
  enc.set_compute_pipeline_state(get_pipeline(d, combine));
  enc.set_output_array(out, 3);
  enc.set_bytes(p, 4);
  enc.set_input_array(parts.o_part, 7);
  enc.set_input_array(parts.stats, 8);
  enc.set_bytes(key_splits, 9);
  const size_t inner = size_t(p.L_q) * p.D_v;
  enc.dispatch_threads(
      MTL::Size(inner, p.H_q, p.B),
      MTL::Size(std::min(inner, kCombineThreads), 1, 1));
}

} // namespace mlx_fused_attn::gpu
