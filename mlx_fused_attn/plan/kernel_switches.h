// Switches over the GPU backends' kernel paths, read when each call is
// planned (as MLX_FUSED_ATTN_JIT is read at each call), so that one process
// can time or check both paths on the same shapes (benchmarks/gpu_bench.py,
// the tests); the plan keeps the answer until the call runs.
//
// On unless the variable is "0" (kernel_switch_on): MLX_FUSED_ATTN_<NAME>
// for each family of the attention op (FA_ATTENTION_CANDIDATES, NAME its
// registry name in capitals: MLX_FUSED_ATTN_SHORT_ATTENTION=0 turns the
// short-sequence kernel off; family_switch_variable), MLX_FUSED_ATTN_SPLIT_KEYS
// (split keys, split_keys.h), MLX_FUSED_ATTN_MASK_BLOCKS (an array mask's
// classes by block and the backward's block lists, kernels/mask_visits.h: the
// kernels then read the mask at every score of every block) and, CUDA only,
// MLX_FUSED_ATTN_DEVICE_OUTPUTS (outputs moved to device memory where MLX's
// cache hands a unified buffer, backend/cuda/device_buffer.cpp: "0" keeps
// the cache's answer, whose pages a host read left on the host).
//
// Forcing, CUDA only: MLX_FUSED_ATTN_SPLIT_COMBINE, "one_element",
// "grouped" or "row", runs the combine of split keys in that form
// (kernels/split_combine_form.h) at every split count; unset or any other
// value, the planner's rule (plan/split_count.h's split_combine_form).
//
// MLX_FUSED_ATTN_QUANT_DECODE_TILES, CUDA only: "1" runs the quantized
// family's decode tiles wherever they have kernels, "slices" its key-slice
// tiles, "0" its default tiles; unset or any other value, the planner's
// rule (plan/quantized_kernel_choice.h).
// MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS, CUDA only: "1" runs the quantized
// loader's QuantizedFloatChunks at any tiles in place of the plan's packed
// policies (quantized_attention_chunks.h), so that a run compares them.
//
// Opt-in, CUDA only (opt_in_switch_on): "1" takes the path wherever it
// applies, "0", unset or any other value never does. Issue 46's paths, which
// passed their tests and the sanitizers on an H200 (2026-12-06) but were
// slower somewhere they apply (benchmarks/RESULTS.md, "Issue 46's opt-in
// paths"); a run that moves one to default-on deletes it from this list:
// - MLX_FUSED_ATTN_SPLIT_MERGE: split keys in one kernel, the last split
//   merging (kernels/cuda/split_merge.cuh); otherwise a combine kernel merges
//   and a call that saves the LSE runs unsplit. Decode 1.3-1.5x slower.
// - MLX_FUSED_ATTN_BWD_ONE_KERNEL: the backward as one kernel, dK/dV adding
//   dQ through atomics (attention_backward_dq_atomics.h), wherever its
//   shared memory fits; otherwise a dQ kernel of its own. 1.5-1.7x slower.
// - MLX_FUSED_ATTN_PERSISTENT: the producer kernel's persistent grid
//   wherever the tiles allow it (plan/persistent_grid.h, whose planner rule
//   is the candidate default); otherwise the static grid. Up to 1.06x
//   faster within 8 waves, 0.71x on one causal head of 32 query blocks.
// - MLX_FUSED_ATTN_SMALL_GRID_PRODUCER: on small grids (plan/small_grid.h),
//   64-query tiles with a producer warpgroup, two a multiprocessor
//   (attention_config.h's choose_small_grid_tiles); otherwise the chooser's
//   tiles. 1.07-1.09x faster on three rows, 0.86x on another.
#pragma once

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "mlx_fused_attn/kernels/split_combine_form.h"
#include "mlx_fused_attn/plan/persistent_grid.h"
#include "mlx_fused_attn/plan/quantized_tiles_kind.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn {

inline bool kernel_switch_on(const char* variable) {
  const char* env = std::getenv(variable);
  return env == nullptr || env[0] != '0';
}

inline bool opt_in_switch_on(const char* variable) {
  const char* env = std::getenv(variable);
  return env != nullptr && env[0] == '1' && env[1] == '\0';
}

/// The switch of the attention op's family called `name` (family_name):
/// MLX_FUSED_ATTN_ and the name in capitals.
inline std::string family_switch_variable(const std::string& name) {
  std::string variable = "MLX_FUSED_ATTN_";
  for (const char c : name) {
    variable += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return variable;
}

inline bool split_keys_enabled() {
  return kernel_switch_on("MLX_FUSED_ATTN_SPLIT_KEYS");
}

inline bool mask_blocks_enabled() {
  return kernel_switch_on("MLX_FUSED_ATTN_MASK_BLOCKS");
}

inline bool split_merge_enabled() {
  return opt_in_switch_on("MLX_FUSED_ATTN_SPLIT_MERGE");
}

inline std::optional<fa::SplitCombineForm> forced_split_combine_form() {
  const char* env = std::getenv("MLX_FUSED_ATTN_SPLIT_COMBINE");
  for (fa::SplitCombineForm form : kSplitCombineForms) {
    if (env != nullptr && std::strcmp(env, split_combine_form_name(form)) == 0) {
      return form;
    }
  }
  return std::nullopt;
}

inline std::optional<QuantizedTilesKind> forced_quantized_tiles() {
  const char* env = std::getenv("MLX_FUSED_ATTN_QUANT_DECODE_TILES");
  if (env == nullptr) {
    return std::nullopt;
  }
  if (std::strcmp(env, "1") == 0) {
    return QuantizedTilesKind::Decode;
  }
  if (std::strcmp(env, "slices") == 0) {
    return QuantizedTilesKind::KeySlices;
  }
  if (std::strcmp(env, "0") == 0) {
    return QuantizedTilesKind::Default;
  }
  return std::nullopt;
}

inline bool quantized_float_chunks_forced() {
  return opt_in_switch_on("MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS");
}

inline bool backward_one_kernel_enabled() {
  return opt_in_switch_on("MLX_FUSED_ATTN_BWD_ONE_KERNEL");
}

inline PersistentChoice persistent_choice() {
  return opt_in_switch_on("MLX_FUSED_ATTN_PERSISTENT")
      ? PersistentChoice::Always
      : PersistentChoice::Never;
}

inline bool device_outputs_enabled() {
  return kernel_switch_on("MLX_FUSED_ATTN_DEVICE_OUTPUTS");
}

inline bool small_grid_producer_enabled() {
  return opt_in_switch_on("MLX_FUSED_ATTN_SMALL_GRID_PRODUCER");
}

} // namespace mlx_fused_attn
