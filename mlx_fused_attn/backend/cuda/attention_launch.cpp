#include "mlx_fused_attn/backend/cuda/attention_launch.h"

#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/backend/cuda/tensor_map.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;

namespace {

RunInputs run_inputs(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    bool producer,
    const Launch& at) {
  const auto kv_rows = producer ? tensor_map_rows : readable_rows;
  const CallInputs call = call_inputs(plan.spec, inputs, plan.visits_input);
  RunInputs in{
      readable_rows(call.q, plan.dtype, at.s, at.device, at.arch),
      kv_rows(call.k, plan.dtype, at.s, at.device, at.arch),
      kv_rows(call.v, plan.dtype, at.s, at.device, at.arch)};
  // Sinks are read as sinks[head]: a strided view is copied.
  if (call.sinks != nullptr) {
    in.sinks = needs_row_copy(*call.sinks)
        ? contiguous_copy(*call.sinks, plan.dtype, at.s, at.device, at.arch)
        : *call.sinks;
  }
  in.mask = call.mask;
  in.visits = call.visits;
  return in;
}

/// Registers the reads of `in` with the encoder and takes the optional
/// ones' device addresses.
void read_inputs(RunInputs& in, mx::cu::CommandEncoder& enc) {
  if (in.mask != nullptr) {
    in.mask_ptr = mx::gpu_ptr<void>(*in.mask);
    enc.set_input_array(*in.mask);
  }
  if (in.visits != nullptr) {
    in.visits_ptr = mx::gpu_ptr<uint32_t>(*in.visits);
    enc.set_input_array(*in.visits);
  }
  if (in.sinks) {
    in.sinks_ptr = mx::gpu_ptr<void>(*in.sinks);
    enc.set_input_array(*in.sinks);
  }
  enc.set_input_array(in.q);
  enc.set_input_array(in.k);
  enc.set_input_array(in.v);
}

} // namespace

AttentionRun start_run(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    bool producer,
    const Launch& at) {
  AttentionRun run{run_inputs(plan, inputs, producer, at), {}, {}};
  std::vector<mx::array*> made;
  for (mx::array& output : outputs) {
    made.push_back(&output);
  }
  run.parts = make_buffers(
      made, plan.key_splits, merged_tiles(plan), plan.params, at.s, at.enc);
  mx::array& out = outputs[0];
  poison(out, at.enc, at.device, at.arch);
  run.params = launch_params(
      plan, run.in.q, run.in.k, run.in.v, out, run.in.mask, run.in.visits);
  read_inputs(run.in, at.enc);
  at.enc.set_output_array(out);
  return run;
}

} // namespace mlx_fused_attn::cuda
