// The partials of split keys on CUDA (kernels/split_keys.h), for every
// family whose kernel splits its keys (the general kernel, the quantized K/V
// one; each has its own combine kernel): the fp32 temporaries the kernel
// writes, made with the call's outputs, and what merges them into the
// output: the kernel's last split, counting on counters made and zeroed
// with them (plan.split_merge, kernels/cuda/split_merge.cuh), or else the
// combine's node.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "mlx/array.h"
#include "mlx/backend/cuda/device.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/split_combine_form.h"
#include "mlx_fused_attn/params.h"

namespace mlx_fused_attn::cuda {

/// The partials of split keys, which the kernel writes and its last split
/// (counting on `counters`) or the combine merges: temporaries, kept until
/// the encoder's graph has run; none (null pointers) without split keys,
/// no counters where the combine merges.
struct SplitPartials {
  std::optional<mlx::core::array> o_part, stats, counters;
  float* o_part_ptr = nullptr;
  float* stats_ptr = nullptr;
  uint32_t* counters_ptr = nullptr;
};

/// The tiles (query block, head, batch) of a plan whose last split merges
/// (plan.split_merge), one counter each (split_merge.cuh's split_counter);
/// 0 where the combine kernel merges. `Plan`: AttentionPlan or
/// QuantizedAttentionPlan, whose tiles are AttnTiles where it splits. From
/// the tiles, not the grid: a persistent grid's blocks walk the tiles.
template <typename Plan>
int64_t merged_tiles(const Plan& plan) {
  if (!plan.split_merge) {
    return 0;
  }
  const int bq = std::get<fa::AttnTiles>(plan.tiles).bq;
  const fa::AttnParams& p = plan.params;
  return (int64_t(p.L_q) + bq - 1) / bq * p.H_q * p.B;
}

/// Makes the buffers of `outputs` and, with `key_splits` > 1, the partials
/// of `p`'s rows and the counters of `merged_tiles` tiles (zeroed), all at
/// once (one node, not one each), before the first set_*_array:
/// set_device_data adds a node of its own, which would take the
/// dependencies registered for the next.
SplitPartials make_buffers(
    std::vector<mlx::core::array*> outputs,
    int key_splits,
    int64_t merged_tiles,
    const fa::AttnParams& p,
    mlx::core::Stream s,
    mlx::core::cu::CommandEncoder& enc);

/// Registers the partials and the counters as outputs of the kernel's node
/// (the counters after the node that zeroed them).
void write_partials(
    const SplitPartials& parts,
    mlx::core::cu::CommandEncoder& enc);

/// Adds the node of `combine`, the family's combine kernel in `form`,
/// which merges `parts` of `key_splits` splits into `out` ([B, H_q, L_q,
/// D_v] of `p`), after the node that wrote them.
void add_combine_node(
    mlx::core::cu::CommandEncoder& enc,
    CUfunction combine,
    fa::SplitCombineForm form,
    fa::AttnParams p,
    int key_splits,
    const SplitPartials& parts,
    mlx::core::array& out);

} // namespace mlx_fused_attn::cuda
