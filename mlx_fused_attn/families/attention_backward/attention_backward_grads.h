// The backward's element op: from the raw products s = q.k and dp = dO.v of
// query row r and key c, the probability P = exp(scale q.k + mask - LSE)
// and the score gradient dS = P (dP - D), D = rowsum(dO * O). The row
// statistics (LSE, D) and the masks are those of backward_params.h and
// attention_masks.h; keys a bool or causal mask hides get dS = 0, and P = 0
// unless their row sees no key at all (LSE = -inf: P = 1 / L_k).
#pragma once

#include "mlx_fused_attn/families/attention_backward/backward_params.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/attention_masks.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// A visible score x (exp2 domain, its mask added) of a row with log-sum-exp
/// lse2 (exp2 domain) and D = d_r: s becomes P, dp becomes dS.
FA_FUNC void bwd_visible_grads(
    FA_THREAD float& s,
    FA_THREAD float& dp,
    float x,
    float lse2,
    float d_r) {
  const float p = FA_EXP2(x - lse2);
  s = p;
  dp = p * (dp - d_r);
}

/// The element op of a block with no mask, causal cut or ragged edge, where
/// every (row, key) pair is visible and exists (the LSE finite): of the
/// general op below only the exponential and dS remain.
struct BwdInteriorGrads {
  float scale_log2;
  const FA_DEVICE float* lse;
  const FA_DEVICE float* d;

  FA_FUNC void apply(FA_THREAD float& s, FA_THREAD float& dp, int r, int)
      const {
    bwd_visible_grads(s, dp, s * scale_log2, lse[r] * FA_LOG2E, d[r]);
  }
};

/// A bool mask read into the raw scores ahead of BwdScoreGrads: hidden ones
/// become -inf. A pass of loads and selects alone (H200: the windowed
/// backward 8% faster than with the loads inside the element op). Rows and
/// keys past the ends read the last row's or key's element (BwdScoreGrads
/// zeroes them).
struct BwdBoolMaskLoads {
  BoolMaskOp mask;

  FA_FUNC void apply(FA_THREAD float& s, FA_THREAD float&, int r, int c)
      const {
    const int rr = r < mask.l_q - 1 ? r : mask.l_q - 1;
    const int cc = c < mask.l_k - 1 ? c : mask.l_k - 1;
    s = mask.shown(rr, cc) ? s : -FA_INFINITY;
  }
};

template <typename T>
struct BwdScoreGrads {
  float scale_log2;
  float inv_l_k;
  int l_q;
  int l_k;
  int causal_offset;
  bool causal;
  bool has_mask;
  bool bool_mask;
  const FA_DEVICE unsigned char* mask; ///< this (batch, head)'s [L_q, L_k]
  stride_t row_stride;
  stride_t col_stride;
  const FA_DEVICE float* lse; ///< this (batch, head)'s rows
  const FA_DEVICE float* d;

  /// s becomes P, dp becomes dS; rows and keys past the ends give zeros.
  /// Under a bool mask s has passed bool_mask_loads() first.
  FA_FUNC void apply(FA_THREAD float& s, FA_THREAD float& dp, int r, int c)
      const {
    if (r >= l_q || c >= l_k) {
      s = 0.0f;
      dp = 0.0f;
      return;
    }
    // A bool mask's hidden scores are -inf (BwdBoolMaskLoads).
    bool visible = (!causal || c <= r + causal_offset) &&
        !(has_mask && bool_mask && s == -FA_INFINITY);
    float x = s * scale_log2;
    if (has_mask && !bool_mask) {
      const AddMaskOp<T> op = {
          reinterpret_cast<const FA_DEVICE T*>(mask), row_stride, col_stride,
          l_q, l_k};
      x = op.apply(x, r, c);
    }
    const float lse2 = lse[r] * FA_LOG2E;
    if (!visible) {
      s = lse2 == -FA_INFINITY ? inv_l_k : 0.0f;
      dp = 0.0f;
      return;
    }
    bwd_visible_grads(s, dp, x, lse2, d[r]);
  }

  FA_FUNC BwdBoolMaskLoads bool_mask_loads() const {
    const BwdBoolMaskLoads op = {{
        reinterpret_cast<const FA_DEVICE bool*>(mask), row_stride, col_stride,
        l_q, l_k}};
    return op;
  }

  FA_FUNC BwdInteriorGrads interior() const {
    const BwdInteriorGrads op = {scale_log2, lse, d};
    return op;
  }
};

/// An element op on tiles whose rows are keys and columns queries where
/// kKeysAsRows (the dK/dV kernel's P^T and dS^T), else on queries by keys.
template <typename Op, bool kKeysAsRows>
struct BwdCoords {
  Op op;

  FA_FUNC void apply(FA_THREAD float& a, FA_THREAD float& b, int r, int c)
      const {
    if (kKeysAsRows) {
      op.apply(a, b, c, r);
    } else {
      op.apply(a, b, r, c);
    }
  }
};

/// The op for (batch, head), given the call's LSE and D ([B, H_q, L_q]).
template <typename T>
FA_FUNC BwdScoreGrads<T> backward_score_grads(
    const FA_CONSTANT AttnParams& p,
    const FA_DEVICE float* lse,
    const FA_DEVICE float* d,
    const FA_DEVICE unsigned char* mask,
    AttnFeatures f,
    int batch,
    int head) {
  const stride_t rows = (stride_t(batch) * p.H_q + head) * p.L_q;
  const stride_t elem = f.bool_mask ? 1 : stride_t(sizeof(T));
  BwdScoreGrads<T> g;
  g.scale_log2 = p.scale_log2;
  g.inv_l_k = 1.0f / float(p.L_k);
  g.l_q = p.L_q;
  g.l_k = p.L_k;
  g.causal_offset = p.causal_offset;
  g.causal = f.causal;
  g.has_mask = f.has_mask;
  g.bool_mask = f.bool_mask;
  g.mask = f.has_mask
      ? mask + (batch * p.mask_strides[0] + head * p.mask_strides[1]) * elem
      : mask;
  g.row_stride = p.mask_strides[2];
  g.col_stride = p.mask_strides[3];
  g.lse = lse + rows;
  g.d = d + rows;
  return g;
}

} // namespace fa
