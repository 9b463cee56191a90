// The partials of split keys on Metal (kernels/split_keys.h), for every
// family whose kernel splits its keys (the general kernel, the quantized K/V
// one; each has its combine in its own library): the fp32 temporaries the
// kernel writes, bound where the kernels list them (7, 8 and the split count
// at 9, as attention.metal does), and the combine's dispatch, which merges
// them into the output.
#pragma once

#include <string>

#include "mlx/array.h"
#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/params.h"

namespace mlx_fused_attn::gpu {

/// The combine kernel `kernel_name` of `family`'s library.
MetalPipeline split_combine_pipeline(
    KernelFamily family,
    std::string kernel_name);

/// The partials of `key_splits` splits of `p`'s rows: fp32 temporaries,
/// kept until the command buffer ends.
struct SplitPartials {
  mlx::core::array o_part;
  mlx::core::array stats;
};

/// Makes the partials and binds them and the split count to the kernel
/// the encoder dispatches next.
SplitPartials bind_split_partials(
    const fa::AttnParams& p,
    int key_splits,
    mlx::core::metal::CommandEncoder& enc);

/// Dispatches `combine` (split_combine_pipeline) to merge `parts` into
/// `out`.
void combine_splits(
    const MetalPipeline& combine,
    const fa::AttnParams& p,
    int key_splits,
    const SplitPartials& parts,
    mlx::core::array& out,
    mlx::core::metal::Device& d,
    mlx::core::metal::CommandEncoder& enc);

} // namespace mlx_fused_attn::gpu
