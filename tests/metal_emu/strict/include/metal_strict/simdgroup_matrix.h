// simdgroup_matrix and its operations; loads and stores take device or
// threadgroup pointers, as Metal's overloads do.
#pragma once

#include "types.h"

namespace metal {

template <class T, int Cols, int Rows>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "only 8x8 simdgroup matrices exist");
  simdgroup_matrix();
  explicit simdgroup_matrix(T diagonal);
  vec<T, 2>& thread_elements();
  const vec<T, 2>& thread_elements() const;
};

typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;

template <class T, int Cols, int Rows>
simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(const T value);

#define FA_STRICT_MATRIX_MOVES(AS)                                         \
  template <class T, int Cols, int Rows>                                   \
  void simdgroup_load(                                                     \
      simdgroup_matrix<T, Cols, Rows>& d,                                  \
      const AS T* src,                                                     \
      ulong elements_per_row = Cols,                                       \
      ulong2 matrix_origin = 0,                                            \
      bool transpose_matrix = false);                                      \
  template <class T, int Cols, int Rows>                                   \
  void simdgroup_store(                                                    \
      const simdgroup_matrix<T, Cols, Rows>& d,                            \
      AS T* dst,                                                           \
      ulong elements_per_row = Cols,                                       \
      ulong2 matrix_origin = 0,                                            \
      bool transpose_matrix = false);

FA_STRICT_MATRIX_MOVES(FA_STRICT_DEVICE)
FA_STRICT_MATRIX_MOVES(FA_STRICT_THREADGROUP)
#undef FA_STRICT_MATRIX_MOVES

template <class TD, class TA, class TB, class TC>
void simdgroup_multiply_accumulate(
    simdgroup_matrix<TD, 8, 8>& d,
    const simdgroup_matrix<TA, 8, 8>& a,
    const simdgroup_matrix<TB, 8, 8>& b,
    const simdgroup_matrix<TC, 8, 8>& c);
template <class TD, class TA, class TB>
void simdgroup_multiply(
    simdgroup_matrix<TD, 8, 8>& d,
    const simdgroup_matrix<TA, 8, 8>& a,
    const simdgroup_matrix<TB, 8, 8>& b);

} // namespace metal
