// Compile-time choices of the attention kernel, shared by the host dispatch,
// the instantiation lists and the kernels' static_asserts: which head dims
// exist and which tiles each (head dim, dtype, backend, causal) runs with.
#pragma once

#include "mlx_fused_attn/tile/target.h"

namespace fa {

struct AttnTiles {
  int bq; ///< query rows per threadgroup (block)
  int bk; ///< keys per streamed K/V block
  int warps; ///< simdgroups (warps) per threadgroup; each owns bq / warps rows
};

constexpr bool operator==(AttnTiles a, AttnTiles b) {
  return a.bq == b.bq && a.bk == b.bk && a.warps == b.warps;
}

/// The head dims with a kernel (q, k and v share one head dim).
constexpr bool attention_head_dim_supported(int head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 80 || head_dim == 96 ||
      head_dim == 128;
}

/// The one tile chooser.
///
/// Metal: 4 simdgroups of 8 query rows and 32-key blocks, bk = 16 at
/// D = 128: the shapes MLX's steel attention runs on the same GPUs. With K
/// and V blocks both resident, bk = 16 also keeps fp32 at D = 128 within
/// 32 KB of threadgroup memory (2 * 16 * (128 + 4) * 4 B = 16.5 KB; bk = 32
/// would need 33 KB). Causal runs are function-constant variants of the same
/// pipeline, so on Metal the choice must not depend on `causal`.
///
/// CUDA: m16n8k16 fragments need 16 query rows per warp; 4 warps of 16 rows
/// and 64-key blocks (32 from D = 96 up, to bound registers and shared
/// memory) are the starting point the CUDA backend tunes from.
///
/// No choice depends on the dtype or on causal yet; they are inputs so that
/// a tuned choice changes here and nowhere else.
constexpr AttnTiles choose_attention_tiles(
    int head_dim,
    DType /* dtype */,
    Backend backend,
    bool /* causal */) {
  return backend == Backend::Metal ? AttnTiles{32, head_dim < 128 ? 32 : 16, 4}
                                   : AttnTiles{64, head_dim < 96 ? 64 : 32, 4};
}

} // namespace fa
