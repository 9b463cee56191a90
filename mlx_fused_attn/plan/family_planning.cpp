#include "mlx_fused_attn/plan/family_planning.h"

#include <algorithm>
#include <sstream>

#include "mlx_fused_attn/kernels/attention_kernel_name.h"
#include "mlx_fused_attn/plan/kernel_switches.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn {

Support grid_fits(const PlanTarget& target, const fa::AttnParams& p) {
  const int most = target.caps.max_grid_yz;
  if (most == 0 || (p.B <= most && p.H_q <= most)) {
    return Support::yes();
  }
  std::ostringstream msg;
  msg << target.op << "batch " << p.B << " or query heads " << p.H_q
      << " over the grid limit of " << most;
  return Support::no(msg.str());
}

Support smem_fits(
    const PlanTarget& target,
    const char* kernel,
    const fa::AttnParams& p,
    fa::DType dtype,
    const LaunchGrid& grid) {
  const int allowed = target.caps.max_smem_bytes;
  if (allowed == 0 || grid.smem_bytes <= allowed) {
    return Support::yes();
  }
  std::ostringstream msg;
  msg << target.op << "the " << kernel << " for head dims " << p.D
      << " (q, k) and " << p.D_v << " (v) and " << fa::dtype_name(dtype)
      << " needs " << grid.smem_bytes
      << " bytes of shared memory a block; this GPU allows " << allowed;
  return Support::no(msg.str());
}

Support family_built(const DeviceCaps& caps, KernelFamily family) {
  const std::string* reason = caps.unavailable_reason(family);
  return reason == nullptr ? Support::yes() : Support::no(*reason);
}

Support family_switched_on(KernelFamily family) {
  const std::string variable = family_switch_variable(family_name(family));
  if (kernel_switch_on(variable.c_str())) {
    return Support::yes();
  }
  return Support::no(
      std::string(family_name(family)) + " kernel family: off (" + variable +
      "=0)");
}

int key_splits_of(
    const PlanHint& hint,
    const fa::AttnParams& p,
    const fa::AttnTiles& tiles,
    int64_t kv_bytes_a_key,
    int64_t wave,
    int cores) {
  if (!split_keys_enabled()) {
    return 1;
  }
  const int64_t groups = int64_t(blocks_of(p.L_q, tiles.bq)) * p.H_q * p.B;
  int64_t most = splits_worth_their_partials_of(
      p.L_k, std::min(tiles.bq, p.L_q), p.D_v, kv_bytes_a_key,
      // A grid with a block on every other multiprocessor gains less.
      2 * groups >= cores ? 16 : 8);
  if (hint.max_key_splits > 0) {
    most = std::min<int64_t>(most, hint.max_key_splits);
  }
  return key_split_count(
      groups, wave, static_cast<int>(blocks_of(p.L_k, tiles.bk)), most);
}

int key_splits(
    const PlanHint& hint,
    const fa::AttnParams& p,
    const fa::AttnTiles& tiles,
    fa::DType dtype,
    int cores) {
  return key_splits_of(
      hint, p, tiles, int64_t(p.D + p.D_v) * fa::dtype_size(dtype),
      int64_t(tiles.min_blocks) * cores, cores);
}

} // namespace mlx_fused_attn
