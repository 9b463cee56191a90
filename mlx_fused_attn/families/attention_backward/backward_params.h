// Parameters of the fused attention backward, shared by the host code and
// every backward kernel (CPU, Metal, CUDA and the Metal emulator). Plain old
// data, like AttnParams (params.h), which it extends.
//
// The row log-sum-exp (LSE) that the forward saves for the backward:
//   - fp32, contiguous [B, H_q, L_q]: row i of head h of batch b is element
//     (b * H_q + h) * L_q + i;
//   - natural log of the sum of exp over the row's scaled, masked scores,
//     the sink's logit included: P = exp(scale * q k^T + mask - LSE);
//   - -inf for a row no key is visible to (a bool or causal mask hides every
//     key and there is no sink). MLX gives such a row's masked scores
//     finfo(dtype).min, so its output is the mean of V: the backward gives
//     it P = 1 / L_k on every key (dV only) and dS = 0. An additive mask of
//     -inf everywhere also ends at -inf; its output and gradients are NaN,
//     as softmax over nothing is in MLX.
#pragma once

#include "mlx_fused_attn/params.h"

namespace fa {

struct AttnBwdParams {
  /// Shapes, scale and the strides of q, k, v, the mask, and in o_strides
  /// those of the forward's output O.
  AttnParams fwd;
  /// Strides, in elements, for the batch, head and sequence axes of dO and
  /// of the gradients; the head dimension is contiguous in each.
  stride_t do_strides[3];
  stride_t dq_strides[3];
  stride_t dk_strides[3];
  stride_t dv_strides[3];
  /// The mask's block lists where bound (kernels/mask_visits.h): strides of
  /// their batch and head slices (0 on broadcast axes), the length of a
  /// dK/dV row, where the dQ rows start and the length of a dQ row.
  stride_t list_strides[2];
  stride_t dkdv_list_row;
  stride_t dq_lists_start;
  stride_t dq_list_row;
};

} // namespace fa
