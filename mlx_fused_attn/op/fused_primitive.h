// FusedPrimitive: what the fused MLX primitives (FusedAttention,
// NeighborhoodAttention) share. Each carries its call's launch plan, made
// when the op was built. Lazy and transformable: eval runs the plan on the
// CPU or GPU; gradients and forward-mode derivatives come from the family's
// plain-ops definition; vmap folds the mapped axis into the batch and stays
// fused.
//
// A family is a struct of static members:
//   Spec, Call, Plan           what a call asks for; a validated call; its
//                              launch plan (with .spec, .fused())
//   kName                      the primitive's name
//   plan                       (call): the call's plan
//   fused                      (call, plan): the primitive applied to a
//                              call whose plan has a family
//   eval_cpu, eval_gpu         (plan, inputs, outputs, stream): run the
//                              kernel
//   plain                      (spec, inputs, stream): the op as plain ops
//   batched                    (spec, input index): whether that input has
//                              the batch as axis 0
//   equivalent                 (spec, spec): the same computation
//   output_shape               (inputs): the output's shape
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mlx/primitives.h"
#include "mlx_fused_attn/op/transforms.h"

namespace mlx_fused_attn {

/// vmap by folding the mapped axis into the batch, [n, B, ...] -> [n * B,
/// ...], of every input whose `batched` entry is set; `apply` computes on
/// the folded inputs, whose outputs all have the batch as axis 0. Calls
/// folding cannot express go through `plain`.
std::vector<mlx::core::array> vmap_by_folding(
    const Definitions& apply,
    const Definitions& plain,
    const std::vector<mlx::core::array>& inputs,
    const std::vector<int>& axes,
    const std::vector<bool>& batched,
    mlx::core::Stream s);

template <typename Family>
class FusedPrimitive : public mlx::core::Primitive {
 public:
  using Spec = typename Family::Spec;
  using Call = typename Family::Call;
  using Plan = typename Family::Plan;

  FusedPrimitive(
      mlx::core::Stream stream,
      Plan plan,
      const std::vector<mlx::core::array>& inputs)
      : mlx::core::Primitive(stream), plan_(std::move(plan)) {
    for (const auto& x : inputs) {
      planned_shapes_.push_back(x.shape());
    }
  }

  void eval_cpu(
      const std::vector<mlx::core::array>& inputs,
      std::vector<mlx::core::array>& outputs) override {
    Family::eval_cpu(plan_for(inputs), inputs, outputs, stream());
  }
  void eval_gpu(
      const std::vector<mlx::core::array>& inputs,
      std::vector<mlx::core::array>& outputs) override {
    Family::eval_gpu(plan_for(inputs), inputs, outputs, stream());
  }

  std::vector<mlx::core::array> vjp(
      const std::vector<mlx::core::array>& primals,
      const std::vector<mlx::core::array>& cotangents,
      const std::vector<int>& argnums,
      const std::vector<mlx::core::array>&) override {
    return vjp_through(definitions(), primals, cotangents, argnums);
  }
  std::vector<mlx::core::array> jvp(
      const std::vector<mlx::core::array>& primals,
      const std::vector<mlx::core::array>& tangents,
      const std::vector<int>& argnums) override {
    return jvp_through(definitions(), primals, tangents, argnums);
  }
  std::pair<std::vector<mlx::core::array>, std::vector<int>> vmap(
      const std::vector<mlx::core::array>& inputs,
      const std::vector<int>& axes) override {
    std::vector<bool> batched;
    for (size_t i = 0; i < inputs.size(); ++i) {
      batched.push_back(Family::batched(plan_.spec, static_cast<int>(i)));
    }
    auto apply = [this](const std::vector<mlx::core::array>& in) {
      return apply_to(in);
    };
    std::vector<mlx::core::array> outs =
        vmap_by_folding(apply, definitions(), inputs, axes, batched, stream());
    return {outs, std::vector<int>(outs.size(), 0)};
  }

  std::vector<mlx::core::Shape> output_shapes(
      const std::vector<mlx::core::array>& inputs) override {
    return {Family::output_shape(inputs)};
  }
  bool is_equivalent(const mlx::core::Primitive& other) const override {
    return Family::equivalent(
        plan_.spec, static_cast<const FusedPrimitive&>(other).plan_.spec);
  }
  const char* name() const override {
    return Family::kName;
  }

 protected:
  const Plan& plan() const {
    return plan_;
  }

  /// The plain-ops definition of the output.
  Definition definition() {
    return [spec = plan_.spec, s = stream()](
               const std::vector<mlx::core::array>& in) {
      return Family::plain(spec, in, s);
    };
  }

  /// Every output as plain ops, which transforms are taken through.
  virtual Definitions definitions() {
    return [def = definition()](const std::vector<mlx::core::array>& in) {
      return std::vector<mlx::core::array>{def(in)};
    };
  }

  /// Every output of the primitive's call on `inputs` (vmap's folded
  /// ones), fused where their own plan runs.
  virtual std::vector<mlx::core::array> apply_to(
      const std::vector<mlx::core::array>& inputs) {
    const Call call{plan_.spec, inputs, stream()};
    const Plan plan = Family::plan(call);
    return {
        plan.fused() ? Family::fused(call, plan)
                     : Family::plain(plan_.spec, inputs, stream())};
  }

 private:
  /// The plan made when the op was built; or, where a shapeless compile
  /// runs the primitive on other shapes, one made for those (kept until
  /// the shapes change again).
  const Plan& plan_for(const std::vector<mlx::core::array>& inputs) {
    if (same_shapes(inputs, planned_shapes_)) {
      return plan_;
    }
    if (!same_shapes(inputs, replanned_shapes_)) {
      replanned_ = Family::plan(Call{plan_.spec, inputs, stream()});
      replanned_shapes_.clear();
      for (const auto& x : inputs) {
        replanned_shapes_.push_back(x.shape());
      }
    }
    if (!replanned_.fused()) {
      throw std::invalid_argument(
          std::string("[") + Family::kName +
          "] a shapeless compile reached shapes no fused kernel runs: " +
          replanned_.reason);
    }
    return replanned_;
  }

  static bool same_shapes(
      const std::vector<mlx::core::array>& inputs,
      const std::vector<mlx::core::Shape>& shapes) {
    bool same = inputs.size() == shapes.size();
    for (size_t i = 0; same && i < inputs.size(); ++i) {
      same = inputs[i].shape() == shapes[i];
    }
    return same;
  }

  Plan plan_;
  std::vector<mlx::core::Shape> planned_shapes_;
  Plan replanned_;
  std::vector<mlx::core::Shape> replanned_shapes_;
};

} // namespace mlx_fused_attn
