// The dispatch rules of neighborhood attention: which calls a fused kernel
// covers on which device, each "no" with a reason the user can read.
#pragma once

#include "mlx_fused_attn/na_call.h"

namespace mlx_fused_attn {

Support neighborhood_support(const NaCall& call);

} // namespace mlx_fused_attn
