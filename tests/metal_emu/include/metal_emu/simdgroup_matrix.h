// simdgroup_matrix<T, 8, 8> and its operations. Each lane holds two adjacent
// elements of a row, at the coordinates MLX's steel kernels rely on:
//   qid = lane / 4, row = (qid & 4) + (lane / 2) % 4,
//   col = (qid & 2) * 2 + (lane % 2) * 2, holding (row, col) and (row, col+1).
// Loads, stores and multiplies are simdgroup rendezvous: the last lane to
// arrive moves all 64 elements, after checking that every lane passed the
// same pointer, stride, origin and transpose flag.
#pragma once

#include "math.h"
#include "plant.h"
#include "runtime_api.h"
#include "scalars.h"
#include "simd.h"
#include "vec.h"

namespace metal {

namespace emu {

struct FragCoord {
  unsigned row;
  unsigned col;
};

constexpr FragCoord frag_coord(unsigned lane) {
#if FA_EMU_PLANT == FA_EMU_PLANT_FRAGMENT_LAYOUT
  return FragCoord{lane / 4, (lane % 4) * 2};
#endif
  return FragCoord{
      (lane / 4 & 4u) + (lane / 2) % 4u, (lane / 4 & 2u) * 2 + (lane % 2) * 2};
}

} // namespace emu

template <class T, int Cols, int Rows>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "only 8x8 simdgroup matrices exist");
  typedef T value_type;

  // Metal leaves a fresh matrix undefined; NaN makes a use of it visible.
  simdgroup_matrix() {
    emu::poison(elems_);
  }
  explicit simdgroup_matrix(T diagonal) {
    const emu::FragCoord c = emu::frag_coord(::fa_emu::current_lane());
    for (unsigned j = 0; j < 2; ++j) {
      elems_[j] = c.row == c.col + j ? diagonal : T(0);
    }
  }

  vec<T, 2>& thread_elements() {
    return elems_;
  }
  const vec<T, 2>& thread_elements() const {
    return elems_;
  }

 private:
  vec<T, 2> elems_;
};

typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;

template <class T, int Cols, int Rows>
simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(const T value) {
  simdgroup_matrix<T, Cols, Rows> m;
  m.thread_elements() = vec<T, 2>(value);
  return m;
}

namespace emu {

template <class T>
struct MatrixMove {
  simdgroup_matrix<T, 8, 8>* m;
  T* mem;
  ulong elements_per_row;
  ulong origin_x;
  ulong origin_y;
  bool transpose;
};

// Source-memory coordinates of element (row, col): the origin is the
// (column, row) of the block in memory, and a transposed move reads the
// block's columns as the matrix's rows.
template <class T>
T* element_address(const MatrixMove<T>& mv, unsigned row, unsigned col) {
  const ulong r = mv.transpose ? col : row;
  const ulong c = mv.transpose ? row : col;
  return mv.mem + (mv.origin_y + r) * mv.elements_per_row + mv.origin_x + c;
}

template <class T>
const MatrixMove<T>& uniform_move(void* const* a, unsigned n) {
  const MatrixMove<T>& first = *static_cast<MatrixMove<T>*>(a[0]);
  if (n != 32) {
    ::fa_emu::collective_error(
        "simdgroup matrix operations need a full simdgroup of 32 threads");
  }
  for (unsigned i = 1; i < n; ++i) {
    const MatrixMove<T>& o = *static_cast<MatrixMove<T>*>(a[i]);
    if (o.mem != first.mem || o.elements_per_row != first.elements_per_row ||
        o.origin_x != first.origin_x || o.origin_y != first.origin_y ||
        o.transpose != first.transpose) {
      ::fa_emu::collective_error(
          "lanes passed different pointers, strides, origins or transpose "
          "flags; the arguments must be uniform across the simdgroup");
    }
  }
  return first;
}

struct Load {
  template <class T>
  static void combine(void* const* a, unsigned n) {
    const MatrixMove<T>& mv = uniform_move<T>(a, n);
    for (unsigned i = 0; i < n; ++i) {
      const FragCoord c = frag_coord(i);
      simdgroup_matrix<T, 8, 8>& m = *static_cast<MatrixMove<T>*>(a[i])->m;
      for (unsigned j = 0; j < 2; ++j) {
        m.thread_elements()[j] = *element_address(mv, c.row, c.col + j);
      }
    }
  }
};

struct Store {
  template <class T>
  static void combine(void* const* a, unsigned n) {
    const MatrixMove<T>& mv = uniform_move<T>(a, n);
    for (unsigned i = 0; i < n; ++i) {
      const FragCoord c = frag_coord(i);
      const simdgroup_matrix<T, 8, 8>& m =
          *static_cast<MatrixMove<T>*>(a[i])->m;
      for (unsigned j = 0; j < 2; ++j) {
        *element_address(mv, c.row, c.col + j) = m.thread_elements()[j];
      }
    }
  }
};

template <class TD, class TA, class TB, class TC>
struct Mma {
  simdgroup_matrix<TD, 8, 8>* d;
  const simdgroup_matrix<TA, 8, 8>* a;
  const simdgroup_matrix<TB, 8, 8>* b;
  const simdgroup_matrix<TC, 8, 8>* c;
};

// D = A * B + C, with float products summed in k order; the result is
// rounded to D's type once.
template <class TD, class TA, class TB, class TC>
void multiply_accumulate_combine(void* const* args, unsigned n) {
  typedef Mma<TD, TA, TB, TC> Args;
  if (n != 32) {
    ::fa_emu::collective_error(
        "simdgroup matrix operations need a full simdgroup of 32 threads");
  }
  float a[8][8], b[8][8], c[8][8];
  for (unsigned i = 0; i < n; ++i) {
    const Args& l = *static_cast<Args*>(args[i]);
    const FragCoord p = frag_coord(i);
    for (unsigned j = 0; j < 2; ++j) {
      a[p.row][p.col + j] = float(l.a->thread_elements()[j]);
      b[p.row][p.col + j] = float(l.b->thread_elements()[j]);
      c[p.row][p.col + j] = float(l.c->thread_elements()[j]);
    }
  }
  for (unsigned i = 0; i < n; ++i) {
    const Args& l = *static_cast<Args*>(args[i]);
    const FragCoord p = frag_coord(i);
    for (unsigned j = 0; j < 2; ++j) {
      float acc = c[p.row][p.col + j];
      for (unsigned k = 0; k < 8; ++k) {
        acc = __builtin_fmaf(a[p.row][k], b[k][p.col + j], acc);
      }
      l.d->thread_elements()[j] = TD(acc);
    }
  }
}

} // namespace emu

template <class T, int Cols, int Rows>
void simdgroup_load(
    simdgroup_matrix<T, Cols, Rows>& d,
    const T* src,
    ulong elements_per_row = Cols,
    ulong2 matrix_origin = ulong2(0),
    bool transpose_matrix = false,
    FA_EMU_SITE()) {
  emu::MatrixMove<T> mv{
      &d,
      const_cast<T*>(src),
      elements_per_row,
      matrix_origin.x,
      matrix_origin.y,
      transpose_matrix};
  ::fa_emu::rendezvous_simdgroup(
      &emu::Load::combine<T>, &mv, FA_EMU_HERE("simdgroup_load"));
}

template <class T, int Cols, int Rows>
void simdgroup_store(
    const simdgroup_matrix<T, Cols, Rows>& d,
    T* dst,
    ulong elements_per_row = Cols,
    ulong2 matrix_origin = ulong2(0),
    bool transpose_matrix = false,
    FA_EMU_SITE()) {
  emu::MatrixMove<T> mv{
      const_cast<simdgroup_matrix<T, Cols, Rows>*>(&d),
      dst,
      elements_per_row,
      matrix_origin.x,
      matrix_origin.y,
      transpose_matrix};
  ::fa_emu::rendezvous_simdgroup(
      &emu::Store::combine<T>, &mv, FA_EMU_HERE("simdgroup_store"));
}

template <class TD, class TA, class TB, class TC>
void simdgroup_multiply_accumulate(
    simdgroup_matrix<TD, 8, 8>& d,
    const simdgroup_matrix<TA, 8, 8>& a,
    const simdgroup_matrix<TB, 8, 8>& b,
    const simdgroup_matrix<TC, 8, 8>& c,
    FA_EMU_SITE()) {
  emu::Mma<TD, TA, TB, TC> args{&d, &a, &b, &c};
  ::fa_emu::rendezvous_simdgroup(
      &emu::multiply_accumulate_combine<TD, TA, TB, TC>,
      &args,
      FA_EMU_HERE("simdgroup_multiply_accumulate"));
}

template <class TD, class TA, class TB>
void simdgroup_multiply(
    simdgroup_matrix<TD, 8, 8>& d,
    const simdgroup_matrix<TA, 8, 8>& a,
    const simdgroup_matrix<TB, 8, 8>& b,
    FA_EMU_SITE()) {
  const simdgroup_matrix<TD, 8, 8> zero =
      make_filled_simdgroup_matrix<TD, 8, 8>(TD(0));
  emu::Mma<TD, TA, TB, TD> args{&d, &a, &b, &zero};
  ::fa_emu::rendezvous_simdgroup(
      &emu::multiply_accumulate_combine<TD, TA, TB, TD>,
      &args,
      FA_EMU_HERE("simdgroup_multiply"));
}

} // namespace metal
