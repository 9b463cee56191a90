// Counts the memory traffic of one launch (FA_EMU_COUNT: the kernel
// translation unit compiled with -fsanitize=thread, whose per-access hooks
// load_count.cpp defines in place of ThreadSanitizer's runtime). Per bound
// buffer it counts the bytes every thread reads and writes, and the distinct
// bytes each threadgroup reads, summed over threadgroups: what a kernel that
// reads each byte once per threadgroup costs in memory traffic. Accesses to
// threadgroup memory (the FA_SHARED_ARRAY_DECL arrays and [[threadgroup(n)]]
// buffers) are summed apart, read and written. In the ordinary builds these
// are no-ops.
#pragma once

#include <cstdint>

namespace fa_emu {

#if defined(FA_EMU_COUNT)
void count_buffer(unsigned index, const void* data, uint64_t size);
void count_threadgroup_memory(const void* data, uint64_t size);
void count_threadgroup_begins();
/// Writes one line per buffer, `buffer INDEX READ DISTINCT WRITTEN` (bytes
/// read, distinct bytes read per threadgroup summed, bytes written), then
/// `threadgroup READ WRITTEN` (bytes, all threadgroups).
void write_load_counts(const char* path);
#else
inline void count_buffer(unsigned, const void*, uint64_t) {}
inline void count_threadgroup_memory(const void*, uint64_t) {}
inline void count_threadgroup_begins() {}
inline void write_load_counts(const char*) {}
#endif

} // namespace fa_emu
