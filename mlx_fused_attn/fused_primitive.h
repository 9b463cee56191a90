// FusedPrimitive: what the fused MLX primitives (FusedAttention,
// NeighborhoodAttention) share. Lazy and transformable: eval runs the
// family's CPU or GPU kernel; gradients and forward-mode derivatives come
// from its plain-ops definition; vmap folds the mapped axis into the batch
// and stays fused.
//
// A family is a struct of static members:
//   Spec, Call                 what a call asks for; a validated call
//   kName                      the primitive's name
//   eval_cpu, eval_gpu         (spec, inputs, out, stream): run the kernel
//   plain                      (spec, inputs, stream): the op as plain ops
//   support, fused             (call): whether a kernel covers it; the
//                              primitive applied to it
//   output_shape               (inputs)
//   batched                    (spec, input index): whether that input has
//                              the batch as axis 0
//   equivalent                 (spec, spec): the same computation
#pragma once

#include <utility>
#include <vector>

#include "mlx/primitives.h"
#include "mlx_fused_attn/transforms.h"

namespace mlx_fused_attn {

/// vmap by folding the mapped axis into the batch, [n, B, ...] -> [n * B,
/// ...], of every input whose `batched` entry is set; `apply` computes on
/// the folded inputs. Calls folding cannot express go through `plain`.
mlx::core::array vmap_by_folding(
    const Definition& apply,
    const Definition& plain,
    const std::vector<mlx::core::array>& inputs,
    const std::vector<int>& axes,
    const std::vector<bool>& batched,
    mlx::core::Stream s);

template <typename Family>
class FusedPrimitive : public mlx::core::Primitive {
 public:
  using Spec = typename Family::Spec;
  using Call = typename Family::Call;

  FusedPrimitive(mlx::core::Stream stream, Spec spec)
      : mlx::core::Primitive(stream), spec_(spec) {}

  void eval_cpu(
      const std::vector<mlx::core::array>& inputs,
      std::vector<mlx::core::array>& outputs) override {
    Family::eval_cpu(spec_, inputs, outputs[0], stream());
  }
  void eval_gpu(
      const std::vector<mlx::core::array>& inputs,
      std::vector<mlx::core::array>& outputs) override {
    Family::eval_gpu(spec_, inputs, outputs[0], stream());
  }

  std::vector<mlx::core::array> vjp(
      const std::vector<mlx::core::array>& primals,
      const std::vector<mlx::core::array>& cotangents,
      const std::vector<int>& argnums,
      const std::vector<mlx::core::array>&) override {
    return vjp_through(definition(), primals, cotangents, argnums);
  }
  std::vector<mlx::core::array> jvp(
      const std::vector<mlx::core::array>& primals,
      const std::vector<mlx::core::array>& tangents,
      const std::vector<int>& argnums) override {
    return jvp_through(definition(), primals, tangents, argnums);
  }
  std::pair<std::vector<mlx::core::array>, std::vector<int>> vmap(
      const std::vector<mlx::core::array>& inputs,
      const std::vector<int>& axes) override {
    std::vector<bool> batched;
    for (size_t i = 0; i < inputs.size(); ++i) {
      batched.push_back(Family::batched(spec_, static_cast<int>(i)));
    }
    auto apply = [spec = spec_, s = stream()](
                     const std::vector<mlx::core::array>& in) {
      const Call call{spec, in, s};
      return Family::support(call).ok ? Family::fused(call)
                                      : Family::plain(spec, in, s);
    };
    return {
        {vmap_by_folding(apply, definition(), inputs, axes, batched, stream())},
        {0}};
  }

  std::vector<mlx::core::Shape> output_shapes(
      const std::vector<mlx::core::array>& inputs) override {
    return {Family::output_shape(inputs)};
  }
  bool is_equivalent(const mlx::core::Primitive& other) const override {
    return Family::equivalent(
        spec_, static_cast<const FusedPrimitive&>(other).spec_);
  }
  const char* name() const override {
    return Family::kName;
  }

  const Spec& spec() const {
    return spec_;
  }

 private:
  /// The plain-ops definition that transforms are taken through.
  Definition definition() {
    return [spec = spec_, s = stream()](
               const std::vector<mlx::core::array>& in) {
      return Family::plain(spec, in, s);
    };
  }

  Spec spec_;
};

} // namespace mlx_fused_attn
