// Runs one threadgroup: every thread is a fiber on this OS thread, and the
// fibers switch only where Metal threads synchronise (threadgroup barriers and
// simdgroup operations). Which runnable thread goes next is the schedule:
// fair (round robin) or adversarial (seeded random priorities, redrawn at
// barriers and at random synchronisation points, so one thread or simdgroup
// runs far ahead of the others and a missing barrier shows).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../include/metal_emu/runtime_api.h"
#include "fiber.h"
#include "race.h"
#include "thread_state.h"

namespace fa_emu {

struct Schedule {
  bool adversarial;
  uint64_t seed;
};

class Scheduler {
 public:
  /// `describe` names the kernel and threadgroup in error reports.
  Scheduler(const unsigned tg_size[3], std::size_t stack_bytes);

  /// Runs body(thread) for every thread of one threadgroup to completion.
  void run(
      void (*body)(const ThreadState&),
      const Schedule& schedule,
      const std::string& describe);

 private:
  struct SimdRendezvous {
    unsigned arrived = 0;
    Combine combine = nullptr;
    Site site{};
    void* args[32] = {};
    // A lane that has left one rendezvous may reach the next before a slow
    // lane has acquired the first; alternating objects keep them apart.
    unsigned episode = 0;
    SyncPoint sync[2];
  };

  friend void rendezvous_simdgroup(Combine, void*, Site);
  friend void rendezvous_threadgroup(Site);
  friend unsigned current_lane();
  friend void collective_error(const char*);
  friend const ThreadState& current_thread();

  static void fiber_main(void* self);
  ThreadState* pick();
  void block(ThreadState& t, ThreadState::Wait wait, Site site);
  void wake(ThreadState& t);
  void after_release(ThreadState& t);
  uint64_t random();
  unsigned simdgroup_size(unsigned sg) const;
  [[noreturn]] void report(const std::string& message) const;
  std::string describe_waiters() const;

  unsigned n_threads_;
  std::vector<ThreadState> threads_;
  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::vector<SimdRendezvous> simd_;
  unsigned barrier_arrived_ = 0;
  Site barrier_site_{};
  unsigned barrier_episode_ = 0;
  SyncPoint barrier_sync_[2];
  SyncPoint group_start_;
  SyncPoint threads_done_;
  unsigned n_done_ = 0;
  unsigned last_picked_ = 0;
  ThreadState* current_ = nullptr;
  const SimdRendezvous* combining_ = nullptr;
  void (*body_)(const ThreadState&) = nullptr;
  Schedule schedule_{};
  uint64_t rng_ = 0;
  std::string describe_;
};

} // namespace fa_emu
