// What the scheduler knows about one thread of the running threadgroup.
#pragma once

#include <cstdint>

#include "../include/metal_emu/runtime_api.h"

namespace fa_emu {

struct ThreadState {
  unsigned pos[3]; ///< thread_position_in_threadgroup
  unsigned index; ///< thread_index_in_threadgroup
  unsigned lane; ///< thread_index_in_simdgroup
  unsigned simdgroup; ///< simdgroup_index_in_threadgroup
  enum class Wait { Runnable, Barrier, Simdgroup, Done } wait;
  Site site; ///< where it waits
  uint64_t priority;
};

/// The thread the calling fiber runs, for the kernel's builtin arguments.
const ThreadState& current_thread();

} // namespace fa_emu
