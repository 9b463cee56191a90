// Arithmetic on register tiles, destination first: row reductions and
// row-broadcast ops (the softmax vocabulary), element-wise ops with or without
// element coordinates (scaling, masks), matrix multiply-accumulate, and the
// accumulator-to-operand conversion that feeds P into P V.
#pragma once

#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/tile.h"

namespace fa {

/// rows[s] = Op(rows[s], Op over row s of the tile), for each row slot s of
/// the lane (Tile::kRowSlots of them). Each lane folds its own registers
/// first, so lanes exchange values once per row, not once per fragment.
template <typename Op, typename F, int R, int C>
FA_FUNC void row_reduce(
    FA_THREAD typename F::elem_type* rows,
    const FA_THREAD Tile<F, R, C>& t) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    typename F::elem_type acc[F::kRowsPerLane];
    FA_UNROLL
    for (int s = 0; s < F::kRowsPerLane; ++s) {
      acc[s] = Op::identity();
    }
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      FA_UNROLL
      for (int e = 0; e < F::kElems; ++e) {
        const int s = F::row_slot(e);
        acc[s] = Op::apply(acc[s], frag_at(t, i, j).v[e]);
      }
    }
    FA_UNROLL
    for (int s = 0; s < F::kRowsPerLane; ++s) {
      const int slot = i * F::kRowsPerLane + s;
      rows[slot] =
          Op::apply(rows[slot], F::template reduce_row_lanes<Op>(acc[s]));
    }
  }
}

/// x = Op(x, rows[slot of x]) for every element x of the tile.
template <typename Op, typename F, int R, int C>
FA_FUNC void row_bin_op(
    FA_THREAD Tile<F, R, C>& t,
    const FA_THREAD typename F::elem_type* rows) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      FA_UNROLL
      for (int e = 0; e < F::kElems; ++e) {
        FA_THREAD typename F::elem_type& x = frag_at(t, i, j).v[e];
        x = Op::apply(x, rows[i * F::kRowsPerLane + F::row_slot(e)]);
      }
    }
  }
}

/// As above with an op object, for ops that carry a value of their own.
template <typename Op, typename F, int R, int C>
FA_FUNC void row_bin_op(
    FA_THREAD Tile<F, R, C>& t,
    const FA_THREAD typename F::elem_type* rows,
    const FA_THREAD Op& op) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      FA_UNROLL
      for (int e = 0; e < F::kElems; ++e) {
        FA_THREAD typename F::elem_type& x = frag_at(t, i, j).v[e];
        x = op.apply(x, rows[i * F::kRowsPerLane + F::row_slot(e)]);
      }
    }
  }
}

/// x = Op(x, y) for every element x of the tile.
template <typename Op, typename F, int R, int C>
FA_FUNC void tile_scalar_op(
    FA_THREAD Tile<F, R, C>& t,
    typename F::elem_type y) {
  FA_UNROLL
  for (int f = 0; f < R * C; ++f) {
    FA_UNROLL
    for (int e = 0; e < F::kElems; ++e) {
      t.frags[f].v[e] = Op::apply(t.frags[f].v[e], y);
    }
  }
}

/// x = op.apply(x, row, col) for every element x, with the element's row and
/// column in the caller's frame: the tile's origin sits at (row0, col0).
/// `op` is an object (masks carry pointers and limits).
template <typename Op, typename F, int R, int C>
FA_FUNC void tile_map_coords(
    FA_THREAD Tile<F, R, C>& t,
    const FA_THREAD Op& op,
    int row0,
    int col0,
    lane_t lane) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      FA_UNROLL
      for (int e = 0; e < F::kElems; ++e) {
        FA_THREAD typename F::elem_type& x = frag_at(t, i, j).v[e];
        x = op.apply(
            x,
            row0 + i * F::kRows + F::row(lane, e),
            col0 + j * F::kCols + F::col(lane, e));
      }
    }
  }
}

/// D = A * B + C with all three in registers.
template <typename FragC, typename FragA, typename FragB, int M, int N, int K>
FA_FUNC void tile_matmad(
    FA_THREAD Tile<FragC, M, N>& d,
    const FA_THREAD Tile<FragA, M, K>& a,
    const FA_THREAD Tile<FragB, K, N>& b,
    const FA_THREAD Tile<FragC, M, N>& c) {
  static_assert(
      FragA::kRows == FragC::kRows, "A and D fragments differ in rows");
  static_assert(FragA::kCols == FragB::kRows, "A columns and B rows differ");
  static_assert(
      FragB::kCols == FragC::kCols, "B and D fragments differ in columns");
  FA_UNROLL
  for (int k = 0; k < K; ++k) {
    FA_UNROLL
    for (int j = 0; j < N; ++j) {
      FA_UNROLL
      for (int i = 0; i < M; ++i) {
        mma(frag_at(d, i, j),
            frag_at(a, i, k),
            frag_at(b, k, j),
            k == 0 ? frag_at(c, i, j) : frag_at(d, i, j));
      }
    }
  }
}

/// D += A * B where B (K x N fragments of type FragB) is read from threadgroup
/// memory one fragment at a time, element (r, c) at src[r * kStrR + c * kStrC].
/// Streaming B keeps one B fragment in registers instead of a whole K or V
/// block; the i loop is innermost so consecutive mma's are independent.
template <
    typename FragB,
    int kStrR,
    int kStrC,
    typename FragC,
    typename FragA,
    int M,
    int N,
    int K,
    typename U>
FA_FUNC void tile_matmad_shared(
    FA_THREAD Tile<FragC, M, N>& d,
    const FA_THREAD Tile<FragA, M, K>& a,
    const FA_THREADGROUP U* src,
    lane_t lane) {
  static_assert(
      FragA::kRows == FragC::kRows, "A and D fragments differ in rows");
  static_assert(FragA::kCols == FragB::kRows, "A columns and B rows differ");
  static_assert(
      FragB::kCols == FragC::kCols, "B and D fragments differ in columns");
  FA_UNROLL
  for (int k = 0; k < K; ++k) {
    FA_UNROLL
    for (int j = 0; j < N; ++j) {
      FragB b;
      FragB::template load_shared<kStrR, kStrC>(
          b,
          src + (k * FragB::kRows) * kStrR + (j * FragB::kCols) * kStrC,
          lane);
      FA_UNROLL
      for (int i = 0; i < M; ++i) {
        mma(frag_at(d, i, j), frag_at(a, i, k), b, frag_at(d, i, j));
      }
    }
  }
}

/// The accumulator tile (fp32) as an A-operand tile of the same shape; on
/// CUDA one A fragment spans several accumulator fragments of a row.
template <typename FragA, typename FragC, int M, int KA, int NC>
FA_FUNC void tile_to_operand(
    FA_THREAD Tile<FragA, M, KA>& a,
    const FA_THREAD Tile<FragC, M, NC>& c) {
  static_assert(FragA::kRows == FragC::kRows, "A and accumulator rows differ");
  static_assert(
      FragA::kCols % FragC::kCols == 0 &&
          KA * FragA::kCols == NC * FragC::kCols,
      "A tile does not cover the accumulator tile");
  FA_UNROLL
  for (int i = 0; i < M; ++i) {
    FA_UNROLL
    for (int j = 0; j < KA; ++j) {
      acc_to_operand(
          frag_at(a, i, j), &frag_at(c, i, j * (FragA::kCols / FragC::kCols)));
    }
  }
}

} // namespace fa
