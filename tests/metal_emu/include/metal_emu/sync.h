// threadgroup_barrier and simdgroup_barrier. Both are rendezvous in the
// emulator whatever the memory flags: every thread of the threadgroup (or
// lane of the simdgroup) must reach the same barrier, or the runtime reports
// which threads wait where.
#pragma once

#include "plant.h"
#include "runtime_api.h"
#include "simd.h"

namespace metal {

enum class mem_flags : unsigned {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4,
  mem_threadgroup_imageblock = 8,
  mem_object_data = 16,
};

constexpr mem_flags operator|(mem_flags a, mem_flags b) {
  return mem_flags(unsigned(a) | unsigned(b));
}

inline void threadgroup_barrier(mem_flags, FA_EMU_SITE()) {
#if FA_EMU_PLANT == FA_EMU_PLANT_BARRIER_NO_WAIT
  (void)fa_emu_file;
  (void)fa_emu_line;
  return;
#endif
  ::fa_emu::rendezvous_threadgroup(FA_EMU_HERE("threadgroup_barrier"));
}

namespace emu {
struct BarrierOnly {
  template <class T>
  static void combine(void* const*, unsigned) {}
};
} // namespace emu

inline void simdgroup_barrier(mem_flags, FA_EMU_SITE()) {
  ::fa_emu::rendezvous_simdgroup(
      &emu::BarrierOnly::combine<void>,
      nullptr,
      FA_EMU_HERE("simdgroup_barrier"));
}

} // namespace metal
