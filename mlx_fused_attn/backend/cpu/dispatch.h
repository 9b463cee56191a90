// Scheduling a CPU kernel on an MLX CPU stream, shared by every CPU eval.
#pragma once

#include <cstring>
#include <vector>

#include "mlx/allocator.h"
#include "mlx/array.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx_fused_attn/backend/poison.h"

namespace mlx_fused_attn::cpu {

/// Enqueues run(inputs, outputs) on the stream through MLX's CPU command
/// encoder, `outputs` already holding their buffers: new ones (`fresh`,
/// poisoned first where the tests ask), or data the kernel updates in
/// place. Data pointers must be read inside `run`: when eval_cpu runs, the
/// inputs may not be computed yet (it only schedules).
template <typename Run>
void dispatch_into(
    mlx::core::Stream s,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& outputs,
    bool fresh,
    Run run) {
  using mlx::core::array;
  auto& encoder = mlx::core::cpu::get_command_encoder(s);
  std::vector<array> weak_inputs, weak_outputs;
  for (const auto& a : inputs) {
    encoder.set_input_array(a);
    weak_inputs.push_back(array::unsafe_weak_copy(a));
  }
  for (auto& out : outputs) {
    encoder.set_output_array(out);
    weak_outputs.push_back(array::unsafe_weak_copy(out));
  }
  encoder.dispatch([run = std::move(run),
                    inputs = std::move(weak_inputs),
                    outputs = std::move(weak_outputs),
                    fresh]() mutable {
    if (fresh && poison_outputs()) {
      for (auto& out : outputs) {
        std::memset(out.data<void>(), 0xff, out.nbytes());
      }
    }
    run(inputs, outputs);
  });
}

/// Allocates `outputs` and enqueues run(inputs, outputs) (dispatch_into).
template <typename Run>
void dispatch(
    mlx::core::Stream s,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& outputs,
    Run run) {
  for (auto& out : outputs) {
    out.set_data(mlx::core::allocator::malloc(out.nbytes()));
  }
  dispatch_into(s, inputs, outputs, /* fresh = */ true, std::move(run));
}

} // namespace mlx_fused_attn::cpu
