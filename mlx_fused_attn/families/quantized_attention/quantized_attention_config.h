// Compile-time choices of the quantized-KV attention family
// (quantized_attention.h), shared by the host, the instantiation lists and
// the kernels' static_asserts: which calls it takes and its tiles.
#pragma once

#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/tile/platform.h"

namespace fa {

/// The head dims with a kernel (q, k and v alike): the float kernels' head
/// dims that are whole groups of 32, the smallest group MLX quantizes (D =
/// 32 is one group: it takes groups of 32 only).
#define FA_QUANTIZED_ATTENTION_HEAD_DIMS(X) \
  X(32) X(64) X(96) X(128) X(192) X(256)

/// The bits a value with a kernel: mlx-lm's QuantizedKVCache takes 4 or 8.
#define FA_QUANTIZED_ATTENTION_BITS(X) X(4) X(8)

constexpr bool quantized_attention_head_dim_listed(int head_dim) {
#define FA_QUANTIZED_IS(x) head_dim == x ||
  return FA_QUANTIZED_ATTENTION_HEAD_DIMS(FA_QUANTIZED_IS) false;
#undef FA_QUANTIZED_IS
}

constexpr bool quantized_attention_bits_listed(int bits) {
#define FA_QUANTIZED_IS(x) bits == x ||
  return FA_QUANTIZED_ATTENTION_BITS(FA_QUANTIZED_IS) false;
#undef FA_QUANTIZED_IS
}

/// Whether a kernel takes K and V of head dim `head_dim` (and `head_dim_v`)
/// quantized to `bits` in groups of `group_size`: equal head dims with an
/// instance, bits with one, and a group of 32, 64 or 128 that divides the
/// head dim (mx.quantize's own rule for the last axis).
constexpr bool quantized_attention_covers(
    int head_dim,
    int head_dim_v,
    int bits,
    int group_size) {
  return quantized_attention_head_dim_listed(head_dim) &&
      head_dim_v == head_dim && quantized_attention_bits_listed(bits) &&
      (group_size == 32 || group_size == 64 || group_size == 128) &&
      head_dim % group_size == 0;
}

/// The tiles of the quantized kernels. One K/V stage in threadgroup
/// memory, which the threads fill by dequantizing the block they loaded
/// into registers during the last block's products (the register stage,
/// tile/quantized_kv_target.h), and each warp's mma.sync or simdgroup
/// products on padded blocks. Metal: the
/// float kernels' default tiles (a block is the same bytes in threadgroup
/// memory). CUDA: 64 queries in 4 warps; past D = 128, Q in shared memory,
/// as the float kernels' mma.sync tiles keep it at D = 256, and 32-key
/// blocks. Timed on an H100 at decode (quantized_kernel_choice.h).
constexpr AttnTiles choose_quantized_attention_tiles(
    int head_dim,
    DType dtype,
    Backend backend) {
  if (backend == Backend::Metal) {
    return choose_attention_tiles(head_dim, head_dim, dtype, backend, false);
  }
  if (head_dim > 128) {
    return AttnTiles{64, 32, 4, 1, 1, false, true};
  }
  return dtype == DType::Float32 ? AttnTiles{64, 32, 4, 1, 1}
                                 : AttnTiles{64, 64, 4, 1, 2};
}

/// CUDA's decode tiles of the quantized kernels, for calls whose rows fill
/// one warp's 16 (decode with GQA's query heads packed as rows: 4 of 16
/// at 32 query heads on 8): one warp a threadgroup, which dequantizes its
/// 32-key blocks and runs their products itself. The default tiles give
/// such a call one warp with rows of four, which runs every product on
/// one of a multiprocessor's four schedulers beside its share of the
/// dequantizing, while the other three only dequantize
/// (benchmarks/cuda_quant_decode_sweep.cu); here every warp has rows and
/// its barriers are its own, and a multiprocessor holds eight threadgroups
/// (min_blocks: ptxas's ~250 registers a thread, 17 KB of blocks each),
/// two a scheduler. 32-key blocks keep a block's staged words (a thread's
/// 256 values) in registers beside Q and O. 16-bit dtypes at D <= 128
/// (the default tiles' mma.sync range with Q in registers); elsewhere none
/// (has_quantized_decode_tiles). The planner takes them at 4 bits where
/// plan/quantized_kernel_choice.h's rule says they pay.
constexpr bool has_quantized_decode_tiles(
    int head_dim,
    DType dtype,
    Backend backend) {
  return backend == Backend::Cuda && dtype != DType::Float32 &&
      head_dim <= 128;
}

constexpr AttnTiles choose_quantized_decode_tiles() {
  return AttnTiles{16, 32, 1, 1, 8};
}

/// CUDA's key-slice tiles of the quantized kernels, where the decode tiles
/// exist, for decode with too few query blocks for them: one block of 16
/// rows whose 64-key blocks four warps load and dequantize together, as the
/// default tiles do, each warp then running the products of 16 of the keys
/// (AttnTiles::key_slices, kernels/key_slices.h). The default tiles hold
/// such rows in one warp, so every product of the multiprocessor's
/// threadgroups runs on one of its four schedulers.
constexpr AttnTiles choose_quantized_sliced_tiles() {
  return AttnTiles{16, 64, 4, 1, 2, false, false, false, false, false, true};
}

/// Whether `tiles` are tiles of the quantized kernels at (head_dim, dtype)
/// on CUDA: the default ones, or the decode or key-slice ones where there
/// are.
constexpr bool quantized_attention_tiles_listed(
    AttnTiles tiles,
    int head_dim,
    DType dtype) {
  return tiles ==
      choose_quantized_attention_tiles(head_dim, dtype, Backend::Cuda) ||
      (has_quantized_decode_tiles(head_dim, dtype, Backend::Cuda) &&
       (tiles == choose_quantized_decode_tiles() ||
        tiles == choose_quantized_sliced_tiles()));
}

/// QuantizedBlockLoader's kRowsFastest for rows of `head_dim` values and
/// `threads` threads: the threads are whole rows of 32-value chunks, and
/// whole groups of eight rows' chunks (the CUDA kernels static_assert
/// that it agrees).
constexpr bool quantized_rows_fastest_applies(int head_dim, int threads) {
  const int chunks_a_row = head_dim / 32;
  return threads % chunks_a_row == 0 && threads % (8 * chunks_a_row) == 0;
}

} // namespace fa
