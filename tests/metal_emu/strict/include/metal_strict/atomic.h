// Metal's atomic types and their functions (<metal_atomic>). An atomic
// lives in device or threadgroup memory; every function takes a pointer to
// it there, as Metal's overloads do, volatile or not.
#pragma once

#include "types.h"

namespace metal {

// Metal 3.1 orders atomic operations only relaxed.
enum memory_order {
  memory_order_relaxed,
};

// Opaque: only the functions below touch its value.
template <class T>
struct atomic {
 private:
  T value;
};

typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<bool> atomic_bool;
typedef atomic<ulong> atomic_ulong;
typedef atomic<float> atomic_float;

#define FA_STRICT_ATOMIC_FETCH(AS, CV, op)                                      \
  template <class T, class U>                                                   \
  T atomic_fetch_##op##_explicit(CV AS atomic<T>* object, U operand, memory_order order);

#define FA_STRICT_ATOMICS(AS, CV)                                               \
  template <class T, class U>                                                   \
  void atomic_store_explicit(CV AS atomic<T>* object, U desired, memory_order order); \
  template <class T>                                                            \
  T atomic_load_explicit(const CV AS atomic<T>* object, memory_order order);    \
  template <class T, class U>                                                   \
  T atomic_exchange_explicit(CV AS atomic<T>* object, U desired, memory_order order); \
  template <class T, class U>                                                   \
  bool atomic_compare_exchange_weak_explicit(                                   \
      CV AS atomic<T>* object,                                                  \
      T* expected,                                                              \
      U desired,                                                                \
      memory_order succeed,                                                     \
      memory_order fail);                                                       \
  FA_STRICT_ATOMIC_FETCH(AS, CV, add)                                           \
  FA_STRICT_ATOMIC_FETCH(AS, CV, and)                                           \
  FA_STRICT_ATOMIC_FETCH(AS, CV, max)                                           \
  FA_STRICT_ATOMIC_FETCH(AS, CV, min)                                           \
  FA_STRICT_ATOMIC_FETCH(AS, CV, or)                                            \
  FA_STRICT_ATOMIC_FETCH(AS, CV, sub)                                           \
  FA_STRICT_ATOMIC_FETCH(AS, CV, xor)

FA_STRICT_ATOMICS(FA_STRICT_DEVICE, )
FA_STRICT_ATOMICS(FA_STRICT_DEVICE, volatile)
FA_STRICT_ATOMICS(FA_STRICT_THREADGROUP, )
FA_STRICT_ATOMICS(FA_STRICT_THREADGROUP, volatile)
#undef FA_STRICT_ATOMICS
#undef FA_STRICT_ATOMIC_FETCH

} // namespace metal
