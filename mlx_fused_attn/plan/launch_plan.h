// The parts of a launch plan that every fused op shares: how a plan picks
// its kernel family (an ordered list, the first that can run wins, NATTEN
// style), the grid it records, and the host facts that each have one home
// (the kernels' dtype, the row-stride fix-up decision, log2(e)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "mlx/array.h"
#include "mlx_fused_attn/plan/kernel_family.h"
#include "mlx_fused_attn/spec.h"
#include "mlx_fused_attn/tile/platform.h"

namespace mlx_fused_attn {

/// log2(e): kernels take the softmax scale times this and work with exp2.
constexpr float kLog2e = 1.4426950408889634f;

/// The kernels' element type for an MLX dtype; nothing for dtypes without
/// kernels.
inline std::optional<fa::DType> kernel_dtype(mlx::core::Dtype dtype) {
  if (dtype == mlx::core::float16) {
    return fa::DType::Float16;
  }
  if (dtype == mlx::core::bfloat16) {
    return fa::DType::BFloat16;
  }
  if (dtype == mlx::core::float32) {
    return fa::DType::Float32;
  }
  return std::nullopt;
}

/// Whether a kernel that reads unit-stride rows must read a row-contiguous
/// copy of `x` instead. With `alignment` > 1 the kernel also needs every row
/// start aligned to that many bytes: `address` (where x's data starts on
/// the device) and each outer stride.
inline bool needs_row_copy(
    const mlx::core::array& x,
    std::uintptr_t address = 0,
    int alignment = 1) {
  const int last = static_cast<int>(x.ndim()) - 1;
  if (last < 0) {
    return false;
  }
  if (x.strides()[last] != 1 && x.shape(last) > 1) {
    return true;
  }
  if (alignment <= 1) {
    return false;
  }
  if (address % alignment != 0) {
    return true;
  }
  for (int i = 0; i < last; ++i) {
    if (x.shape(i) > 1 &&
        (x.strides()[i] * static_cast<int64_t>(x.itemsize())) % alignment !=
            0) {
      return true;
    }
  }
  return false;
}

/// Where a plan's kernel runs: threadgroups (blocks) along each axis,
/// simdgroups (warps) in each, and the shared memory each declares.
struct LaunchGrid {
  unsigned x = 1;
  unsigned y = 1;
  unsigned z = 1;
  int warps = 0;
  int smem_bytes = 0;
};

/// One entry of a backend's ordered family list: `plan` fills the family's
/// tiles, grid and features into a plan for `context` (the call and the
/// device), or says why the family cannot run it.
template <typename Plan, typename Context>
struct FamilyCandidate {
  KernelFamily family;
  Support (*plan)(const Context& context, Plan& plan);
};

/// `answer`, a refusal's reason prefixed with `op` (the op and backend that
/// refuse, e.g. "[scaled_dot_product_attention] CUDA: ").
inline Support named(const char* op, const Support& answer) {
  return answer.ok ? answer : Support::no(op + answer.reason);
}

/// Whether `answer` lets planning go on; a "no" becomes the plan's reason.
template <typename Plan>
bool admitted(const Support& answer, Plan& plan) {
  if (!answer.ok) {
    plan.reason = answer.reason;
  }
  return answer.ok;
}

/// Sets `plan.family` to the first of `families` that can run it. When
/// none can, `plan.reason` is the last one's: the list ends with the most
/// general family, whose limits are the ones the user meets.
template <typename Plan, typename Context, std::size_t N>
void choose_family(
    const FamilyCandidate<Plan, Context> (&families)[N],
    const Context& context,
    Plan& plan) {
  for (const auto& candidate : families) {
    const Support answer = candidate.plan(context, plan);
    if (answer.ok) {
      plan.family = candidate.family;
      plan.reason.clear();
      return;
    }
    plan.reason = answer.reason;
  }
}

} // namespace mlx_fused_attn
