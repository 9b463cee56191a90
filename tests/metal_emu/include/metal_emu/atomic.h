// Metal's atomic types and functions (the Metal Shading Language
// specification, "Atomic Functions"): atomic<T> for int, uint, bool, ulong
// and float, memory_order_relaxed, and the *_explicit functions on device
// and threadgroup atomics (one pointer type here: address spaces are gone).
// Each is a GCC __atomic builtin on the object's value, so ThreadSanitizer's
// race check (the race build) sees them as atomic, as they are on the GPU;
// in the other builds one fiber runs at a time and they are atomic anyway.
#pragma once

#include <type_traits>

namespace metal {

enum memory_order { memory_order_relaxed };

template <class T>
struct atomic {
  static_assert(std::is_same<T, int>::value || std::is_same<T, unsigned>::value ||
                    std::is_same<T, bool>::value || std::is_same<T, unsigned long>::value ||
                    std::is_same<T, float>::value,
                "Metal has atomic<T> for int, uint, bool, ulong and float");
  T value;
};

typedef atomic<int> atomic_int;
typedef atomic<unsigned> atomic_uint;
typedef atomic<bool> atomic_bool;
typedef atomic<float> atomic_float;

namespace emu {

// The builtins that take the value type by address (float, bool) need no
// integer type; the read-modify-write ones are a compare-exchange loop.
template <class T, class F>
T atomic_update(volatile atomic<T>* object, F f) {
  T old;
  __atomic_load(&object->value, &old, __ATOMIC_RELAXED);
  T next = f(old);
  while (!__atomic_compare_exchange(&object->value, &old, &next, true, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
    next = f(old);
  }
  return old;
}

} // namespace emu

template <class T>
T atomic_load_explicit(const volatile atomic<T>* object, memory_order) {
  T v;
  __atomic_load(&object->value, &v, __ATOMIC_RELAXED);
  return v;
}

template <class T>
void atomic_store_explicit(volatile atomic<T>* object, T desired, memory_order) {
  __atomic_store(&object->value, &desired, __ATOMIC_RELAXED);
}

template <class T>
T atomic_exchange_explicit(volatile atomic<T>* object, T desired, memory_order) {
  T old;
  __atomic_exchange(&object->value, &desired, &old, __ATOMIC_RELAXED);
  return old;
}

// Returns whether *object held *expected (then it now holds desired);
// otherwise *expected receives what it held. Metal compares the values
// (floats by value, as MLX's atomic.h notes), which this does bitwise:
// they differ only for NaN and signed zeros.
template <class T>
bool atomic_compare_exchange_weak_explicit(volatile atomic<T>* object, T* expected, T desired,
                                           memory_order, memory_order) {
  return __atomic_compare_exchange(&object->value, expected, &desired, true, __ATOMIC_RELAXED,
                                   __ATOMIC_RELAXED);
}

#define FA_EMU_ATOMIC_FETCH(name, expr)                                        \
  template <class T>                                                           \
  T atomic_fetch_##name##_explicit(volatile atomic<T>* object, T operand,      \
                                   memory_order) {                             \
    static_assert(!std::is_same<T, bool>::value,                               \
                  "Metal has no arithmetic on atomic_bool");                   \
    return emu::atomic_update(object, [operand](T old) { return T(expr); });  \
  }

FA_EMU_ATOMIC_FETCH(add, old + operand)
FA_EMU_ATOMIC_FETCH(sub, old - operand)
FA_EMU_ATOMIC_FETCH(and, old & operand)
FA_EMU_ATOMIC_FETCH(or, old | operand)
FA_EMU_ATOMIC_FETCH(xor, old ^ operand)
FA_EMU_ATOMIC_FETCH(min, operand < old ? operand : old)
FA_EMU_ATOMIC_FETCH(max, operand > old ? operand : old)

#undef FA_EMU_ATOMIC_FETCH

} // namespace metal
