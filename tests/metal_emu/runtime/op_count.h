// Counts the synchronising operations of one launch (FA_EMU_COUNT, the
// counting build): each simdgroup function and simdgroup_matrix load, store
// and multiply once per simdgroup that performs it (not per lane), and each
// threadgroup_barrier once per threadgroup that passes it, by operation
// name. The scheduler calls count_op where the operation completes: as the
// last lane of the simdgroup (or thread of the threadgroup) arrives. In the
// ordinary builds these are no-ops.
#pragma once

namespace fa_emu {

#if defined(FA_EMU_COUNT)
/// One completed operation named `op` (the shim's Site::op).
void count_op(const char* op);
/// Writes one line per operation name that occurred: `NAME COUNT`.
void write_op_counts(const char* path);
#else
inline void count_op(const char*) {}
inline void write_op_counts(const char*) {}
#endif

} // namespace fa_emu
