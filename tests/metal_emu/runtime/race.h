// Happens-before edges for the race-checking build (FA_EMU_TSAN: kernels
// under ThreadSanitizer, each Metal thread a TSan fiber, switches between
// fibers creating no order). The runtime adds exactly the order Metal
// guarantees: a barrier orders everything its threads did before it before
// everything they do after it, and so does a simdgroup operation for the
// lanes of its simdgroup. Any two accesses to one location, one a write,
// that these edges leave unordered are then reported. Threadgroups run one
// after another and are ordered too (their threadgroup arrays share
// addresses), so races between threadgroups are left to the adversarial
// schedule, which runs them in a random order. In the ordinary build these
// are no-ops.
#pragma once

#if defined(FA_EMU_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace fa_emu {

/// A synchronisation object: its address is what TSan keys on.
struct SyncPoint {
  char unused;
};

inline void race_release(SyncPoint& s) {
#if defined(FA_EMU_TSAN)
  __tsan_release(&s);
#else
  (void)s;
#endif
}

inline void race_acquire(SyncPoint& s) {
#if defined(FA_EMU_TSAN)
  __tsan_acquire(&s);
#else
  (void)s;
#endif
}

} // namespace fa_emu
