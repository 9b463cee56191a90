// The dispatch rules: which calls a fused kernel covers on which device, each
// "no" with a reason the user can read (can_use_fused, force_fused).
#pragma once

#include "mlx_fused_attn/call.h"

namespace mlx_fused_attn {

Support fused_support(const AttentionCall& call);

} // namespace mlx_fused_attn
