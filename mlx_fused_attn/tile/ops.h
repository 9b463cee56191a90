// Element operations applied by the tile ops (row_reduce, row_bin_op,
// tile_scalar_op): each is a struct with a static apply, because Metal has
// no lambdas. Reductions also name their identity.
#pragma once

#include "mlx_fused_attn/tile/language.h"

namespace fa {

struct MaxOp {
  template <typename T>
  static FA_FUNC T apply(T x, T y) {
    return FA_MAX(x, y);
  }
  static FA_FUNC float identity() {
    return -FA_INFINITY;
  }
};

struct SumOp {
  template <typename T>
  static FA_FUNC T apply(T x, T y) {
    return x + y;
  }
  static FA_FUNC float identity() {
    return 0.0f;
  }
};

struct MulOp {
  template <typename T>
  static FA_FUNC T apply(T x, T y) {
    return x * y;
  }
};

/// exp2(x - y): a score minus its row max, out of the exp2 domain.
struct ExpSubOp {
  template <typename T>
  static FA_FUNC T apply(T x, T y) {
    return FA_EXP2(x - y);
  }
};

/// exp2(x * scale - y): a score not yet scaled into the exp2 domain, minus
/// its row max (which is), as one fused multiply-add and the exp2.
struct ExpScaleSubOp {
  float scale;

  FA_FUNC float apply(float x, float y) const {
    return FA_EXP2(x * scale - y);
  }
};

} // namespace fa
