// The attention masks as element ops for tile_map_coords: each maps a score
// (exp2 domain) at query row r and key column c to its masked value. Rows and
// columns are absolute positions in the [L_q, L_k] score matrix.
#pragma once

#include "mlx_fused_attn/kernels/mask_visits.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/dtype_of.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/ops.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

/// What a masked score becomes. MLX replaces a masked score with
/// finfo(dtype).min: finite, the same for every masked key, and below every
/// real score, so a row whose keys are all masked gets a uniform softmax (the
/// mean of V) and a sink then takes all the mass. This value does the same in
/// the exp2 domain; half of FLT_MAX stays finite when scaled by log2(e) and
/// when a real score is subtracted from it.
struct MaskedScore {
  FA_CONST float value = -0.5f * FA_FLT_MAX;
};

/// Bottom-right causal: query r sees key c iff c <= r + offset.
struct CausalMaskOp {
  int offset; ///< L_k - L_q

  FA_FUNC float apply(float s, int r, int c) const {
    return c <= r + offset ? s : MaskedScore::value;
  }
};

/// Keys past L_k in a ragged last block: -inf, so that they get no weight
/// even in a row where every real key is masked.
struct KeyLimitOp {
  int l_k;

  FA_FUNC float apply(float s, int r, int c) const {
    (void)r;
    return c < l_k ? s : -FA_INFINITY;
  }
};

/// A boolean mask read through its strides (0 on broadcast axes).
struct BoolMaskOp {
  const FA_DEVICE bool* mask; ///< this (batch, head)'s [L_q, L_k] slice
  stride_t row_stride;
  stride_t col_stride;
  int l_q;
  int l_k;

  /// Whether score (r, c), within the bounds, is shown.
  FA_FUNC bool shown(int r, int c) const {
    return mask[r * row_stride + c * col_stride];
  }

  FA_FUNC float apply(float s, int r, int c) const {
    const bool in_bounds = r < l_q && c < l_k;
    return in_bounds && !shown(r, c) ? MaskedScore::value : s;
  }
};

/// An additive mask in the input dtype, read through its strides. It is
/// added in the exp2 domain, so it is multiplied by log2(e) first; a finite
/// value so negative that the product would leave the range (an fp32
/// finfo.min mask) becomes the masked score, as it behaves in MLX, while -inf
/// stays -inf and NaN stays NaN.
template <typename T>
struct AddMaskOp {
  const FA_DEVICE T* mask; ///< this (batch, head)'s [L_q, L_k] slice
  stride_t row_stride;
  stride_t col_stride;
  int l_q;
  int l_k;

  FA_FUNC float apply(float s, int r, int c) const {
    if (r >= l_q || c >= l_k) {
      return s;
    }
    return add(s, static_cast<float>(mask[r * row_stride + c * col_stride]));
  }

  /// Score s (exp2 domain) with mask value m added.
  static FA_FUNC float add(float s, float m) {
    const float m2 = m * FA_LOG2E;
    return s +
        (m2 < MaskedScore::value && m > -FA_INFINITY ? MaskedScore::value : m2);
  }
};

/// A warp's shown bits of one key block, loaded before the block's
/// S = Q K^T so that their latency hides behind it: per row slot of the
/// score tile STile (the rows a lane holds), the words over the block's keys.
template <typename STile, int kBK>
struct MaskBits {
  FA_CONST int kWords = kBK > kMaskWordBits ? kBK / kMaskWordBits : 1;
  unsigned int words[STile::kRowSlots * kWords];
};

/// The shown bits (`words` words a row, from `bits`) of a warp's rows of
/// STile from row0 over the block of kBK columns from col0, into b: the
/// first register on each of the lane's rows loads that row.
template <typename STile, int kBK>
FA_FUNC void mask_bits_load(
    FA_THREAD MaskBits<STile, kBK>& b,
    const FA_DEVICE unsigned int* bits,
    stride_t words,
    int row0,
    int col0,
    lane_t lane) {
  typedef typename STile::frag_type F;
  typedef MaskBits<STile, kBK> Bits;
  const int word0 = col0 / kMaskWordBits;
  FA_UNROLL
  for (int ti = 0; ti < STile::kTileRows; ++ti) {
    FA_UNROLL
    for (int e = 0; e < F::kElems; ++e) {
      bool first = true;
      FA_UNROLL
      for (int e2 = 0; e2 < e; ++e2) {
        first = first && F::row_slot(e2) != F::row_slot(e);
      }
      if (first) {
        const int slot = ti * F::kRowsPerLane + F::row_slot(e);
        const int row = row0 + ti * F::kRows + F::row(lane, e);
        const FA_DEVICE unsigned int* src = bits + row * words + word0;
        FA_UNROLL
        for (int w = 0; w < Bits::kWords; ++w) {
          b.words[slot * Bits::kWords + w] = src[w];
        }
      }
    }
  }
}

/// hidden.apply(x) for each score x of the block from column col0 whose
/// shown bit (mask_bits_load) is clear. A fragment's columns lie in one
/// word (whole fragments of a block of whole words, or a block in one
/// word), which the unrolled loop picks at compile time; shifted right by
/// the lane's first column, each element's bit is a constant (a lane's
/// columns are its first plus the same offsets in every lane).
template <typename STile, int kBK, typename Hidden>
FA_FUNC void mask_bits_apply(
    FA_THREAD STile& s,
    const FA_THREAD MaskBits<STile, kBK>& bits,
    int col0,
    const FA_THREAD Hidden& hidden,
    lane_t lane) {
  typedef typename STile::frag_type F;
  typedef MaskBits<STile, kBK> Bits;
  static_assert(
      kMaskWordBits % F::kCols == 0, "a fragment's columns must lie in a word");
  const int shift = col0 % kMaskWordBits + F::col(lane, 0);
  FA_UNROLL
  for (int ti = 0; ti < STile::kTileRows; ++ti) {
    FA_UNROLL
    for (int tj = 0; tj < STile::kTileCols; ++tj) {
      const int w = (tj * F::kCols) / kMaskWordBits;
      FA_UNROLL
      for (int e = 0; e < F::kElems; ++e) {
        const int slot = ti * F::kRowsPerLane + F::row_slot(e);
        const int bit = (tj * F::kCols) % kMaskWordBits +
            (F::col(lane, e) - F::col(lane, 0));
        const bool shown =
            ((bits.words[slot * Bits::kWords + w] >> shift) & (1u << bit)) !=
            0;
        FA_THREAD typename F::elem_type& x = frag_at(s, ti, tj).v[e];
        x = shown ? x : hidden.apply(x);
      }
    }
  }
}

/// The masks of one warp's rows against the key block of a visit (kBK keys
/// from that block times kBK), applied by `apply`, which returns the scale
/// still to apply to the scores (the softmax folds it into its FFMA). Masks
/// act on scores in the exp2 domain, so a block with any mask is scaled
/// first; unmasked blocks (nearly all, without an array mask; the shown
/// blocks of one) keep the raw products, which needs a positive scale.
/// Lengths, strides and the scale are read from the parameters where used:
/// copies would hold registers across the key loop. Visits come from a list
/// only in kernels whose key blocks are whole shown-bits words, or lie in
/// one (attention.h).
///
/// kValuesStart: start may put mask values in the scores. Without it every
/// S starts at zero, which the product folds into its first step (no fill,
/// no accumulator read: wgmma's and mma.sync's zero accumulator), so a
/// kernel runs its key loop without it where no visit needs it
/// (starts_with_values).
template <typename T, int kBK, bool kValuesStart = true>
struct AttnBlockMasks {
  const FA_CONSTANT AttnParams* p;
  bool causal;
  bool has_mask;
  bool bool_mask;
  bool align_k; ///< every key block is whole
  int q_row0; ///< the warp's first query row
  int kb_causal; ///< the first block that the causal mask cuts
  int n_full_kblocks; ///< a ragged last block is block n_full_kblocks
  /// This (batch, head)'s mask, in elements of its type (bool or T).
  const FA_DEVICE unsigned char* mask;
  stride_t mask_offset;
  AttnVisits visits;
  /// What a two-valued block's hidden scores get: the masked score (bool),
  /// or the off value added, converted as AddMaskOp converts it.
  float off_value;
  /// off_value over the scale, for blocks that keep their raw products: a
  /// division once, not once a block.
  float off_raw;

  FA_FUNC void set_off_value(float off) {
    off_value = off;
    off_raw = off / p->scale_log2;
  }

  template <typename STile>
  struct Prefetch {
    typedef MaskBits<STile, kBK> type;
  };

  /// Whether start puts the values of any of the n visits from
  /// visits.first in the scores: known once a threadgroup, so that the key
  /// loop of masks without kValuesStart serves every other one.
  FA_FUNC bool starts_with_values(int n, lane_t lane) const {
    if (!has_mask || !values_in_products()) {
      return false;
    }
    if (!visits.list) {
      return true;
    }
    bool values = false;
    for (int i = lane; i < n; i += kSimdWidth) {
      values = values ||
          int(visits.list[visits.first + i] & 3u) == kMaskValues;
    }
    return FA_SIMD_ANY(values);
  }

  /// Starts the loads of visit v's shown bits where it is two-valued.
  template <typename STile>
  FA_FUNC void prefetch(
      FA_THREAD MaskBits<STile, kBK>& b,
      AttnVisit v,
      lane_t lane) const {
    if (!has_mask || !reads_bits(v.kind)) {
      return;
    }
    mask_bits_load(
        b, visits.bits, p->mask_block_strides[3], q_row0, v.block * kBK, lane);
  }

  /// Whether visit v keeps its raw products, the softmax's FFMA applying
  /// the scale (a positive one): unmasked blocks; shown and two-valued ones
  /// (an overflow of the off value over the scale to -inf hides the same
  /// scores in a row with a shown key; a row without one reads
  /// kMaskTwoValuedScaled or kMaskValues); and the additive values that
  /// start puts in the product.
  FA_FUNC bool raw_products(AttnVisit v) const {
    return scale_left_to_softmax(v.block) &&
        (!has_mask || v.kind == kMaskShown || v.kind == kMaskTwoValued ||
         (v.kind == kMaskValues && values_in_products()));
  }

  /// The scores' start before visit v's S = Q K^T: zero, or, for a block of
  /// additive values that the accumulator can carry, the values over the
  /// scale (the product then adds them for free, where reading them after
  /// it costs a pass over the scores and a wait for the loads).
  template <typename STile>
  FA_FUNC void start(FA_THREAD STile& s, AttnVisit v, lane_t lane) const {
    tile_fill(s, 0.0f);
    if (has_mask && values_in_products() && v.kind == kMaskValues &&
        scale_left_to_softmax(v.block)) {
      add_values(s, v.block * kBK, lane);
    }
  }

  /// Masks visit v's scores (what start left) and returns the scale still to
  /// apply.
  template <typename STile>
  FA_FUNC float apply(
      FA_THREAD STile& s,
      const FA_THREAD MaskBits<STile, kBK>& bits,
      AttnVisit v,
      lane_t lane) const {
    const int kb = v.block;
    const int key0 = kb * kBK;
    const int kind = has_mask ? v.kind : kMaskShown;
    if (raw_products(v)) {
      if (kind == kMaskTwoValued) {
        apply_two_valued(s, bits, key0, off_raw, lane);
      }
      return p->scale_log2;
    }
    const bool causal_block = causal && kb >= kb_causal;
    const bool ragged = !align_k && kb == n_full_kblocks;
    tile_scalar_op<MulOp>(s, p->scale_log2);
    if (causal_block) {
      const CausalMaskOp op = {p->causal_offset};
      tile_map_coords(s, op, q_row0, key0, lane);
    }
    if (reads_bits(kind)) {
      apply_two_valued(s, bits, key0, off_value, lane);
    }
    if (kind == kMaskValues && bool_mask) {
      const BoolMaskOp op = {
          reinterpret_cast<const FA_DEVICE bool*>(mask) + mask_offset,
          p->mask_strides[2], p->mask_strides[3], p->L_q, p->L_k};
      tile_map_coords(s, op, q_row0, key0, lane);
    }
    if (kind == kMaskValues && !bool_mask && p->mask_pairs) {
      add_value_pairs(s, key0, lane);
    }
    if (kind == kMaskValues && !bool_mask && !p->mask_pairs) {
      const AddMaskOp<T> op = {
          reinterpret_cast<const FA_DEVICE T*>(mask) + mask_offset,
          p->mask_strides[2], p->mask_strides[3], p->L_q, p->L_k};
      tile_map_coords(s, op, q_row0, key0, lane);
    }
    // Last, so that no mask turns a missing key into a masked one.
    if (ragged) {
      const KeyLimitOp op = {p->L_k};
      tile_map_coords(s, op, q_row0, key0, lane);
    }
    return 1.0f;
  }

 private:
  /// Whether a visit of this class reads its block's shown bits.
  static FA_FUNC bool reads_bits(int kind) {
    return kind == kMaskTwoValued || kind == kMaskTwoValuedScaled;
  }

  /// Whether key block kb's scores can stay unscaled into the softmax: no
  /// causal cut, no missing keys, and a positive scale.
  FA_FUNC bool scale_left_to_softmax(int kb) const {
    return !(causal && kb >= kb_causal) && (align_k || kb != n_full_kblocks) &&
        p->scale_log2 > 0.0f;
  }

  /// Every finite value of an additive mask in T, over any scale that the
  /// softmax can use, stays finite, and times log2(e) stays above the masked
  /// score: AddMaskOp's clamp never acts (fp16), so the value can go into
  /// the accumulator unclamped.
  FA_CONST bool kMaskExact = DTypeOf<T>::value == DType::Float16;

  /// Whether start puts kMaskValues blocks in the product: additive masks
  /// of kMaskExact types read with unit column stride.
  FA_FUNC bool values_in_products() const {
    return kValuesStart && kMaskExact && !bool_mask &&
        p->mask_strides[3] == 1;
  }

  /// A kMaskValues block of whole keys, unit column stride, into the zeroed
  /// scores: each value over the scale (the softmax's FFMA makes it the
  /// value times log2(e)).
  template <typename STile>
  FA_FUNC void add_values(FA_THREAD STile& s, int key0, lane_t lane) const {
    const ValuesOverScale op = {FA_LOG2E / p->scale_log2};
    for_value_pairs<true>(s, key0, op, lane);
  }

  /// A kMaskValues block's values added to its scaled scores as AddMaskOp
  /// adds them, a pair of columns a load (mask_pairs, whose even L_k leaves
  /// no pair across it). The pairs past L_k (a ragged block, which
  /// KeyLimitOp hides next) are left as they are.
  template <typename STile>
  FA_FUNC void
  add_value_pairs(FA_THREAD STile& s, int key0, lane_t lane) const {
    const ValuesAdded op = {};
    for_value_pairs<false>(s, key0, op, lane);
  }

  struct ValuesOverScale {
    float inv_scale;
    FA_FUNC void apply(FA_THREAD float& a, FA_THREAD float& b, float x, float y)
        const {
      a = x * inv_scale;
      b = y * inv_scale;
    }
  };
  struct ValuesAdded {
    FA_FUNC void apply(FA_THREAD float& a, FA_THREAD float& b, float x, float y)
        const {
      a = AddMaskOp<T>::add(a, x);
      b = AddMaskOp<T>::add(b, y);
    }
  };

  /// op.apply(s_c, s_c+1, m_c, m_c+1) for each column pair (c, c + 1) of
  /// the warp's scores of block key0 and the mask's values there (unit
  /// column stride): every target's score fragment holds its columns in
  /// pairs, registers 2j and 2j + 1 being columns c and c + 1 of one row,
  /// c even. With mask_pairs one load reads a pair; the offsets of a lane's
  /// columns from its first are constants, so each load is one instruction
  /// off a row pointer. Rows past L_q read row L_q - 1 (their output is never
  /// stored); unless kWholeKeys, pairs past L_k are skipped.
  template <bool kWholeKeys, typename STile, typename Op>
  FA_FUNC void for_value_pairs(
      FA_THREAD STile& s,
      int key0,
      const FA_THREAD Op& op,
      lane_t lane) const {
    typedef typename STile::frag_type F;
    const FA_DEVICE T* m = reinterpret_cast<const FA_DEVICE T*>(mask) +
        mask_offset + key0 + F::col(lane, 0);
    const bool pairs = p->mask_pairs != 0;
    FA_UNROLL
    for (int ti = 0; ti < STile::kTileRows; ++ti) {
      FA_UNROLL
      for (int e = 0; e < F::kElems; e += 2) {
        const int r = q_row0 + ti * F::kRows + F::row(lane, e);
        const FA_DEVICE T* row =
            m + (r < p->L_q ? r : p->L_q - 1) * p->mask_strides[2];
        FA_UNROLL
        for (int tj = 0; tj < STile::kTileCols; ++tj) {
          const int c = tj * F::kCols + (F::col(lane, e) - F::col(lane, 0));
          if (kWholeKeys || key0 + F::col(lane, 0) + c < p->L_k) {
            float x, y;
            if (pairs) {
              load_pair_as_float(row + c, x, y);
            } else {
              x = static_cast<float>(row[c]);
              y = static_cast<float>(row[c + 1]);
            }
            FA_THREAD typename F::elem_type* v = frag_at(s, ti, tj).v;
            op.apply(v[e], v[e + 1], x, y);
          }
        }
      }
    }
  }

  /// A two-valued block from its shown bits, `off` its hidden scores' value
  /// (bool) or addend: the choice made once a block, not once a score.
  template <typename STile>
  FA_FUNC void apply_two_valued(
      FA_THREAD STile& s,
      const FA_THREAD MaskBits<STile, kBK>& bits,
      int key0,
      float off,
      lane_t lane) const {
    if (bool_mask) {
      const OffValue op = {off};
      mask_bits_apply(s, bits, key0, op, lane);
    } else {
      const OffAdded op = {off};
      mask_bits_apply(s, bits, key0, op, lane);
    }
  }
  struct OffValue {
    float off;
    FA_FUNC float apply(float) const {
      return off;
    }
  };
  struct OffAdded {
    float off;
    FA_FUNC float apply(float x) const {
      return x + off;
    }
  };
};

/// The masks of a warp whose rows start at query row q_row0 of (batch,
/// head); the caller sets the fields that depend on its blocking (align_k,
/// kb_causal, visits, set_off_value).
template <typename T, int kBK, bool kValuesStart>
FA_FUNC AttnBlockMasks<T, kBK, kValuesStart> attention_block_masks(
    const FA_CONSTANT AttnParams& p,
    const FA_DEVICE unsigned char* mask,
    bool causal,
    bool has_mask,
    bool bool_mask,
    int batch,
    int head,
    int q_row0) {
  AttnBlockMasks<T, kBK, kValuesStart> m;
  m.p = &p;
  m.causal = causal;
  m.has_mask = has_mask;
  m.bool_mask = bool_mask;
  m.align_k = false;
  m.q_row0 = q_row0;
  m.kb_causal = 0;
  m.n_full_kblocks = p.L_k / kBK;
  m.mask = mask;
  m.mask_offset = batch * p.mask_strides[0] + head * p.mask_strides[1];
  m.visits.list = 0;
  m.visits.bits = 0;
  m.visits.first = 0;
  m.set_off_value(MaskedScore::value);
  return m;
}

} // namespace fa
