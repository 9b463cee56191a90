// Calls a kernel function from a fiber with its parameters bound the way the
// host binds them: buffers by [[buffer(n)]] index, threadgroup memory by
// [[threadgroup(n)]] index, builtins from the running thread. The generated
// trampoline includes this first, before the shim defines Metal's qualifier
// macros (which would break the standard headers).
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>

#include "geometry.h"
#include "kernel_table.h"
#include "thread_state.h"

namespace metal {
template <class T, int N>
struct vec;
} // namespace metal

namespace fa_emu {

template <class T>
struct is_builtin_vector : std::false_type {};
template <class T, int N>
struct is_builtin_vector<metal::vec<T, N>> : std::true_type {};

template <class F>
struct kernel_signature;
template <class... P>
struct kernel_signature<void (*)(P...)> {
  template <unsigned I>
  using param = typename std::tuple_element<I, std::tuple<P...>>::type;
};

template <class F, unsigned I>
using param_t = typename kernel_signature<F>::template param<I>;

template <class P>
using pointee_t = typename std::remove_cv<typename std::remove_pointer<
    typename std::remove_reference<P>::type>::type>::type;

template <class P>
constexpr ParamSpec
buffer_param(unsigned index, const char* name, const char* type,
             const bool* enabled_by) {
  return ParamSpec{
      ParamKind::Buffer,
      index,
      Builtin::thread_position_in_grid,
      name,
      type,
      sizeof(pointee_t<P>),
      std::is_reference<P>::value,
      enabled_by};
}

template <class P>
constexpr ParamSpec
threadgroup_param(unsigned index, const char* name, const char* type) {
  return ParamSpec{
      ParamKind::ThreadgroupMemory,
      index,
      Builtin::thread_position_in_grid,
      name,
      type,
      sizeof(pointee_t<P>),
      false,
      nullptr};
}

constexpr ParamSpec
builtin_param(Builtin which, const char* name, const char* type) {
  return ParamSpec{
      ParamKind::Builtin, 0, which, name, type, 0, false, nullptr};
}

template <class P>
P builtin_value(Builtin which) {
  const LaunchGeometry& g = geometry();
  const ThreadState& t = current_thread();
  unsigned v[3] = {0, 0, 0};
  switch (which) {
    case Builtin::thread_position_in_grid:
      for (int i = 0; i < 3; ++i) {
        v[i] = g.group_pos[i] * g.group[i] + t.pos[i];
      }
      break;
    case Builtin::thread_position_in_threadgroup:
      for (int i = 0; i < 3; ++i) {
        v[i] = t.pos[i];
      }
      break;
    case Builtin::threadgroup_position_in_grid:
      for (int i = 0; i < 3; ++i) {
        v[i] = g.group_pos[i];
      }
      break;
    case Builtin::threads_per_threadgroup:
      for (int i = 0; i < 3; ++i) {
        v[i] = g.group[i];
      }
      break;
    case Builtin::threadgroups_per_grid:
      for (int i = 0; i < 3; ++i) {
        v[i] = g.grid[i];
      }
      break;
    case Builtin::threads_per_grid:
      for (int i = 0; i < 3; ++i) {
        v[i] = g.grid[i] * g.group[i];
      }
      break;
    case Builtin::thread_index_in_threadgroup:
      v[0] = t.index;
      break;
    case Builtin::thread_index_in_simdgroup:
      v[0] = t.lane;
      break;
    case Builtin::simdgroup_index_in_threadgroup:
      v[0] = t.simdgroup;
      break;
    case Builtin::threads_per_simdgroup:
      v[0] = 32;
      break;
    case Builtin::simdgroups_per_threadgroup:
      v[0] = (g.group[0] * g.group[1] * g.group[2] + 31) / 32;
      break;
  }
  typedef typename std::remove_cv<P>::type V;
  if constexpr (is_builtin_vector<V>::value) {
    V r;
    for (int i = 0; i < int(sizeof(r) / sizeof(r[0])) && i < 3; ++i) {
      r[i] = v[i];
    }
    return r;
  } else {
    return V(v[0]);
  }
}

template <class P>
P kernel_arg(const ParamSpec& s) {
  if constexpr (std::is_pointer<P>::value) {
    if (s.kind == ParamKind::ThreadgroupMemory) {
      return static_cast<P>(bound_threadgroup_memory(s.index));
    }
    return static_cast<P>(bound_buffer(s.index));
  } else if constexpr (std::is_reference<P>::value) {
    typedef typename std::remove_reference<P>::type T;
    void* bound = bound_buffer(s.index);
    if (bound == nullptr) {
      // A parameter its function constant disables does not exist; the
      // reference must still bind to something: all-ones bytes, which the
      // kernel must not read.
      alignas(alignof(T)) static unsigned char absent[sizeof(T)];
      __builtin_memset(absent, 0xff, sizeof(T));
      bound = absent;
    }
    return *static_cast<T*>(bound);
  } else {
    return builtin_value<P>(s.builtin);
  }
}

template <class... P, std::size_t... I>
void call_kernel(
    void (*fn)(P...),
    const ParamSpec* specs,
    std::index_sequence<I...>) {
  fn(kernel_arg<P>(specs[I])...);
}

template <class... P>
void call_kernel(void (*fn)(P...), const ParamSpec* specs) {
  call_kernel(fn, specs, std::index_sequence_for<P...>{});
}

template <class T>
bool assign_constant(void* storage, const ConstantValue& v) {
  T& out = *static_cast<T*>(storage);
  if constexpr (std::is_same<T, bool>::value) {
    if (v.kind != ConstantKind::Bool) {
      return false;
    }
    out = v.integer != 0;
  } else if constexpr (std::is_integral<T>::value) {
    if (v.kind != ConstantKind::Integer || T(v.integer) != v.integer ||
        (v.integer < 0) != (T(v.integer) < T(0))) {
      return false;
    }
    out = T(v.integer);
  } else {
    if (v.kind == ConstantKind::Bool) {
      return false;
    }
    out = T(float(v.kind == ConstantKind::Float ? v.real : double(v.integer)));
  }
  return true;
}

template <class T>
constexpr ConstantSpec
constant_spec(unsigned index, const char* name, const char* type, T* storage) {
  return ConstantSpec{
      index,
      name,
      type,
      std::is_same<T, bool>::value
          ? ConstantKind::Bool
          : (std::is_integral<T>::value ? ConstantKind::Integer
                                        : ConstantKind::Float),
      &assign_constant<T>,
      storage};
}

} // namespace fa_emu
