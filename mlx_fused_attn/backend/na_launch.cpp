#include "mlx_fused_attn/backend/na_launch.h"

#include <cstdint>
#include <limits>
#include <sstream>

#include "mlx/utils.h"
#include "mlx_fused_attn/backend/na_grid_choice.h"
#include "mlx_fused_attn/kernels/na_config.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

Support na_kernel_covers(
    const char* op,
    const std::vector<mx::array>& inputs,
    NaPlan& plan) {
  const mx::array& q = inputs[0];
  const mx::array& v = inputs[2];
  std::ostringstream msg;
  msg << op;
  const auto dtype = kernel_dtype(q.dtype());
  if (!dtype) {
    msg << "no kernel for dtype " << q.dtype()
        << " (float16, bfloat16 and float32 have one)";
    return Support::no(msg.str());
  }
  plan.dtype = *dtype;
  const int D = q.shape(-1);
  if (v.shape(-1) != D) {
    msg << "the kernel needs one head dim for q, k and v; got " << D
        << " for q and k and " << v.shape(-1) << " for v";
    return Support::no(msg.str());
  }
  if (!fa::na_head_dim_supported(D)) {
    msg << "no kernel for head dim " << D << " (";
#define FA_NA_LIST_HEAD_DIM(d) << d << " "
    msg FA_NA_HEAD_DIMS(FA_NA_LIST_HEAD_DIM);
#undef FA_NA_LIST_HEAD_DIM
    msg << "have one)";
    return Support::no(msg.str());
  }
  // Token and key indices are ints in the kernel.
  int64_t tokens = 1;
  for (int a = 1; a + 2 < static_cast<int>(q.ndim()); ++a) {
    tokens *= q.shape(a);
  }
  if (tokens > std::numeric_limits<int>::max()) {
    msg << tokens << " tokens per image; the kernel indexes them with int";
    return Support::no(msg.str());
  }
  return Support::yes();
}

void plan_na_launch(
    NaPlan& plan,
    fa::Backend backend,
    int sm_count,
    int run_override) {
  const NaSpec& spec = plan.spec;
  const fa::NaParams& p = plan.params;
  const fa::NaTiles tiles =
      fa::choose_na_tiles(p.D, plan.dtype, backend, spec.n_axes);
  plan.tiles = tiles;
  const long long resident =
      sm_count > 0 && fa::na_use_runs(p.D, plan.dtype, backend, spec.n_axes)
      ? static_cast<long long>(sm_count) * tiles.min_blocks
      : 0;
  fa::NaGrid g = fa::na_choose_grid(
      spec.axes, spec.n_axes, tiles.warps, tiles.warp_rows, tiles.key_block);
  g = fa::na_run_for(
      g,
      spec.axes,
      spec.n_axes,
      tiles.key_block,
      tiles.stages,
      static_cast<fa::stride_t>(p.B) * p.H,
      resident,
      run_override);
  plan.na_grid = g;
  plan.grid.x = static_cast<unsigned>(g.blocks);
  plan.grid.y = static_cast<unsigned>(p.H);
  plan.grid.z = static_cast<unsigned>(p.B);
  plan.grid.warps = tiles.warps;
}

} // namespace mlx_fused_attn::gpu
