// Which quantized kernel a GPU plan runs (quantized_attention_planner.cpp):
// its tiles, the loader's chunk policy and the threadgroups a multiprocessor
// its key splits fill. Host arithmetic, free of MLX, so that the host tests
// check the planner's own choice (tests/test_quantized_kernel_choice_compile.py)
// and the instance list holds exactly the kernels it can pick.
#pragma once

#include <cstdint>
#include <optional>

#include "mlx_fused_attn/families/quantized_attention/quantized_attention_chunks.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_config.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/plan/quantized_tiles_kind.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn {

struct QuantizedKernelChoice {
  fa::AttnTiles tiles;
  fa::QuantizedChunks chunks = fa::QuantizedChunks::Float;
  /// Threadgroups a multiprocessor that the key splits fill: the wave is
  /// this times the cores (split_count.h's key_split_count).
  int64_t per_core = 1;
};

/// Keys a decode-tile threadgroup must visit, at a grid of every
/// multiprocessor's min_blocks of them, for the decode tiles to beat the
/// default ones. H100 decode sweep (benchmarks/cuda_quant_decode_sweep.cu,
/// bf16, 4 bits, groups of 64, D = 128, 32/8 heads; kernel us, each
/// tile's best chunk policy): B=8 with 32K keys, 64 query blocks, 1985
/// keys a threadgroup: 149.5 decode tiles (16 splits) against 207.6
/// default (4); B=1 with 32K keys, 8 blocks, 248 keys: 40.4 (128 splits)
/// against 36.6 (32); B=1 with 4K, 31 keys: 15.4 against 14.1. Few query
/// blocks spread over the machine leave each one-warp threadgroup so few
/// keys that its fixed costs (Q, the partial row, the combine's share)
/// outweigh the default tiles' one warp of products in four; many fill
/// the eight threadgroups a multiprocessor holds with long runs of keys.
/// The boundary lies between 248 and 1985 keys (untimed in between).
constexpr int64_t kQuantizedDecodeTilesMinKeys = 1024;

/// Whether the 16-row tiles (the decode and the key-slice tiles) have
/// kernels at (head_dim, bits, dtype): CUDA, 16-bit dtypes at D <= 128
/// (has_quantized_decode_tiles) and 4 bits (the sweep's; the instance list
/// holds no others).
constexpr bool quantized_row_tiles_exist(
    int head_dim,
    int bits,
    fa::DType dtype,
    fa::Backend backend) {
  return fa::has_quantized_decode_tiles(head_dim, dtype, backend) &&
      bits == 4;
}

/// Whether the 16-row tiles can run the (packed) call `p`: they exist, and
/// its rows fit their block (decode, GQA's query heads packed as rows).
inline bool quantized_row_tiles_apply(
    const fa::AttnParams& p,
    int bits,
    fa::DType dtype,
    fa::Backend backend) {
  return quantized_row_tiles_exist(p.D, bits, dtype, backend) &&
      p.L_q <= fa::choose_quantized_decode_tiles().bq;
}

/// Keys a key-slice threadgroup must visit, at a grid of every
/// multiprocessor's min_blocks of them, for the key slices to beat the
/// default tiles, which hold the same 16 rows (H100 decode sweep, as
/// above, 2026-12-06): B=1 with 32K keys, 993 keys a threadgroup: 33.2 us
/// (32 splits) against 36.3; with 4K, 124 keys: 14.2 against 13.8, and
/// 4133 keys: 16.3 against 15.4. Each warp's own softmax of its quarter of
/// the keys, and the merge, cost more than the products they spread over
/// the four schedulers where a threadgroup sees few blocks. The boundary
/// lies between 124 and 993 keys (untimed in between).
constexpr int64_t kQuantizedKeySlicesMinKeys = 512;

/// Whether `tiles` pay for `p` on `cores` multiprocessors: the keys a
/// threadgroup visits when the query blocks (B x H_q, one a head of packed
/// rows) split their keys over every multiprocessor's min_blocks
/// threadgroups reach `min_keys`.
inline bool quantized_tiles_pay(
    const fa::AttnParams& p,
    int cores,
    fa::AttnTiles t,
    int64_t min_keys) {
  const int64_t query_blocks =
      int64_t((p.L_q + t.bq - 1) / t.bq) * p.H_q * p.B;
  return int64_t(p.L_k) * query_blocks >= min_keys * cores * t.min_blocks;
}

/// The tiles of the (packed) call `p` (quantized_row_tiles_apply's
/// arguments): where the 16-row tiles apply, `forced` (kernel_switches.h),
/// else the decode tiles where they pay, then the key-slice tiles where
/// they pay; the default tiles elsewhere.
inline QuantizedTilesKind quantized_tiles_kind(
    const fa::AttnParams& p,
    int bits,
    fa::DType dtype,
    fa::Backend backend,
    int cores,
    std::optional<QuantizedTilesKind> forced) {
  if (!quantized_row_tiles_apply(p, bits, dtype, backend)) {
    return QuantizedTilesKind::Default;
  }
  if (forced) {
    return *forced;
  }
  if (quantized_tiles_pay(
          p, cores, fa::choose_quantized_decode_tiles(),
          kQuantizedDecodeTilesMinKeys)) {
    return QuantizedTilesKind::Decode;
  }
  if (quantized_tiles_pay(
          p, cores, fa::choose_quantized_sliced_tiles(),
          kQuantizedKeySlicesMinKeys)) {
    return QuantizedTilesKind::KeySlices;
  }
  return QuantizedTilesKind::Default;
}

/// The tiles of each kind at (head_dim, dtype) on `backend`.
inline fa::AttnTiles quantized_tiles_of(
    QuantizedTilesKind kind,
    int head_dim,
    fa::DType dtype,
    fa::Backend backend) {
  switch (kind) {
    case QuantizedTilesKind::Decode:
      return fa::choose_quantized_decode_tiles();
    case QuantizedTilesKind::KeySlices:
      return fa::choose_quantized_sliced_tiles();
    case QuantizedTilesKind::Default:
      break;
  }
  return fa::choose_quantized_attention_tiles(head_dim, dtype, backend);
}

/// The kernel of the (packed) call `p` with K and V of `bits` in groups of
/// `group_size`, in `dtype` on `backend` with `cores` multiprocessors.
/// `forced_tiles`: the tiles where the decode tiles apply, the rule where
/// unset; `float_chunks`: QuantizedFloatChunks at any tiles
/// (kernel_switches.h's switches).
/// - Tiles: quantized_tiles_kind's.
/// - Chunks: choose_quantized_chunks on CUDA; Metal's loader has only
///   QuantizedFloatChunks.
/// - Threadgroups a multiprocessor: the default and key-slice tiles'
///   blocks in flight for kBytesInFlightPerCore (blocks_for_bytes_in_flight:
///   2 at 4 bits, D = 128); the decode tiles' every slot (min_blocks, 8),
///   twice the bytes rule's 4, since a one-warp threadgroup stalls on its
///   own barriers: B=8, 32K keys ran 176.5 us at the rule's 8 splits, 151.8
///   at 16 (the sweep's rows-fastest rows).
inline QuantizedKernelChoice choose_quantized_kernel(
    const fa::AttnParams& p,
    int bits,
    int group_size,
    fa::DType dtype,
    fa::Backend backend,
    int cores,
    std::optional<QuantizedTilesKind> forced_tiles,
    bool float_chunks) {
  QuantizedKernelChoice choice;
  const QuantizedTilesKind kind =
      quantized_tiles_kind(p, bits, dtype, backend, cores, forced_tiles);
  choice.tiles = quantized_tiles_of(kind, p.D, dtype, backend);
  if (backend == fa::Backend::Cuda) {
    choice.chunks = fa::choose_quantized_chunks(
        choice.tiles, p.D, bits, dtype, float_chunks);
  }
  const int64_t bytes_a_key = quantized_kv_bytes_a_key(
      p.D, p.D_v, bits, group_size, fa::dtype_size(dtype));
  choice.per_core = kind == QuantizedTilesKind::Decode
      ? choice.tiles.min_blocks
      : blocks_for_bytes_in_flight(
            choice.tiles.bk * bytes_a_key, choice.tiles.min_blocks);
  return choice;
}

/// `f(tiles, chunks)` for every kernel choose_quantized_kernel can pick on
/// CUDA at (head_dim, bits, dtype), under any switch, each once: the
/// default tiles and, where they exist, the decode and key-slice tiles,
/// each in its chosen policy and in QuantizedFloatChunks (forced, or where
/// the words are not aligned for the chosen one). The instance list's walk
/// (quantized_attention_instances.h).
template <typename F>
void for_each_quantized_cuda_kernel(
    int head_dim,
    int bits,
    fa::DType dtype,
    const F& f) {
  for (const QuantizedTilesKind kind :
       {QuantizedTilesKind::Default, QuantizedTilesKind::Decode,
        QuantizedTilesKind::KeySlices}) {
    if (kind != QuantizedTilesKind::Default &&
        !quantized_row_tiles_exist(
            head_dim, bits, dtype, fa::Backend::Cuda)) {
      continue;
    }
    const fa::AttnTiles tiles =
        quantized_tiles_of(kind, head_dim, dtype, fa::Backend::Cuda);
    f(tiles, fa::QuantizedChunks::Float);
    const fa::QuantizedChunks chosen =
        fa::choose_quantized_chunks(tiles, head_dim, bits, dtype, false);
    if (chosen != fa::QuantizedChunks::Float) {
      f(tiles, chosen);
    }
  }
}

} // namespace mlx_fused_attn
