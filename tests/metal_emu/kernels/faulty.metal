// Kernels with the bugs the emulator must catch. Each one is launched by a
// negative test in test_emulator.py that expects the matching report.
#include <metal_stdlib>

using namespace metal;

// Only half the threadgroup reaches the barrier.
[[kernel]] void divergent_barrier(
    device float* out [[buffer(0)]],
    uint tid [[thread_index_in_threadgroup]]) {
  if (tid < 16) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  out[tid] = 1.0f;
}

// Half the simdgroup skips the reduction.
[[kernel]] void divergent_simd_sum(
    device float* out [[buffer(0)]],
    ushort lane [[thread_index_in_simdgroup]]) {
  float v = float(lane);
  if (lane < 16) {
    v = simd_sum(v);
  }
  out[lane] = v;
}

// The two halves of the simdgroup call different shuffles.
[[kernel]] void mismatched_shuffles(
    device float* out [[buffer(0)]],
    ushort lane [[thread_index_in_simdgroup]]) {
  const float v = float(lane);
  out[lane] = lane < 16 ? simd_shuffle_xor(v, ushort(1))
                        : simd_shuffle_down(v, ushort(1));
}

// The last thread writes one element past the end of `out`.
[[kernel]] void write_past_end(
    device float* out [[buffer(0)]],
    uint gid [[thread_position_in_grid]]) {
  out[gid + (gid == 31 ? 1 : 0)] = 1.0f;
}

// Reads one element past a threadgroup array.
[[kernel]] void read_past_threadgroup_array(
    device float* out [[buffer(0)]],
    uint tid [[thread_index_in_threadgroup]]) {
  FA_SHARED_ARRAY_DECL float scratch[32];
  scratch[tid] = float(tid);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = scratch[tid + 1];
}

// The same through a pointer, as kernels pass threadgroup arrays around.
[[kernel]] void read_past_threadgroup_pointer(
    device float* out [[buffer(0)]],
    uint tid [[thread_index_in_threadgroup]]) {
  FA_SHARED_ARRAY_DECL float scratch[32];
  threadgroup float* p = scratch;
  p[tid] = float(tid);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = p[tid + 1];
}

// Reads threadgroup memory that no thread wrote.
[[kernel]] void read_unwritten_threadgroup_memory(
    device float* out [[buffer(0)]],
    uint tid [[thread_index_in_threadgroup]]) {
  FA_SHARED_ARRAY_DECL float scratch[64];
  scratch[tid] = float(tid);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = scratch[tid + 32];
}

// Lanes pass different pointers to one simdgroup_load.
[[kernel]] void nonuniform_load(
    const device float* src [[buffer(0)]],
    device float* out [[buffer(1)]],
    ushort lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, src + (lane == 5 ? 8 : 0));
  simdgroup_store(m, out);
}

// Every threadgroup writes the same elements: the result depends on which
// threadgroup runs last.
[[kernel]] void overlapping_threadgroups(
    device uint* out [[buffer(0)]],
    uint tid [[thread_index_in_threadgroup]],
    uint group [[threadgroup_position_in_grid]]) {
  out[tid] = group;
}

// Thread-private storage far beyond the fiber stack.
[[kernel]] void huge_private_array(
    device float* out [[buffer(0)]],
    uint tid [[thread_index_in_threadgroup]]) {
  float big[200000];
  for (uint i = 0; i < 200000; i += 1000) {
    big[i] = float(i + tid);
  }
  out[tid] = big[tid * 1000];
}
