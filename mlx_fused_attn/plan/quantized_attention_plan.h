// How one attention call over a quantized K/V cache runs: its launch plan,
// built once from the call and its stream's device when the op is built
// (quantized_attention_planner.h), carried by the primitive and read by the
// backends at eval. A plan without a family carries the reason the call
// runs as plain MLX ops.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "mlx_fused_attn/families/quantized_attention/quantized_attention_chunks.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/split_combine_form.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/plan/launch_plan.h"
#include "mlx_fused_attn/plan/quantized_call.h"

namespace mlx_fused_attn {

struct QuantizedAttentionPlan {
  QuantizedAttentionSpec spec;
  /// KernelFamily::QuantizedAttention, or none: the call runs as plain MLX
  /// ops, for `reason`.
  std::optional<KernelFamily> family;
  /// The kernels' dtype of q, the scales and biases, and the output.
  fa::DType dtype = fa::DType::Float32;
  /// Shapes, scale and causal offset, as the float kernels read them; the
  /// strides (of q, the output and the mask; K's and V's are
  /// fa::QuantKvParams') are known only at eval.
  fa::AttnParams params{};
  fa::AttnFeatures features{};
  /// Decode with GQA (L_q = 1): the query heads that share a key/value head
  /// run as the rows of one block, which dequantizes that head's K and V
  /// once. `params` then hold H_kv heads of gqa_factor rows, as the float
  /// plan's (attention_plan.h).
  bool packed_gqa = false;
  /// The GPU kernels' tiles, threadgroups sharing a query block's keys, and
  /// grid (the CPU kernel has none: it splits keys by its threads at eval).
  std::variant<std::monostate, fa::AttnTiles> tiles;
  /// CUDA: the loader's chunk policy (quantized_attention_chunks.h); a
  /// packed one runs where the words prove 16-byte aligned at eval,
  /// QuantizedFloatChunks where not. Float elsewhere.
  fa::QuantizedChunks chunks = fa::QuantizedChunks::Float;
  int key_splits = 1;
  /// With key splits on CUDA: the last split of each query block merges
  /// the partials (kernels/cuda/split_merge.cuh); else a combine kernel
  /// merges them (Metal always).
  bool split_merge = false;
  /// The form of the combine kernel that merges them where the kernel does
  /// not (plan/split_count.h's split_combine_form).
  fa::SplitCombineForm combine_form = fa::SplitCombineForm::OneElement;
  LaunchGrid grid;
  /// Why no family runs the call (empty when one does).
  std::string reason;

  bool fused() const {
    return family.has_value();
  }
};

} // namespace mlx_fused_attn
