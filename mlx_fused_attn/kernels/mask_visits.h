// An array mask classified by block (op/mask_block_lists.cpp builds
// it with MLX ops before the kernel runs, once per mask array). Per (mask
// batch, mask head) slice, uint32:
//
//   n_qb visit rows of n_kb + 3:  count, off_row, off_col, then count
//                                 entries kb * 4 + class, kb ascending
//   then the shown bits:          n_qb * kBQ rows of whole words over whole
//                                 key blocks, bit c of a row set where key
//                                 c is shown
//
// A query block visits only the key blocks its row lists; blocks whose
// every score is hidden are left out (skipped). Classes: kMaskShown, every
// score unchanged (no mask read); kMaskTwoValued, each score either shown or
// the one off value at (off_row, off_col) of the slice (the shown bits are
// read, and that one element); kMaskValues, anything else (the mask is read
// element by element). A query block holding a row whose every key is hidden
// lists every block, so that such a row still gets MLX's softmax over all
// its keys: a bool mask's as kMaskTwoValuedScaled (read as kMaskTwoValued,
// but scaled before the select, so that every hidden score is the one
// masked score), an additive mask's as kMaskValues.
//
// The backward's lists (backward_mask_lists), per slice, uint32:
//
//   a row per key block of the dK/dV kernel (its kBQ keys): count, then
//                                 qb * 4 + class for each block of kBK
//                                 queries it streams, qb ascending
//   then, for a bool mask, the dK/dV kernel's shown bits: a row per key
//                                 (whole key blocks) of whole words over
//                                 whole query blocks (mask_bit_words), bit c
//                                 of a row set where query c sees the key
//   then a row per query block of the dQ kernel (its kBQ queries): count,
//                                 then kb * 4 + class for each block of kBK
//                                 keys, kb ascending
//   then, for a bool mask, the dQ kernel's shown bits: a row per query
//                                 (whole query blocks) of whole words over
//                                 whole key blocks
//
// Left out, as above: the blocks whose every score is hidden, unless a row
// of the block sees no key (under a bool mask that row's P is 1 / L_k on
// every key, under an additive one NaN). Classes: kMaskShown (no mask read),
// kMaskTwoValued (a bool mask's other blocks: its shown bits are read) or
// kMaskValues (an additive mask's other blocks: read element by element).
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

FA_CONST int kMaskShown = 0;
FA_CONST int kMaskTwoValued = 1;
FA_CONST int kMaskValues = 2;
FA_CONST int kMaskTwoValuedScaled = 3;
/// Bits of a shown-bits word.
FA_CONST int kMaskWordBits = 32;

/// One visit: a key block and its class.
struct AttnVisit {
  int block;
  int kind;
};

/// A query block's key-block visits from visit `first` on (a split's first,
/// split_keys.h); with no list, blocks first, first + 1, ... all kMaskValues.
struct AttnVisits {
  const FA_DEVICE unsigned int* list; ///< the row's entries, or null
  const FA_DEVICE unsigned int* bits; ///< the slice's shown bits
  int first;

  /// The key block of visit i.
  FA_FUNC int block(int i) const {
    return list ? int(list[first + i] >> 2) : first + i;
  }
  /// Visit i, its entry read once: the masks take it by value, since a
  /// product's memory clobber would make every later read of the list a
  /// new load.
  FA_FUNC AttnVisit at(int i) const {
    if (!list) {
      const AttnVisit v = {first + i, kMaskValues};
      return v;
    }
    const unsigned int e = list[first + i];
    const AttnVisit v = {int(e >> 2), int(e & 3u)};
    return v;
  }
};

/// The words of a row of shown bits over n columns taken in whole blocks of
/// kB columns (plan/mask_list_layout.h's visit_rows): whole words over
/// whole blocks, or over whole words of blocks that lie in one.
template <int kB>
FA_FUNC int mask_bit_words(int n) {
  const int unit = kB > kMaskWordBits ? kB : kMaskWordBits;
  return (n + unit - 1) / unit * (unit / kMaskWordBits);
}

/// The visits of (batch, head, q_block) of kBQ rows in `blocks` (null: no
/// list), with their count into n_visits (left as it is
/// without a list), and the off value's position into off_row and off_col.
template <int kBQ>
FA_FUNC AttnVisits attention_visits(
    const FA_CONSTANT AttnParams& p,
    const FA_DEVICE unsigned int* blocks,
    int batch,
    int head,
    int q_block,
    FA_THREAD int& n_visits,
    FA_THREAD int& off_row,
    FA_THREAD int& off_col) {
  AttnVisits v = {blocks, blocks, 0};
  if (blocks) {
    const FA_DEVICE unsigned int* slice = blocks +
        batch * p.mask_block_strides[0] + head * p.mask_block_strides[1];
    const int n_qb = (p.L_q + kBQ - 1) / kBQ;
    const FA_DEVICE unsigned int* row =
        slice + q_block * p.mask_block_strides[2];
    n_visits = int(row[0]);
    off_row = int(row[1]);
    off_col = int(row[2]);
    v.list = row + 3;
    v.bits = slice + n_qb * p.mask_block_strides[2];
  }
  return v;
}

} // namespace fa
