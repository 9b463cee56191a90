// Which key blocks a query block visits under an array mask, from the mask's
// block classes (mlx_fused_attn/mask_visits.cpp builds them before the
// kernel runs). Per (mask batch, mask head, query block) a row of ints:
//
//   count, then count entries kb * 2 + mixed, kb ascending
//
// Blocks whose every score is masked are left out (skipped), entries with
// mixed = 0 are all visible (no mask read), mixed = 1 are read as before. A
// query block holding a row whose every key is masked lists every block as
// mixed, so that such a row still gets MLX's uniform softmax.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// A query block's visits; with no list, every block in order, all mixed.
struct AttnVisits {
  const FA_DEVICE int* list; ///< the row's entries (after its count), or null

  /// The key block of visit i.
  FA_FUNC int block(int i) const {
    return list ? list[i] >> 1 : i;
  }
  /// Whether visit i must read the mask.
  FA_FUNC bool mixed(int i) const {
    return list ? (list[i] & 1) != 0 : true;
  }
};

/// The visits of (batch, head, q_block) in `rows` (null: no list), and
/// their count into n_visits (left as it is without a list).
FA_FUNC AttnVisits attention_visits(
    const FA_CONSTANT AttnParams& p,
    const FA_DEVICE int* rows,
    int batch,
    int head,
    int q_block,
    FA_THREAD int& n_visits) {
  AttnVisits v = {rows};
  if (rows) {
    const FA_DEVICE int* row = rows + batch * p.visit_strides[0] +
        head * p.visit_strides[1] + q_block * p.visit_strides[2];
    n_visits = row[0];
    v.list = row + 1;
  }
  return v;
}

} // namespace fa
