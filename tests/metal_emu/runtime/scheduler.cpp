#include "scheduler.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "op_count.h"
#include "splitmix.h"

namespace fa_emu {

namespace {

Scheduler* g_scheduler = nullptr;

bool same_site(const Site& a, const Site& b) {
  return a.line == b.line && std::strcmp(a.op, b.op) == 0 &&
      std::strcmp(a.file, b.file) == 0;
}

std::string site_text(const Site& s) {
  return std::string(s.op) + " at " + s.file + ":" + std::to_string(s.line);
}

} // namespace

Scheduler::Scheduler(const unsigned tg_size[3], std::size_t stack_bytes)
    : n_threads_(tg_size[0] * tg_size[1] * tg_size[2]),
      threads_(n_threads_),
      simd_((n_threads_ + 31) / 32) {
  for (unsigned i = 0; i < n_threads_; ++i) {
    ThreadState& t = threads_[i];
    t.index = i;
    t.pos[0] = i % tg_size[0];
    t.pos[1] = i / tg_size[0] % tg_size[1];
    t.pos[2] = i / (tg_size[0] * tg_size[1]);
    t.lane = i % 32;
    t.simdgroup = i / 32;
    fibers_.emplace_back(new Fiber(stack_bytes));
  }
}

unsigned Scheduler::simdgroup_size(unsigned sg) const {
  const unsigned rest = n_threads_ - sg * 32;
  return rest < 32 ? rest : 32;
}

uint64_t Scheduler::random() {
  return splitmix64(rng_);
}

void Scheduler::fiber_main(void* arg) {
  ThreadState& t = *static_cast<ThreadState*>(arg);
  Scheduler& s = *g_scheduler;
  race_acquire(s.group_start_);
  s.body_(t);
  race_release(s.threads_done_);
  t.wait = ThreadState::Wait::Done;
  ++s.n_done_;
}


void Scheduler::run(
    void (*body)(const ThreadState&),
    const Schedule& schedule,
    const std::string& describe) {
  g_scheduler = this;
  body_ = body;
  schedule_ = schedule;
  rng_ = schedule.seed;
  describe_ = describe;
  n_done_ = 0;
  barrier_arrived_ = 0;
  last_picked_ = n_threads_ - 1;
  for (SimdRendezvous& r : simd_) {
    r.arrived = 0;
  }
  for (unsigned i = 0; i < n_threads_; ++i) {
    threads_[i].wait = ThreadState::Wait::Runnable;
    threads_[i].priority = random();
    fibers_[i]->reset(&Scheduler::fiber_main, &threads_[i]);
  }
  race_release(group_start_);
  while (n_done_ < n_threads_) {
    ThreadState* next = pick();
    if (next == nullptr) {
      report("deadlock: no thread can run.\n" + describe_waiters());
    }
    current_ = next;
    fibers_[next->index]->resume();
    current_ = nullptr;
  }
  // The next threadgroup reuses the threadgroup arrays, which the runtime
  // re-poisons in between: order this threadgroup before both.
  race_acquire(threads_done_);
  g_scheduler = nullptr;
}

ThreadState* Scheduler::pick() {
  if (!schedule_.adversarial) {
    for (unsigned k = 1; k <= n_threads_; ++k) {
      const unsigned i = (last_picked_ + k) % n_threads_;
      if (threads_[i].wait == ThreadState::Wait::Runnable) {
        last_picked_ = i;
        return &threads_[i];
      }
    }
    return nullptr;
  }
  ThreadState* best = nullptr;
  for (ThreadState& t : threads_) {
    if (t.wait == ThreadState::Wait::Runnable &&
        (best == nullptr || t.priority > best->priority)) {
      best = &t;
    }
  }
  return best;
}

void Scheduler::block(ThreadState& t, ThreadState::Wait wait, Site site) {
  t.wait = wait;
  t.site = site;
  if (schedule_.adversarial && random() % 8 == 0) {
    t.priority = random();
  }
  fibers_[t.index]->yield();
}

void Scheduler::wake(ThreadState& t) {
  t.wait = ThreadState::Wait::Runnable;
}

// The thread that completed a rendezvous may run on, or, under an
// adversarial schedule, give way to whichever thread now ranks highest.
void Scheduler::after_release(ThreadState& t) {
  if (schedule_.adversarial) {
    fibers_[t.index]->yield();
  }
}

std::string Scheduler::describe_waiters() const {
  std::string out;
  unsigned i = 0;
  while (i < n_threads_) {
    const ThreadState& a = threads_[i];
    unsigned j = i + 1;
    while (j < n_threads_ && threads_[j].wait == a.wait &&
           (a.wait == ThreadState::Wait::Done ||
            a.wait == ThreadState::Wait::Runnable ||
            same_site(threads_[j].site, a.site))) {
      ++j;
    }
    out += "  threads " + std::to_string(i) + "-" + std::to_string(j - 1) + ": ";
    switch (a.wait) {
      case ThreadState::Wait::Done:
        out += "returned from the kernel";
        break;
      case ThreadState::Wait::Runnable:
        out += "runnable";
        break;
      case ThreadState::Wait::Barrier:
      case ThreadState::Wait::Simdgroup:
        out += "wait at " + site_text(a.site);
        break;
    }
    out += "\n";
    i = j;
  }
  return out;
}

void Scheduler::report(const std::string& message) const {
  std::fprintf(
      stderr,
      "metal_emu error in %s: %s\n",
      describe_.c_str(),
      message.c_str());
  std::fflush(stderr);
  std::_Exit(3);
}

void rendezvous_simdgroup(Combine combine, void* arg, Site site) {
  Scheduler& s = *g_scheduler;
  ThreadState& t = *s.current_;
  Scheduler::SimdRendezvous& r = s.simd_[t.simdgroup];
  if (r.arrived == 0) {
    r.combine = combine;
    r.site = site;
  } else if (r.combine != combine || !same_site(r.site, site)) {
    s.report(
        "simdgroup " + std::to_string(t.simdgroup) + " diverged: lane " +
        std::to_string(t.lane) + " reached " + site_text(site) +
        " while other lanes wait at " + site_text(r.site) +
        " (every lane must make the same simdgroup calls).\n" +
        s.describe_waiters());
  }
  r.args[t.lane] = arg;
  SyncPoint& sync = r.sync[r.episode & 1];
  race_release(sync);
  if (++r.arrived < s.simdgroup_size(t.simdgroup)) {
    s.block(t, ThreadState::Wait::Simdgroup, site);
    race_acquire(sync);
    return;
  }
  race_acquire(sync);
  count_op(site.op);
  s.combining_ = &r;
  combine(r.args, r.arrived);
  s.combining_ = nullptr;
  race_release(sync);
  r.arrived = 0;
  ++r.episode;
  const unsigned first = t.simdgroup * 32;
  for (unsigned i = first; i < first + s.simdgroup_size(t.simdgroup); ++i) {
    s.wake(s.threads_[i]);
  }
  s.after_release(t);
}

void rendezvous_threadgroup(Site site) {
  Scheduler& s = *g_scheduler;
  ThreadState& t = *s.current_;
  if (s.barrier_arrived_ == 0) {
    s.barrier_site_ = site;
  } else if (!same_site(s.barrier_site_, site)) {
    s.report(
        "thread " + std::to_string(t.index) + " reached " + site_text(site) +
        " while other threads wait at " + site_text(s.barrier_site_) +
        " (every thread must reach the same barrier).\n" +
        s.describe_waiters());
  }
  SyncPoint& sync = s.barrier_sync_[s.barrier_episode_ & 1];
  race_release(sync);
  if (++s.barrier_arrived_ < s.n_threads_) {
    s.block(t, ThreadState::Wait::Barrier, site);
    race_acquire(sync);
    return;
  }
  race_acquire(sync);
  count_op(site.op);
  s.barrier_arrived_ = 0;
  ++s.barrier_episode_;
  for (ThreadState& o : s.threads_) {
    s.wake(o);
    if (s.schedule_.adversarial) {
      o.priority = s.random();
    }
  }
  s.after_release(t);
}

unsigned current_lane() {
  return g_scheduler->current_->lane;
}

const ThreadState& current_thread() {
  return *g_scheduler->current_;
}

void collective_error(const char* message) {
  const Scheduler& s = *g_scheduler;
  s.report(
      site_text(s.combining_->site) + " (simdgroup " +
      std::to_string(s.current_->simdgroup) + "): " + message);
}

} // namespace fa_emu
