#include "mlx_fused_attn/backend/cuda/split_partials.h"

#include <cstdint>

#include "mlx/backend/cuda/utils.h"
#include "mlx_fused_attn/backend/cuda/device_buffer.h"
#include "mlx_fused_attn/backend/cuda/zero_words_kernel_ptx.h"
#include "mlx_fused_attn/kernels/cuda/block_sizes.h"
#include "mlx_fused_attn/plan/launch_params.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;

namespace {

/// An fp32 array of `n` elements, its buffer not yet made
/// (set_device_data).
mx::array unmade_floats(int64_t n) {
  return mx::array({static_cast<int>(n)}, mx::float32, nullptr, {});
}

} // namespace

SplitPartials make_buffers(
    std::vector<mx::array*> outputs,
    int key_splits,
    int64_t merged_tiles,
    const fa::AttnParams& p,
    mx::Stream s,
    mx::cu::CommandEncoder& enc) {
  SplitPartials parts;
  if (merged_tiles > 0) {
    // The first buffer, which set_device_data's launch zeroes: padded to
    // words it zeroes whole.
    parts.counters = mx::array(
        {static_cast<int>(zeroed_words(merged_tiles))},
        mx::uint32,
        nullptr,
        {});
    outputs.insert(outputs.begin(), &*parts.counters);
  }
  if (key_splits > 1) {
    const int64_t rows = split_rows(key_splits, p);
    parts.o_part = unmade_floats(rows * p.D_v);
    parts.stats = unmade_floats(2 * rows);
    outputs.push_back(&*parts.o_part);
    outputs.push_back(&*parts.stats);
  }
  set_device_data(outputs, s, /* zero_first = */ merged_tiles > 0);
  if (parts.o_part) {
    enc.add_temporary(*parts.o_part);
    enc.add_temporary(*parts.stats);
    parts.o_part_ptr = mx::gpu_ptr<float>(*parts.o_part);
    parts.stats_ptr = mx::gpu_ptr<float>(*parts.stats);
  }
  if (parts.counters) {
    enc.add_temporary(*parts.counters);
    parts.counters_ptr = mx::gpu_ptr<uint32_t>(*parts.counters);
  }
  return parts;
}

void write_partials(const SplitPartials& parts, mx::cu::CommandEncoder& enc) {
  if (parts.o_part) {
    enc.set_output_array(*parts.o_part);
    enc.set_output_array(*parts.stats);
  }
  if (parts.counters) {
    enc.set_output_array(*parts.counters);
  }
}

void add_combine_node(
    mx::cu::CommandEncoder& enc,
    CUfunction combine,
    fa::SplitCombineForm form,
    fa::AttnParams p,
    int key_splits,
    const SplitPartials& parts,
    mx::array& out) {
  // The node takes its arguments' addresses: p and key_splits are copies,
  // and so are these.
  float* o_part = parts.o_part_ptr;
  float* stats = parts.stats_ptr;
  enc.set_input_array(*parts.o_part);
  enc.set_input_array(*parts.stats);
  enc.set_output_array(out);
  enc.add_kernel_node_ex(
      combine,
      dim3(split_combine_blocks_x(form, p), p.H_q, p.B),
      dim3(fa::kSplitCombineThreads),
      {},
      0,
      o_part,
      stats,
      mx::gpu_ptr<void>(out),
      p,
      key_splits);
}

} // namespace mlx_fused_attn::cuda
