// A fiber: a function running on its own stack, switched to and from the
// scheduler by hand (a register save/restore, no system call), so that a
// simdgroup rendezvous costs a few nanoseconds rather than a sigprocmask.
#pragma once

#include <cstddef>

namespace fa_emu {

class Fiber {
 public:
  explicit Fiber(std::size_t stack_bytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  /// Makes the next resume() start fn(arg) afresh at the top of the stack.
  void reset(void (*fn)(void*), void* arg);
  /// From the scheduler: runs the fiber until it yields or its function ends.
  void resume();
  /// From inside the fiber: returns to the scheduler's resume() call.
  void yield();
  bool finished() const {
    return finished_;
  }

 private:
  static void entry();
  void map_stack();
  [[noreturn]] void exit_to_scheduler();

  void* mapping_;
  std::size_t mapping_bytes_;
  char* stack_lo_;
  std::size_t stack_bytes_;
  void* fiber_sp_ = nullptr;
  void* scheduler_sp_ = nullptr;
  void (*fn_)(void*) = nullptr;
  void* arg_ = nullptr;
  bool finished_ = true;
  // Sanitizer bookkeeping for the stack switch.
  void* race_fiber_ = nullptr;
  void* race_scheduler_ = nullptr;
  void* fiber_fake_stack_ = nullptr;
  void* scheduler_fake_stack_ = nullptr;
  const void* scheduler_stack_lo_ = nullptr;
  std::size_t scheduler_stack_bytes_ = 0;
};

} // namespace fa_emu
