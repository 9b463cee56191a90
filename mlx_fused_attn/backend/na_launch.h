// What the Metal and CUDA neighborhood hosts decide alike: the coverage
// checks that depend only on the kernel (dtype, head dims), and a launch's
// kernel choice, parameters and grid.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/backend/na_grid_choice.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/na_spec.h"
#include "mlx_fused_attn/na_params.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn::gpu {

/// The kernel's own limits, each "no" naming `op` (the op and backend, e.g.
/// "[neighborhood_attention] Metal: "). On yes, `dtype` is the kernel's.
Support na_kernel_covers(
    const char* op,
    const std::vector<mlx::core::array>& inputs,
    fa::DType* dtype);

/// One launch: which kernel, with which parameters, over which grid.
struct NaLaunch {
  fa::DType dtype;
  int n_axes;
  int head_dim;
  fa::AttnTiles tiles; ///< choose_na_tiles for this backend
  fa::NaParams params;
  fa::NaGrid grid; ///< threadgroups: (grid.blocks, H, B)
};

/// The launch for q, k, v and the output as the kernel will read and write
/// them (their strides go into the parameters). `resident`: threadgroups
/// the device holds at once, for 1-D runs of tiles (fa::na_run_for; 0: a
/// tile a threadgroup); `run_override` > 0 forces the run length (tests).
NaLaunch na_launch(
    const NaSpec& spec,
    fa::Backend backend,
    fa::DType dtype,
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    const mlx::core::array& out,
    long long resident = 0,
    int run_override = 0);

} // namespace mlx_fused_attn::gpu
