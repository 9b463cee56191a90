// Scheduling a CPU kernel on an MLX CPU stream, shared by every CPU eval.
#pragma once

#include <cstring>
#include <vector>

#include "mlx/allocator.h"
#include "mlx/array.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx_fused_attn/backend/poison.h"

namespace mlx_fused_attn::cpu {

/// Allocates `out` and enqueues run(inputs, out) on the stream through MLX's
/// CPU command encoder. Data pointers must be read inside `run`: when eval_cpu
/// runs, the inputs may not be computed yet (it only schedules).
template <typename Run>
void dispatch(
    mlx::core::Stream s,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    Run run) {
  using mlx::core::array;
  out.set_data(mlx::core::allocator::malloc(out.nbytes()));
  auto& encoder = mlx::core::cpu::get_command_encoder(s);
  std::vector<array> weak_inputs;
  for (const auto& a : inputs) {
    encoder.set_input_array(a);
    weak_inputs.push_back(array::unsafe_weak_copy(a));
  }
  encoder.set_output_array(out);
  encoder.dispatch([run = std::move(run),
                    inputs = std::move(weak_inputs),
                    out = array::unsafe_weak_copy(out)]() mutable {
    if (poison_outputs()) {
      std::memset(out.data<void>(), 0xff, out.nbytes());
    }
    run(inputs, out);
  });
}

} // namespace mlx_fused_attn::cpu
