// Must fail the strict pass: every line marked MIXES passes memory of one
// address space where Metal expects another.
#include <metal_stdlib>

using namespace metal;

void scale_device(device float* p, float s) {
  p[0] *= s;
}

void scale_threadgroup(threadgroup float* p, float s) {
  p[0] *= s;
}

struct Box {
  float v;
  float get() const thread {
    return v;
  }
  float peek() const threadgroup {
    return v;
  }
};

[[kernel]] void mix(
    device float* out [[buffer(0)]],
    constant float* table [[buffer(1)]],
    device Box* boxes [[buffer(2)]],
    uint tid [[thread_index_in_threadgroup]]) {
  FA_SHARED_ARRAY_DECL float scratch[32];
  float local[8];
  scale_device(scratch, 2.0f); // MIXES threadgroup -> device
  scale_threadgroup(out, 2.0f); // MIXES device -> threadgroup
  scale_device(table, 2.0f); // MIXES constant -> device
  scale_device(local, 2.0f); // MIXES thread -> device
  simdgroup_float8x8 m;
  simdgroup_load(m, local); // MIXES thread -> device or threadgroup
  Box box = {1.0f};
  out[0] = boxes[0].get(); // MIXES device object -> thread method
  out[1] = box.peek(); // MIXES thread object -> threadgroup method
  out[tid] = scratch[tid] + local[tid % 8];
}
