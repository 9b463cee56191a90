// CUDA entry points of the quantized-KV attention family. The body is
// quantized_attention.h (the float kernels' body over a dequantizing K/V
// policy), the same one Metal runs; this file declares the shared memory,
// fixes the features that change the inner loop and maps the grid.
//
// Template: element type, head dim (q, k and v alike), bits a value, tiles
// (a type whose `value` is an AttnTiles, kernel_tiles.h; q_shared: Q in
// shared memory, CudaSharedQTarget's, under the quantized loader) and the
// two features that change the inner loop's code, causal and an array
// mask; the others arrive in args.features. kRegisterStaged: the K/V
// schedule (quantized_kv_target.h); Chunks: how the loader places, loads
// and dequantizes a thread's chunks (quantized_block_loader.h's
// QuantizedFloatChunks, or tile/cuda_quantized_chunks.h's 16-bit pairs,
// 16-byte word loads, whose alignment the caller vouches for, and row-major
// placement). The library's instances take the register stage with the
// chunk policies the plan picks (quantized_attention_chunks.h); the decode
// sweep also times the others.
//
// Grid: (query blocks * n_splits, H_q, B), the split being the block index
// modulo n_splits; block: tiles.warps * 32 threads; dynamic shared memory:
// attention_smem_bytes(tiles, D, D, dtype, Backend::Cuda). With split keys
// (n_splits > 1) the kernel writes partials that the last split of each
// query block merges into the output where args.split_counters is bound
// (kernels/cuda/split_merge.cuh), quantized_split_combine_kernel where not.
#pragma once

#include "mlx_fused_attn/families/quantized_attention/quantized_attention.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_args.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_kernel_args.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_config.h"
#include "mlx_fused_attn/kernels/cuda/block_sizes.h"
#include "mlx_fused_attn/kernels/cuda/kernel_tiles.h"
#include "mlx_fused_attn/kernels/cuda/split_combine.cuh"
#include "mlx_fused_attn/kernels/cuda/split_merge.cuh"
#include "mlx_fused_attn/kernels/split_keys.h"
#include "mlx_fused_attn/tile/cuda_quantized_chunks.h"
#include "mlx_fused_attn/tile/cuda_target.h"
#include "mlx_fused_attn/tile/dtype_of.h"
#include "mlx_fused_attn/tile/quantized_kv_target.h"

namespace fa {

/// Whether an instance's tiles are the chooser's, and the shared memory the
/// host gives it (attention_smem_bytes) is exactly that of its blocks.
/// Variables, so that the host functions are evaluated outside the kernel.
template <typename T, int D, typename Tiles>
constexpr bool kQuantizedTilesAgree =
    quantized_attention_tiles_listed(Tiles::value, D, DTypeOf<T>::value);
template <typename Target, typename Shape, typename Tiles>
constexpr bool kQuantizedSmemAgrees =
    attention_smem_bytes(
        Tiles::value,
        Shape::kHeadDim,
        Shape::kHeadDim,
        DTypeOf<typename Shape::elem_type>::value,
        Backend::Cuda) ==
    int(sizeof(typename Shape::elem_type)) *
        (AttnKBlock<Target, Shape>::kElems + AttnVBlock<Target, Shape>::kElems +
         AttnQOperand<Target, Shape>::kSmemElems);

/// Whether the host's quantized_rows_fastest_applies, which its choice of
/// chunk policy reads (quantized_attention_chunks.h), agrees with the
/// loader at (D, Tiles): whether a rows-fastest policy places rows fastest
/// (the loader's own rule; its destination stride does not enter it).
template <typename T, int D, int BITS, typename Tiles>
constexpr bool kQuantizedRowsAgree =
    QuantizedBlockLoader<
        T,
        Tiles::value.bk,
        D,
        D + 8,
        Tiles::value.warps * kSimdWidth,
        D,
        BITS,
        QuantizedRowsFastest<QuantizedFloatChunks>>::kRowsFastest ==
    quantized_rows_fastest_applies(D, Tiles::value.warps * kSimdWidth);

template <
    typename T,
    int D,
    int BITS,
    typename Tiles,
    bool kCausal,
    bool kHasMask,
    bool kRegisterStaged = true,
    typename Chunks = QuantizedFloatChunks>
__global__ void __launch_bounds__(
    Tiles::value.warps * kSimdWidth,
    Tiles::value.min_blocks)
    quantized_attention_kernel(const QuantAttnKernelArgs<T> args) {
  constexpr AttnTiles t = Tiles::value;
  static_assert(
      kQuantizedTilesAgree<T, D, Tiles>,
      "instance's tiles are neither choose_quantized_attention_tiles' nor "
      "choose_quantized_decode_tiles'");
  typedef AttnShape<
      T,
      D,
      t.bq,
      t.bk,
      t.warps,
      t.stages,
      D,
      t.key_slices ? t.warps : 1>
      Shape;
  typedef QuantizedKVTarget<
      typename CudaTargetOf<false, t.q_shared>::type,
      BITS,
      kRegisterStaged,
      Chunks>
      Target;
  typedef AttnKBlock<Target, Shape> KBlock;
  static_assert(
      kQuantizedRowsAgree<T, D, BITS, Tiles>,
      "quantized_rows_fastest_applies disagrees with the loader");
  static_assert(
      KBlock::kRowsFastest == Chunks::kRowsFastest,
      "a rows-fastest chunk policy where the loader cannot place rows "
      "fastest");
  static_assert(
      kQuantizedSmemAgrees<Target, Shape, Tiles>,
      "attention_smem_bytes disagrees with the kernel's blocks");
  // K's block, V's, then Q where it is kept there (attention_smem_bytes).
  extern __shared__ __align__(16) unsigned char quantized_attention_smem[];
  T* k_smem = reinterpret_cast<T*>(quantized_attention_smem);
  T* v_smem = k_smem + KBlock::kElems;

  AttnFeatures features = args.features;
  features.causal = kCausal;
  features.has_mask = kHasMask;
  // The family reads no classes by block (its plans bind none).
  features.mask_blocks = false;
  // K and V are read through the mainloop's policy alone; there is no LSE
  // (no backward).
  const AttnArrays<T> arrays = {
      args.q, nullptr, nullptr, args.out, args.mask, args.sinks, nullptr,
      nullptr, args.o_part, args.stats, args.split_counters};
  const QuantKVArrays<T> kv = {args.k_words, args.k_scales, args.k_biases,
                               args.v_words, args.v_scales, args.v_biases};
  const AttnSmem<T> smem = {k_smem, v_smem};
  typedef QuantAttnParts<Target, Shape> Parts;
  attention_body<AttnSplitMergeEpilogue<typename Parts::Epilogue, Shape>>(
      Parts::mainloop(kv, args.qparams, smem), arrays, args.params, features,
      attention_static_scheduler(
          int(blockIdx.x), int(blockIdx.y), int(blockIdx.z), args.n_splits),
      threadIdx.x / kSimdWidth, threadIdx.x % kSimdWidth);
}

/// The combine of split keys (split_keys.h) into the output, in this
/// family's source, in the form the plan picks (split_combine_form.h; its
/// grid: split_combine_block).
template <typename T, SplitCombineForm kForm>
__global__ void __launch_bounds__(kSplitCombineThreads)
    quantized_split_combine_kernel(
        const float* o_part,
        const float* stats,
        T* out,
        const AttnParams params,
        int n_splits) {
  split_combine_block<T, kForm>(o_part, stats, out, params, n_splits);
}

} // namespace fa
