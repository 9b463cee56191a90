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

/// How a masked block's op reads the mask: hidden scores already -inf (a
/// bool mask's shown bits, applied to the block first), a bool mask's byte,
/// or an additive mask's value.
enum BwdMaskRead { kBwdHiddenInScores, kBwdMaskBytes, kBwdMaskValues };

template <typename T>
struct BwdScoreGrads {
  float scale_log2;
  float inv_l_k;
  int l_q;
  int l_k;
  int causal_offset;
  bool causal;
  const FA_DEVICE unsigned char* mask; ///< this (batch, head)'s [L_q, L_k]
  stride_t row_stride;
  stride_t col_stride;
  const FA_DEVICE float* lse; ///< this (batch, head)'s rows
  const FA_DEVICE float* d;

  /// Without a mask: s becomes P, dp becomes dS; rows and keys past the
  /// ends give zeros.
  FA_FUNC void apply(FA_THREAD float& s, FA_THREAD float& dp, int r, int c)
      const {
    if (r >= l_q || c >= l_k) {
      s = 0.0f;
      dp = 0.0f;
      return;
    }
    const bool visible = !causal || c <= r + causal_offset;
    const float x = s * scale_log2;
    const float lse2 = lse[r] * FA_LOG2E;
    if (!visible) {
      s = lse2 == -FA_INFINITY ? inv_l_k : 0.0f;
      dp = 0.0f;
      return;
    }
    bwd_visible_grads(s, dp, x, lse2, d[r]);
  }

  /// The same under a mask read as kRead says, with no branch: every
  /// element loads its mask element, LSE and D (in a block with rows or
  /// keys past the ends, unless kWhole, the last row's or key's, their
  /// results zeroed), so that a block's loads issue together. Early
  /// returns, as apply's, make each element's loads wait for the last
  /// element's.
  template <int kRead, bool kWhole>
  FA_FUNC void apply_masked(
      FA_THREAD float& s,
      FA_THREAD float& dp,
      int r,
      int c) const {
    const bool in = kWhole || (r < l_q && c < l_k);
    const int rr = (kWhole || r < l_q) ? r : l_q - 1;
    const int cc = (kWhole || c < l_k) ? c : l_k - 1;
    const stride_t at = rr * row_stride + cc * col_stride;
    bool visible = in && (!causal || c <= r + causal_offset);
    float x = s * scale_log2;
    if (kRead == kBwdHiddenInScores) {
      visible = visible && s != -FA_INFINITY;
    } else if (kRead == kBwdMaskBytes) {
      visible = visible && reinterpret_cast<const FA_DEVICE bool*>(mask)[at];
    } else {
      x = AddMaskOp<T>::add(
          x, static_cast<float>(reinterpret_cast<const FA_DEVICE T*>(mask)[at]));
    }
    const float lse2 = lse[rr] * FA_LOG2E;
    const float d_r = d[rr];
    // A hidden score's P: 1 / L_k where its row sees no key.
    const float hidden_p = lse2 == -FA_INFINITY ? inv_l_k : 0.0f;
    const float p = FA_EXP2(x - lse2);
    s = visible ? p : (in ? hidden_p : 0.0f);
    dp = visible ? p * (dp - d_r) : 0.0f;
  }

  FA_FUNC BwdInteriorGrads interior() const {
    const BwdInteriorGrads op = {scale_log2, lse, d};
    return op;
  }
};

/// BwdScoreGrads' masked op (apply_masked) as an element op.
template <typename T, int kRead, bool kWhole>
struct BwdMaskedGrads {
  BwdScoreGrads<T> grads;

  FA_FUNC void apply(FA_THREAD float& s, FA_THREAD float& dp, int r, int c)
      const {
    grads.template apply_masked<kRead, kWhole>(s, dp, r, c);
  }
};

/// A bool mask's hidden score from its shown bits (mask_bits_apply):
/// apply_masked<kBwdHiddenInScores> reads it as hidden.
struct BwdHiddenScore {
  FA_FUNC float apply(float) const {
    return -FA_INFINITY;
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
