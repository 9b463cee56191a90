// What the planner reads besides a call's arguments, as one number: its
// switches (every MLX_FUSED_ATTN_ variable of the environment, read as the
// planner reads them) and the kernel builds that failed so far
// (kernel_availability.h). Python's route() keeps a call's route while this
// number stays the same.
#pragma once

#include <cstdint>

namespace mlx_fused_attn {

std::uint64_t plan_inputs_state();

} // namespace mlx_fused_attn
