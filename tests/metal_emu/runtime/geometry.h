// The shape of the running dispatch, for the kernels' builtin arguments.
#pragma once

namespace fa_emu {

struct LaunchGeometry {
  unsigned grid[3]; ///< threadgroups per grid
  unsigned group[3]; ///< threads per threadgroup
  unsigned group_pos[3]; ///< of the threadgroup running now
};

const LaunchGeometry& geometry();

} // namespace fa_emu
