// The primitives of attention_merge on the CPU (attention.h): the attention
// of q over k, v merged by LSE into an output and LSE that hold the
// attention of q over other keys (ring attention's accumulation). The
// kernel reads the held rows and writes the merged ones over them, in the
// held output's buffer where nothing else reads it: no partial output and
// no separate accumulator exist. Two single-output primitives, because MLX
// gives an input of a primitive with two outputs one reference per output,
// so it is never donatable: FusedAttentionMerge (the output) leaves the
// merged LSE in a slot that FusedAttentionMergedLse (its one input that
// output) hands on. Elsewhere the op is the fused call with its LSE and
// merged_by_lse. Not differentiable: ring attention has its own vjp.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "mlx_fused_attn/op/cpu_primitive.h"
#include "mlx_fused_attn/plan/attention_plan.h"

namespace mlx_fused_attn {

/// The merged LSE between the two primitives' evals.
struct MergedLseSlot {
  std::optional<mlx::core::array> lse;
};

class FusedAttentionMerge : public CpuPrimitive {
 public:
  FusedAttentionMerge(
      mlx::core::Stream stream,
      AttentionPlan plan,
      std::shared_ptr<MergedLseSlot> slot);

  /// inputs {q, k, v[, mask], held out, held lse}, output the merged out.
  void eval_cpu(
      const std::vector<mlx::core::array>& inputs,
      std::vector<mlx::core::array>& outputs) override;
  std::vector<mlx::core::Shape> output_shapes(
      const std::vector<mlx::core::array>& inputs) override;

 private:
  AttentionPlan plan_;
  std::shared_ptr<MergedLseSlot> slot_;
};

class FusedAttentionMergedLse : public CpuPrimitive {
 public:
  FusedAttentionMergedLse(
      mlx::core::Stream stream,
      std::shared_ptr<MergedLseSlot> slot);

  /// input {a FusedAttentionMerge's output}, output the LSE it merged.
  void eval_cpu(
      const std::vector<mlx::core::array>& inputs,
      std::vector<mlx::core::array>& outputs) override;

 private:
  std::shared_ptr<MergedLseSlot> slot_;
};

/// {out, lse} of attention_merge on the CPU for `plan` (a fused CPU plan
/// of the call whose inputs are `call_inputs`).
std::vector<mlx::core::array> fused_attention_merge(
    const AttentionPlan& plan,
    std::vector<mlx::core::array> call_inputs,
    const mlx::core::array& held_out,
    const mlx::core::array& held_lse,
    mlx::core::Stream s);

/// Two attentions of the same queries over disjoint key sets merged, as
/// plain ops: {out, lse} in the held output's dtype (the sum in fp32) and
/// fp32. A row one side saw no key of (LSE -inf) takes the other's. On its
/// device's default stream, compiled: one fused kernel, without the
/// elementwise steps' full-size fp32 temporaries.
std::vector<mlx::core::array> merged_by_lse(
    const mlx::core::array& held_out,
    const mlx::core::array& held_lse,
    const mlx::core::array& out,
    const mlx::core::array& lse,
    mlx::core::Stream s);

} // namespace mlx_fused_attn
