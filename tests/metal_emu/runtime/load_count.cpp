// The access hooks g++'s -fsanitize=thread instrumentation calls, defined
// here instead of linking ThreadSanitizer: each one attributes the access to
// the bound buffer or the threadgroup memory that holds it (stack and
// parameter memory, a thread's own, match neither and are ignored). See
// load_count.h.
#include "load_count.h"

#if defined(FA_EMU_COUNT)

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace fa_emu {

namespace {

struct Counted {
  unsigned index;
  uintptr_t begin;
  uintptr_t end;
  uint64_t read = 0;
  uint64_t distinct = 0;
  uint64_t written = 0;
  // The threadgroup that last read each byte, so a byte counts once per
  // threadgroup in `distinct`.
  std::vector<uint32_t> last_reader;
};

struct Region {
  uintptr_t begin;
  uintptr_t end;
};

std::vector<Counted> g_counted;
std::vector<Region> g_threadgroup_memory;
uint64_t g_threadgroup_read = 0;
uint64_t g_threadgroup_written = 0;
uint32_t g_threadgroup = 0;

bool in_threadgroup_memory(uintptr_t a) {
  for (const Region& r : g_threadgroup_memory) {
    if (a >= r.begin && a < r.end) {
      return true;
    }
  }
  return false;
}

Counted* holder(uintptr_t a) {
  for (Counted& c : g_counted) {
    if (a >= c.begin && a < c.end) {
      return &c;
    }
  }
  return nullptr;
}

void on_read(const void* p, uint64_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  Counted* c = holder(a);
  if (c == nullptr) {
    if (in_threadgroup_memory(a)) {
      g_threadgroup_read += n;
    }
    return;
  }
  c->read += n;
  for (uint64_t i = 0; i < n && a + i < c->end; ++i) {
    uint32_t& last = c->last_reader[a + i - c->begin];
    if (last != g_threadgroup) {
      last = g_threadgroup;
      ++c->distinct;
    }
  }
}

void on_write(const void* p, uint64_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  Counted* c = holder(a);
  if (c != nullptr) {
    c->written += n;
  } else if (in_threadgroup_memory(a)) {
    g_threadgroup_written += n;
  }
}

} // namespace

void count_buffer(unsigned index, const void* data, uint64_t size) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(data);
  Counted c{index, a, a + size};
  c.last_reader.assign(size, 0);
  g_counted.push_back(std::move(c));
}

void count_threadgroup_memory(const void* data, uint64_t size) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(data);
  g_threadgroup_memory.push_back(Region{a, a + size});
}

void count_threadgroup_begins() {
  ++g_threadgroup;
}

void write_load_counts(const char* path) {
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    std::fprintf(stderr, "metal_emu: cannot write %s\n", path);
    std::_Exit(2);
  }
  for (const Counted& c : g_counted) {
    std::fprintf(
        f,
        "buffer %u %llu %llu %llu\n",
        c.index,
        static_cast<unsigned long long>(c.read),
        static_cast<unsigned long long>(c.distinct),
        static_cast<unsigned long long>(c.written));
  }
  std::fprintf(
      f,
      "threadgroup %llu %llu\n",
      static_cast<unsigned long long>(g_threadgroup_read),
      static_cast<unsigned long long>(g_threadgroup_written));
  std::fclose(f);
}

} // namespace fa_emu

// The instrumentation's entry points (GCC's TSan ABI). Function entry and
// exit, initialisation and virtual-pointer checks carry no memory traffic.
extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

#define FA_EMU_ACCESS(n)                                                  \
  void __tsan_read##n(void* p) { fa_emu::on_read(p, n); }                 \
  void __tsan_unaligned_read##n(void* p) { fa_emu::on_read(p, n); }       \
  void __tsan_volatile_read##n(void* p) { fa_emu::on_read(p, n); }        \
  void __tsan_write##n(void* p) { fa_emu::on_write(p, n); }               \
  void __tsan_unaligned_write##n(void* p) { fa_emu::on_write(p, n); }     \
  void __tsan_volatile_write##n(void* p) { fa_emu::on_write(p, n); }
FA_EMU_ACCESS(1)
FA_EMU_ACCESS(2)
FA_EMU_ACCESS(4)
FA_EMU_ACCESS(8)
FA_EMU_ACCESS(16)
#undef FA_EMU_ACCESS

// Kernels use no atomics (the emulator has none); what reaches these is the
// compiler's guard of a function-local static, which is not device memory.
#define FA_EMU_ATOMIC(bits, type)                                         \
  type __tsan_atomic##bits##_load(const volatile type* a, int) {          \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                          \
  }                                                                       \
  void __tsan_atomic##bits##_store(volatile type* a, type v, int) {       \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                             \
  }
FA_EMU_ATOMIC(8, unsigned char)
FA_EMU_ATOMIC(16, unsigned short)
FA_EMU_ATOMIC(32, unsigned int)
FA_EMU_ATOMIC(64, unsigned long long)
#undef FA_EMU_ATOMIC

void __tsan_read_range(void* p, unsigned long n) { fa_emu::on_read(p, n); }
void __tsan_write_range(void* p, unsigned long n) { fa_emu::on_write(p, n); }
}

#endif
