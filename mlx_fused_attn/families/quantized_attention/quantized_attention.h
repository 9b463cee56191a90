// The quantized-KV attention body: the float kernels' body (attention.h),
// the same attention step, masks, split keys, packed GQA and sinks, over a
// K/V policy that dequantizes MLX's affine layout into the K and V blocks
// (tile/quantized_block_loader.h). What differs from the float kernels is
// that policy and the target's loader (tile/quantized_kv_target.h):
//
//   O = softmax(scale * Q dq(K)^T + mask) dq(V),   dq(x) = scale_g * x + bias_g
//
// with dq(K) and dq(V) rounded to T in threadgroup memory, as the float
// kernels read K and V. Inference only: there is no backward (has_lse is
// never set).
#pragma once

#include "mlx_fused_attn/kernels/attention.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_args.h"
#include "mlx_fused_attn/quantized_kv_params.h"
#include "mlx_fused_attn/tile/quantized_block_loader.h"

namespace fa {

/// The copies of one (batch, kv head)'s key blocks, dequantized, for the
/// pipeline (kv_pipeline.h's Source, as attention.h's AttnKVSource): its
/// block i is key block visits.block(i); a ragged last block zero-fills its
/// missing keys. Besides load_kv, a block in two halves for the register
/// stage (KVRegisterStaged): fetch_kv into a thread's registers, store_kv
/// from there into a stage.
template <typename Target, typename Shape>
struct QuantKVSource {
  typedef typename Shape::elem_type elem_type;
  typedef AttnKBlock<Target, Shape> KBlock;
  typedef AttnVBlock<Target, Shape> VBlock;
  FA_CONST int kThreads = Shape::kThreads;

  /// A thread's share of one K block and one V block, fetched.
  struct Staged {
    typename KBlock::Fetched k;
    typename VBlock::Fetched v;
  };

  int L_k;
  QuantizedRows<elem_type> k; ///< from this (batch, head)'s key 0
  QuantizedRows<elem_type> v;
  AttnVisits visits;
  int n_full_kblocks;
  bool align_k;
  FA_THREADGROUP elem_type* k_smem;
  FA_THREADGROUP elem_type* v_smem;

  FA_FUNC const FA_THREADGROUP elem_type* k_block(int stage) const {
    return k_smem + stage * KBlock::kElems;
  }
  FA_FUNC const FA_THREADGROUP elem_type* v_block(int stage) const {
    return v_smem + stage * VBlock::kElems;
  }
  FA_FUNC FA_THREADGROUP elem_type* sync_smem() const {
    return attention_sync_smem<Target, Shape>(v_smem);
  }

  /// Block kb of K and V into thread tid's registers: loads issued, not
  /// waited for.
  FA_FUNC void fetch_kv(int kb, FA_THREAD Staged& s, int tid) const {
    fetch_block<KBlock>(s.k, k, kb, tid);
    fetch_block<VBlock>(s.v, v, kb, tid);
  }
  /// The block in `s` (fetch_kv's) dequantized into `stage`.
  FA_FUNC void store_kv(int stage, const FA_THREAD Staged& s, int tid) const {
    KBlock::dequantize(k_smem + stage * KBlock::kElems, s.k, tid);
    VBlock::dequantize(v_smem + stage * VBlock::kElems, s.v, tid);
  }
  FA_FUNC void load_kv(int kb, int stage, int tid) const {
    Staged s;
    fetch_kv(kb, s, tid);
    store_kv(stage, s, tid);
  }

  /// The pipeline's block kb of `rows` into `f`: the block past the whole
  /// ones zero-fills its missing keys unless align_k.
  template <typename Block>
  FA_FUNC void fetch_block(
      FA_THREAD typename Block::Fetched& f,
      QuantizedRows<elem_type> rows,
      int kb,
      int tid) const {
    const int block = visits.block(kb);
    const int key0 = block * Shape::kBK;
    if (!align_k && block == n_full_kblocks) {
      Block::template fetch<true>(
          f, quantized_rows_from(rows, key0), L_k - key0, tid);
    } else {
      Block::template fetch<false>(
          f, quantized_rows_from(rows, key0), Shape::kBK, tid);
    }
  }
};

/// (batch, kv_head)'s rows of one quantized operand.
template <typename T>
FA_FUNC QuantizedRows<T> quantized_rows_of(
    const FA_DEVICE unsigned int* words,
    const FA_DEVICE T* scales,
    const FA_DEVICE T* biases,
    const FA_CONSTANT QuantKvOperand& x,
    int group_size,
    int batch,
    int kv_head) {
  const QuantizedRows<T> rows = {
      words + batch * x.word_strides[0] + kv_head * x.word_strides[1],
      scales + batch * x.scale_strides[0] + kv_head * x.scale_strides[1],
      biases + batch * x.bias_strides[0] + kv_head * x.bias_strides[1],
      x.word_strides[2],
      x.scale_strides[2],
      x.bias_strides[2],
      x.scale_group_stride,
      x.bias_group_stride,
      group_size};
  return rows;
}

/// The K/V policy of the quantized family's mainloop (attention.h's
/// AttnPlainKV interface): makes a (batch, kv head)'s QuantKVSource.
template <typename Target, typename Shape>
struct QuantKV {
  typedef typename Shape::elem_type elem_type;
  typedef QuantKVSource<Target, Shape> Source;
  QuantKVArrays<elem_type> arrays;
  const FA_CONSTANT QuantKvParams* qp;
  AttnSmem<elem_type> smem;

  FA_FUNC Source source(
      const FA_CONSTANT AttnParams& p,
      AttnFeatures f,
      int batch,
      int kv_head,
      AttnVisits visits) const {
    const Source src = {
        p.L_k,
        quantized_rows_of(
            arrays.k_words, arrays.k_scales, arrays.k_biases, qp->k,
            qp->group_size, batch, kv_head),
        quantized_rows_of(
            arrays.v_words, arrays.v_scales, arrays.v_biases, qp->v,
            qp->group_size, batch, kv_head),
        visits,
        p.L_k / Shape::kBK,
        f.align_k,
        smem.k,
        smem.v};
    return src;
  }
};

/// The mainloop and the epilogue of the quantized instances of `Shape` on
/// `Target` (attention.h's AttnParts, over QuantKV).
template <typename Target, typename Shape>
struct QuantAttnParts {
  typedef typename Shape::elem_type T;
  typedef AttnMainloop<Target, Shape, QuantKV<Target, Shape>> Mainloop;
  typedef AttnEpilogue<Shape, Mainloop::kVCols> Epilogue;

  /// The mainloop over the call's quantized K and V, its parameters `qp`
  /// and the stages.
  static FA_FUNC Mainloop mainloop(
      QuantKVArrays<T> kv,
      const FA_CONSTANT QuantKvParams& qp,
      AttnSmem<T> smem) {
    const Mainloop m = {{kv, &qp, smem}};
    return m;
  }
};

} // namespace fa
