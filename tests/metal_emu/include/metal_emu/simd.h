// Metal's simdgroup functions (shuffles, reductions, broadcasts, votes) and
// simdgroup_barrier. Each is a real rendezvous of the simdgroup's lanes: a
// lane deposits its operand, the last lane to arrive computes every lane's
// result, and a lane that skips the call is reported by the runtime. Reading
// a lane that does not exist (past the end of a partial last simdgroup)
// yields all-ones bits, a NaN for floating types.
#pragma once

#include <type_traits>

#include "math.h"
#include "plant.h"
#include "runtime_api.h"
#include "scalars.h"
#include "vec.h"

#define FA_EMU_SITE() \
  const char *fa_emu_file = __builtin_FILE(), unsigned fa_emu_line = __builtin_LINE()
#define FA_EMU_HERE(op) (::fa_emu::Site{op, fa_emu_file, fa_emu_line})

namespace metal {
namespace emu {

template <class T>
void poison(T& x) {
  __builtin_memset(static_cast<void*>(&x), 0xff, sizeof(T));
}

template <class T>
struct LaneValue {
  T value;
  unsigned arg;
  T result;
};

template <class T>
LaneValue<T>& lane(void* const* args, unsigned i) {
  return *static_cast<LaneValue<T>*>(args[i]);
}

template <class T, class Pick>
T exchange(T value, unsigned arg, ::fa_emu::Site site) {
  LaneValue<T> me{value, arg, value};
  ::fa_emu::rendezvous_simdgroup(&Pick::template combine<T>, &me, site);
  return me.result;
}

struct PickIndex {
  template <class T>
  static void combine(void* const* a, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      const unsigned src = lane<T>(a, i).arg;
      if (src < n) {
        lane<T>(a, i).result = lane<T>(a, src).value;
      } else {
        poison(lane<T>(a, i).result);
      }
    }
  }
};

struct PickXor {
  template <class T>
  static void combine(void* const* a, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
#if FA_EMU_PLANT == FA_EMU_PLANT_SHUFFLE_XOR_LANES
      const unsigned src = (i + lane<T>(a, i).arg) % 32u;
#else
      const unsigned src = i ^ (lane<T>(a, i).arg & 31u);
#endif
      if (src < n) {
        lane<T>(a, i).result = lane<T>(a, src).value;
      } else {
        poison(lane<T>(a, i).result);
      }
    }
  }
};

// Lanes whose source falls outside the simdgroup keep their own value.
struct PickDown {
  template <class T>
  static void combine(void* const* a, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      const unsigned src = i + lane<T>(a, i).arg;
      lane<T>(a, i).result =
          src < n ? lane<T>(a, src).value : lane<T>(a, i).value;
    }
  }
};

struct PickUp {
  template <class T>
  static void combine(void* const* a, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      const unsigned d = lane<T>(a, i).arg;
      lane<T>(a, i).result =
          i >= d ? lane<T>(a, i - d).value : lane<T>(a, i).value;
    }
  }
};

struct PickRotateDown {
  template <class T>
  static void combine(void* const* a, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      lane<T>(a, i).result = lane<T>(a, (i + lane<T>(a, i).arg) % n).value;
    }
  }
};

struct PickRotateUp {
  template <class T>
  static void combine(void* const* a, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      const unsigned d = lane<T>(a, i).arg % n;
      lane<T>(a, i).result = lane<T>(a, (i + n - d) % n).value;
    }
  }
};

struct OpSum {
  template <class T>
  static T apply(T a, T b) {
    return a + b;
  }
};
struct OpProduct {
  template <class T>
  static T apply(T a, T b) {
    return a * b;
  }
};
struct OpMax {
  template <class T>
  static T apply(T a, T b) {
    return max(a, b);
  }
};
struct OpMin {
  template <class T>
  static T apply(T a, T b) {
    return min(a, b);
  }
};
struct OpAnd {
  template <class T>
  static T apply(T a, T b) {
    return a & b;
  }
};
struct OpOr {
  template <class T>
  static T apply(T a, T b) {
    return a | b;
  }
};
struct OpXor {
  template <class T>
  static T apply(T a, T b) {
    return a ^ b;
  }
};

// A butterfly over the lanes, the order a GPU's reduction tree uses, with
// each step rounded in T.
template <class Op>
struct Reduce {
  template <class T>
  static void combine(void* const* a, unsigned n) {
    T acc[32];
    for (unsigned i = 0; i < n; ++i) {
      acc[i] = lane<T>(a, i).value;
    }
    unsigned width = 1;
    while (width < n) {
      width *= 2;
    }
    for (unsigned step = width / 2; step > 0; step /= 2) {
      for (unsigned i = 0; i < step; ++i) {
        if (i + step < n) {
          acc[i] = Op::apply(acc[i], acc[i + step]);
        }
      }
    }
    for (unsigned i = 0; i < n; ++i) {
      lane<T>(a, i).result = acc[0];
    }
  }
};

template <class Op, bool Inclusive>
struct Scan {
  template <class T>
  static void combine(void* const* a, unsigned n) {
    T acc = lane<T>(a, 0).value;
    lane<T>(a, 0).result = Inclusive ? acc : T(0);
    for (unsigned i = 1; i < n; ++i) {
      if (Inclusive) {
        acc = Op::apply(acc, lane<T>(a, i).value);
        lane<T>(a, i).result = acc;
      } else {
        lane<T>(a, i).result = acc;
        acc = Op::apply(acc, lane<T>(a, i).value);
      }
    }
  }
};

typedef Scan<OpSum, true> InclusiveSum;
typedef Scan<OpSum, false> ExclusiveSum;
typedef Scan<OpProduct, true> InclusiveProduct;
typedef Scan<OpProduct, false> ExclusiveProduct;

} // namespace emu

template <class T>
T simd_shuffle(T data, ushort lane, FA_EMU_SITE()) {
  return emu::exchange<T, emu::PickIndex>(
      data, lane, FA_EMU_HERE("simd_shuffle"));
}
template <class T>
T simd_broadcast(T data, ushort lane, FA_EMU_SITE()) {
  return emu::exchange<T, emu::PickIndex>(
      data, lane, FA_EMU_HERE("simd_broadcast"));
}
template <class T>
T simd_broadcast_first(T data, FA_EMU_SITE()) {
  return emu::exchange<T, emu::PickIndex>(
      data, 0, FA_EMU_HERE("simd_broadcast_first"));
}
template <class T>
T simd_shuffle_xor(T data, ushort mask, FA_EMU_SITE()) {
  return emu::exchange<T, emu::PickXor>(
      data, mask, FA_EMU_HERE("simd_shuffle_xor"));
}
template <class T>
T simd_shuffle_down(T data, ushort delta, FA_EMU_SITE()) {
  return emu::exchange<T, emu::PickDown>(
      data, delta, FA_EMU_HERE("simd_shuffle_down"));
}
template <class T>
T simd_shuffle_up(T data, ushort delta, FA_EMU_SITE()) {
  return emu::exchange<T, emu::PickUp>(
      data, delta, FA_EMU_HERE("simd_shuffle_up"));
}
template <class T>
T simd_shuffle_rotate_down(T data, ushort delta, FA_EMU_SITE()) {
  return emu::exchange<T, emu::PickRotateDown>(
      data, delta, FA_EMU_HERE("simd_shuffle_rotate_down"));
}
template <class T>
T simd_shuffle_rotate_up(T data, ushort delta, FA_EMU_SITE()) {
  return emu::exchange<T, emu::PickRotateUp>(
      data, delta, FA_EMU_HERE("simd_shuffle_rotate_up"));
}

#define FA_EMU_SIMD_REDUCTION(name, Combiner)                              \
  template <class T>                                                       \
  T name(T data, FA_EMU_SITE()) {                                          \
    return emu::exchange<T, Combiner>(data, 0, FA_EMU_HERE(#name));        \
  }

FA_EMU_SIMD_REDUCTION(simd_sum, emu::Reduce<emu::OpSum>)
FA_EMU_SIMD_REDUCTION(simd_product, emu::Reduce<emu::OpProduct>)
FA_EMU_SIMD_REDUCTION(simd_max, emu::Reduce<emu::OpMax>)
FA_EMU_SIMD_REDUCTION(simd_min, emu::Reduce<emu::OpMin>)
FA_EMU_SIMD_REDUCTION(simd_and, emu::Reduce<emu::OpAnd>)
FA_EMU_SIMD_REDUCTION(simd_or, emu::Reduce<emu::OpOr>)
FA_EMU_SIMD_REDUCTION(simd_xor, emu::Reduce<emu::OpXor>)
FA_EMU_SIMD_REDUCTION(simd_prefix_inclusive_sum, emu::InclusiveSum)
FA_EMU_SIMD_REDUCTION(simd_prefix_exclusive_sum, emu::ExclusiveSum)
FA_EMU_SIMD_REDUCTION(simd_prefix_inclusive_product, emu::InclusiveProduct)
FA_EMU_SIMD_REDUCTION(simd_prefix_exclusive_product, emu::ExclusiveProduct)
#undef FA_EMU_SIMD_REDUCTION

inline bool simd_all(bool expr, FA_EMU_SITE()) {
  return emu::exchange<bool, emu::Reduce<emu::OpAnd>>(
      expr, 0, FA_EMU_HERE("simd_all"));
}
inline bool simd_any(bool expr, FA_EMU_SITE()) {
  return emu::exchange<bool, emu::Reduce<emu::OpOr>>(
      expr, 0, FA_EMU_HERE("simd_any"));
}

inline bool simd_is_first(FA_EMU_SITE()) {
  return emu::exchange<bool, emu::PickIndex>(
             true, 0, FA_EMU_HERE("simd_is_first")) &&
      ::fa_emu::current_lane() == 0;
}

} // namespace metal
