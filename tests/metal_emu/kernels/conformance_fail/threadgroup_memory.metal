// Must fail the conformance pass with [threadgroup-memory] only: one
// instantiation of a template kernel declares 2 * 4608 * 4 = 36864 bytes of
// threadgroup memory, over Metal's 32768; the other fits.
#include <metal_stdlib>

using namespace metal;

template <typename T, int N>
[[kernel]] void stage( // FORBIDDEN
    device T* out [[buffer(0)]],
    uint tid [[thread_index_in_threadgroup]]) {
  FA_SHARED_ARRAY_DECL T a[N];
  FA_SHARED_ARRAY_DECL T b[N];
  a[tid] = out[tid];
  b[tid] = a[tid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = b[(tid + 1) % N];
}

template [[host_name("stage_float_4608")]] [[kernel]] decltype(stage<float, 4608>)
    stage<float, 4608>;
template [[host_name("stage_half_4608")]] [[kernel]] decltype(stage<half, 4608>)
    stage<half, 4608>;
