// The calls from the shim into the emulator's runtime: everything a kernel
// does that involves other threads goes through here. The runtime runs each
// thread of a threadgroup as a fiber; these calls suspend the calling fiber
// until its partners arrive.
#pragma once

namespace fa_emu {

/// Where a kernel called a synchronising operation, for error reports.
struct Site {
  const char* op;
  const char* file;
  unsigned line;
};

/// Computes the results of one simdgroup operation once every lane has
/// arrived: `lane_args[i]` is what lane i passed (it points into that lane's
/// suspended stack frame), for i < n_lanes.
typedef void (*Combine)(void* const* lane_args, unsigned n_lanes);

/// Suspends the calling lane until all lanes of its simdgroup have called
/// rendezvous_simdgroup with the same combine function and site; the last one
/// to arrive runs `combine`. A lane that goes elsewhere is reported.
void rendezvous_simdgroup(Combine combine, void* arg, Site site);

/// threadgroup_barrier: suspends until every thread of the threadgroup
/// arrives at the same barrier.
void rendezvous_threadgroup(Site site);

/// The calling thread's index in its simdgroup.
unsigned current_lane();

/// Called from a Combine function: reports a misuse of the simdgroup
/// operation in progress (named with its site) and ends the launch.
[[noreturn]] void collective_error(const char* message);

} // namespace fa_emu
