// The declaration forms the trampoline generator must read: kernels and
// function constants inside namespaces, a host name on a plain kernel, a
// template kernel instantiated from another namespace (with a defaulted
// template argument, whose `=` is no initialiser), a buffer that exists
// only when a function constant says so, and combined attribute lists.
#include <metal_stdlib>

using namespace metal;

namespace demo {

constant bool has_bias [[function_constant(10)]];
constant float gain [[function_constant(11)]];
constant float double_gain = 2.0f * gain;

struct Scale {
  float factor;
  float apply(float x) const {
    return x * factor;
  }
};

// A default argument: its `=` must not be taken for an initialiser.
inline float add(float x, float y = 0.0f) {
  return x + y;
}

[[kernel, host_name("demo_axpb"), max_total_threads_per_threadgroup(64)]] void
axpb(
    const device float* x [[buffer(0)]],
    device float* y [[buffer(1)]],
    const device float* bias [[buffer(2), function_constant(has_bias)]],
    uint i [[thread_position_in_grid]]) {
  y[i] = add(Scale{double_gain}.apply(x[i]), has_bias ? bias[i] : 0.0f);
}

template <typename T, int Repeat, typename Step = T>
[[kernel]] void repeat(
    const device T* x [[buffer(0)]],
    device T* y [[buffer(1)]],
    uint i [[thread_position_in_grid]]) {
  for (int r = 0; r < Repeat; ++r) {
    y[i * Repeat + r] = x[i] + T(Step(r));
  }
}

} // namespace demo

template [[host_name("repeat_int_3")]] [[kernel]] decltype(demo::repeat<int, 3>) demo::repeat<int, 3>;
