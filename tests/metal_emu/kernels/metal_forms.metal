// Valid Metal, written as MLX's kernels write it, that stock clang reads
// only through the strict unit's rewrites (strict_check.strict_unit): a
// threadgroup array declared in the kernel (its bound on the next line too),
// an array parameter in constant memory, a vector declared by direct
// initialisation, methods qualified with an address space, and half
// literals. Checked by
// test_strict_check.py like every kernel here; not run in the emulator.
#include <metal_stdlib>

using namespace metal;

struct Counter {
  int n;
  Counter() thread : n(1) {}
  Counter() threadgroup : n(1) {}
  int get() const thread {
    return n;
  }
  int get() const device {
    return n;
  }
};

METAL_FUNC long sum2(constant const long strides[2]) {
  return strides[0] + strides[1];
}

[[kernel]] void metal_forms(
    device float* out [[buffer(0)]],
    constant long* strides [[buffer(1)]],
    uint lid [[thread_index_in_threadgroup]]) {
  threadgroup float shared[32];
  threadgroup float spread
      [32];
  short2 offset(lid % 4, lid / 4);
  Counter counter;
  shared[lid] = float(sum2(strides) + offset.x + offset.y + counter.get());
  spread[lid] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid] = shared[31 - lid] + spread[lid] * float(0.5h + 1e1h);
}
