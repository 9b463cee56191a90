#include "mlx_fused_attn/backend/na_launch.h"

#include <cstdint>
#include <limits>
#include <sstream>

#include "mlx/utils.h"
#include "mlx_fused_attn/backend/na_params_fill.h"
#include "mlx_fused_attn/kernels/na_config.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

Support na_kernel_covers(
    const char* op,
    const std::vector<mx::array>& inputs,
    fa::DType* dtype) {
  const mx::array& q = inputs[0];
  const mx::array& v = inputs[2];
  std::ostringstream msg;
  msg << op;
  if (q.dtype() == mx::float16) {
    *dtype = fa::DType::Float16;
  } else if (q.dtype() == mx::bfloat16) {
    *dtype = fa::DType::BFloat16;
  } else if (q.dtype() == mx::float32) {
    *dtype = fa::DType::Float32;
  } else {
    msg << "no kernel for dtype " << q.dtype()
        << " (float16, bfloat16 and float32 have one)";
    return Support::no(msg.str());
  }
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
  if (q.size() == 0) {
    msg << "empty input (nothing to launch)";
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

NaLaunch na_launch(
    const NaSpec& spec,
    fa::Backend backend,
    fa::DType dtype,
    const mx::array& q,
    const mx::array& k,
    const mx::array& v,
    const mx::array& out,
    long long resident,
    int run_override) {
  NaLaunch l{};
  l.dtype = dtype;
  l.n_axes = spec.n_axes;
  l.head_dim = q.shape(-1);
  l.tiles = fa::choose_na_tiles(l.head_dim, dtype, backend, spec.n_axes);
  l.params = na_params(spec, q, k, v, out);
  l.grid = fa::na_choose_grid(
      spec.axes,
      spec.n_axes,
      l.tiles.warps,
      l.tiles.bq / l.tiles.warps,
      l.tiles.bk);
  l.grid = fa::na_run_for(
      l.grid,
      spec.axes,
      spec.n_axes,
      l.tiles.bk,
      l.tiles.stages,
      static_cast<fa::stride_t>(l.params.B) * l.params.H,
      resident,
      run_override);
  return l;
}

} // namespace mlx_fused_attn::gpu
