// simd_shuffle_and_fill_down and simd_shuffle_and_fill_up: the simdgroup
// split into vectors of `modulo` lanes (the simdgroup size when not given);
// lane i reads lane i + delta (down) or i - delta (up) of its vector's
// `data`, and where that falls outside the vector, the lane as many places
// into the vector's `filling_data` (from its other end). A rendezvous like
// every simdgroup function (simd.h).
#pragma once

#include "runtime_api.h"
#include "scalars.h"
#include "simd.h"

namespace metal {
namespace emu {

template <class T>
struct FillShuffle {
  T data;
  T filling;
  unsigned delta;
  unsigned modulo;
  bool down;
  T result;

  static void combine(void* const* a, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      FillShuffle& me = *static_cast<FillShuffle*>(a[i]);
      const int m = int(me.modulo);
      const int pos = int(i) % m + (me.down ? int(me.delta) : -int(me.delta));
      const unsigned src = i - i % unsigned(m) + unsigned((pos + m) % m);
      if (src >= n) {
        poison(me.result);
      } else {
        const FillShuffle& from = *static_cast<FillShuffle*>(a[src]);
        me.result = pos < 0 || pos >= m ? from.filling : from.data;
      }
    }
  }
};

template <class T>
T shuffle_and_fill(T data, T filling, unsigned delta, unsigned modulo, bool down,
                   ::fa_emu::Site site) {
  FillShuffle<T> me{data, filling, delta, modulo, down, data};
  ::fa_emu::rendezvous_simdgroup(&FillShuffle<T>::combine, &me, site);
  return me.result;
}

} // namespace emu

template <class T>
T simd_shuffle_and_fill_down(T data, T filling_data, ushort delta, ushort modulo,
                             FA_EMU_SITE()) {
  return emu::shuffle_and_fill(data, filling_data, delta, modulo, true,
                               FA_EMU_HERE("simd_shuffle_and_fill_down"));
}
template <class T>
T simd_shuffle_and_fill_down(T data, T filling_data, ushort delta, FA_EMU_SITE()) {
  return emu::shuffle_and_fill(data, filling_data, delta, 32, true,
                               FA_EMU_HERE("simd_shuffle_and_fill_down"));
}
template <class T>
T simd_shuffle_and_fill_up(T data, T filling_data, ushort delta, ushort modulo,
                           FA_EMU_SITE()) {
  return emu::shuffle_and_fill(data, filling_data, delta, modulo, false,
                               FA_EMU_HERE("simd_shuffle_and_fill_up"));
}
template <class T>
T simd_shuffle_and_fill_up(T data, T filling_data, ushort delta, FA_EMU_SITE()) {
  return emu::shuffle_and_fill(data, filling_data, delta, 32, false,
                               FA_EMU_HERE("simd_shuffle_and_fill_up"));
}

} // namespace metal
