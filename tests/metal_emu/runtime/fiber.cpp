#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define FA_EMU_ASAN 1
#else
#define FA_EMU_ASAN 0
#endif

#if defined(FA_EMU_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

#if !defined(__x86_64__)
#error "the Metal emulator's context switch is written for x86-64"
#endif

// Saves the callee-saved registers and the SSE/x87 control words of the
// caller on its stack, stores the stack pointer in *save, and continues
// from the stack `load` was saved on.
extern "C" void fa_emu_switch_context(void** save, void* load);
asm(R"(
  .text
  .globl fa_emu_switch_context
  .type fa_emu_switch_context,@function
fa_emu_switch_context:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size fa_emu_switch_context, .-fa_emu_switch_context
)");

namespace fa_emu {

namespace {

Fiber* g_starting = nullptr;

} // namespace

Fiber::Fiber(std::size_t stack_bytes) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  // One inaccessible page below the stack turns an overflow into a fault.
  mapping_bytes_ = stack_bytes_ + page;
  map_stack();
}

void Fiber::map_stack() {
  const std::size_t page = mapping_bytes_ - stack_bytes_;
  mapping_ = mmap(
      nullptr,
      mapping_bytes_,
      PROT_READ | PROT_WRITE,
      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
      -1,
      0);
  if (mapping_ == MAP_FAILED) {
    std::fprintf(stderr, "metal_emu: cannot map a fiber stack\n");
    std::_Exit(2);
  }
  mprotect(mapping_, page, PROT_NONE);
  stack_lo_ = static_cast<char*>(mapping_) + page;
}

Fiber::~Fiber() {
#if defined(FA_EMU_TSAN)
  if (race_fiber_ != nullptr) {
    __tsan_destroy_fiber(race_fiber_);
  }
#endif
  munmap(mapping_, mapping_bytes_);
}

void Fiber::reset(void (*fn)(void*), void* arg) {
  fn_ = fn;
  arg_ = arg;
  finished_ = false;
#if FA_EMU_ASAN
  // Frames of the previous run ended without unwinding their redzones.
  __asan_unpoison_memory_region(stack_lo_, stack_bytes_);
#endif
#if defined(FA_EMU_TSAN)
  // A fresh race-detector identity and a fresh stack (unmapping forgets
  // the old stack's accesses) per run: threads of different threadgroups
  // are unordered.
  if (race_fiber_ != nullptr) {
    __tsan_destroy_fiber(race_fiber_);
    munmap(mapping_, mapping_bytes_);
    map_stack();
  }
  race_fiber_ = __tsan_create_fiber(0);
#endif
  auto* top = reinterpret_cast<uint64_t*>(stack_lo_ + stack_bytes_);
  uint64_t* sp = top;
  *--sp = 0; // no return address: entry() never returns
  *--sp = reinterpret_cast<uint64_t>(&Fiber::entry);
  for (int i = 0; i < 6; ++i) {
    *--sp = 0; // rbp rbx r12 r13 r14 r15
  }
  *--sp = 0x037f00001f80ull; // default x87 control word, MXCSR
  fiber_sp_ = sp;
}

void Fiber::resume() {
  g_starting = this;
#if defined(FA_EMU_TSAN)
  race_scheduler_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(race_fiber_, __tsan_switch_to_fiber_no_sync);
#endif
#if FA_EMU_ASAN
  __sanitizer_start_switch_fiber(&scheduler_fake_stack_, stack_lo_, stack_bytes_);
#endif
  fa_emu_switch_context(&scheduler_sp_, fiber_sp_);
#if FA_EMU_ASAN
  __sanitizer_finish_switch_fiber(scheduler_fake_stack_, nullptr, nullptr);
#endif
}

void Fiber::yield() {
#if defined(FA_EMU_TSAN)
  __tsan_switch_to_fiber(race_scheduler_, __tsan_switch_to_fiber_no_sync);
#endif
#if FA_EMU_ASAN
  __sanitizer_start_switch_fiber(
      &fiber_fake_stack_, scheduler_stack_lo_, scheduler_stack_bytes_);
#endif
  fa_emu_switch_context(&fiber_sp_, scheduler_sp_);
#if FA_EMU_ASAN
  __sanitizer_finish_switch_fiber(
      fiber_fake_stack_, &scheduler_stack_lo_, &scheduler_stack_bytes_);
#endif
}

void Fiber::entry() {
  Fiber* self = g_starting;
#if FA_EMU_ASAN
  __sanitizer_finish_switch_fiber(
      nullptr, &self->scheduler_stack_lo_, &self->scheduler_stack_bytes_);
#endif
  self->fn_(self->arg_);
  self->exit_to_scheduler();
}

void Fiber::exit_to_scheduler() {
  finished_ = true;
#if defined(FA_EMU_TSAN)
  __tsan_switch_to_fiber(race_scheduler_, __tsan_switch_to_fiber_no_sync);
#endif
#if FA_EMU_ASAN
  // A null save slot tells the sanitizer this stack is done with.
  __sanitizer_start_switch_fiber(
      nullptr, scheduler_stack_lo_, scheduler_stack_bytes_);
#endif
  void* unused;
  fa_emu_switch_context(&unused, scheduler_sp_);
  __builtin_unreachable();
}

} // namespace fa_emu
