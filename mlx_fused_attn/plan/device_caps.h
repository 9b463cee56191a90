// What the planners know of the device a call runs on. A backend fills one
// value from its device (and the switches that pick a kernel variant); the
// planners (attention_planner.h, na_planner.h) read nothing else of it and
// never call a backend, so that a plan is a function of the call and this
// value.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mlx_fused_attn/plan/kernel_family.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/tile/platform.h"

namespace mlx_fused_attn {

struct DeviceCaps {
  /// The CPU kernels run the plan (they have no tiles and no grid).
  bool cpu = false;
  /// The GPU backend whose kernels run the plan; none on the CPU and in a
  /// build without GPU kernels.
  std::optional<fa::Backend> gpu;
  /// How refusals name the backend ("CUDA", "Metal").
  std::string name;
  /// Why the device runs no fused kernel at all (a GPU the kernels cannot
  /// drive, a build without GPU kernels); empty where it runs them.
  std::string refusal;
  /// Multiprocessors (CUDA) or GPU cores (Metal): the wave that split keys
  /// fill.
  int cores = 0;
  /// Multiprocessors whose wave decides the large-grid tiles and the
  /// neighborhood kernel's runs of tiles; 0 where neither applies (Metal).
  int sm_count = 0;
  /// Shared memory a block may declare; 0 where tiles fit by construction.
  int max_smem_bytes = 0;
  /// The grid's limit on the heads (y) and batch (z) axes; 0: none.
  int max_grid_yz = 0;
  /// Hopper's warpgroup MMA and TMA: the producer tiles may run.
  bool wgmma = false;
  /// On Metal, the variant of the general kernel's tiles to run
  /// (choose_attention_tiles).
  fa::MetalAttnVariant metal_variant{};
  /// MLX_FUSED_ATTN_NA_RUN on CUDA: runs of this many 1-D neighborhood
  /// tiles (tests); 0: the chooser's.
  int na_run_override = 0;
  /// Families whose kernels cannot be built here, each with the reason.
  std::vector<std::pair<KernelFamily, std::string>> unavailable;

  /// Why `family` cannot be built here, or null where it can.
  const std::string* unavailable_reason(KernelFamily family) const {
    for (const auto& [f, reason] : unavailable) {
      if (f == family) {
        return &reason;
      }
    }
    return nullptr;
  }
};

} // namespace mlx_fused_attn
