// How many splits of its keys a call's query blocks take (the FlashDecoding
// pattern, kernels/split_keys.h), and which form of the combine merges them:
// host arithmetic, free of MLX, shared by the planner
// (attention_planner.cpp) and the standalone decode sweeps
// (benchmarks/cuda_decode_sweep.cu), so that the sweeps time the counts and
// the combine the library runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "mlx_fused_attn/kernels/cuda/block_sizes.h"
#include "mlx_fused_attn/kernels/split_combine_form.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/platform.h"

namespace mlx_fused_attn {

/// A split visits at least this many key blocks, so that its fixed costs
/// (loading Q, writing a partial row) stay small beside its keys: at
/// decode with 4096 keys of 128-key blocks, 16 splits of 2 blocks fill
/// twice the threadgroups of 8 splits of 4 (unmeasured).
constexpr int kMinSplitKeyBlocks = 2;
/// At most this many splits: bounds the partials and the combine's loop.
constexpr int kMaxKeySplits = 128;

/// The most splits of L_k keys whose partial outputs stay within 1/share
/// of the K and V bytes each streams (`kv_bytes_a_key` a key): a split
/// writes rows x D_v fp32 partials that the combine reads back (8 bytes an
/// element), which short key ranges of many rows do not repay (RESULTS.md,
/// "Split keys: when a split pays").
inline int64_t splits_worth_their_partials_of(
    int64_t L_k,
    int rows,
    int D_v,
    int64_t kv_bytes_a_key,
    int share) {
  const int64_t partial_bytes = 8 * int64_t(rows) * D_v;
  return L_k * kv_bytes_a_key / (share * partial_bytes);
}

/// The same, for float K and V of `itemsize` bytes an element.
inline int64_t splits_worth_their_partials(
    int64_t L_k,
    int rows,
    int D,
    int D_v,
    int itemsize,
    int share) {
  return splits_worth_their_partials_of(
      L_k, rows, D_v, int64_t(D + D_v) * itemsize, share);
}

/// The bytes of one key of K and V quantized to `bits` in groups of
/// `group_size` (mx.quantize's affine layout): the codes, and a scale and a
/// bias of `itemsize` bytes a group.
inline int64_t quantized_kv_bytes_a_key(
    int D,
    int D_v,
    int bits,
    int group_size,
    int itemsize) {
  return int64_t(D + D_v) * bits / 8 +
      2 * int64_t(D / group_size + D_v / group_size) * itemsize;
}

/// Loads a multiprocessor keeps in flight to stream from memory at full
/// speed, by Little's law on an H100: about 3.35 TB/s times about 700 ns
/// of latency is 2.3 MB across 132 multiprocessors, about 18 KB each.
constexpr int64_t kBytesInFlightPerCore = 18 * 1024;

/// Threadgroups a multiprocessor needs of a kernel each of whose
/// threadgroups keeps `bytes_in_flight` of loads outstanding, for
/// kBytesInFlightPerCore in flight: at least one, at most `fit` (what
/// the kernel's resources let a multiprocessor hold at once).
inline int64_t blocks_for_bytes_in_flight(int64_t bytes_in_flight, int fit) {
  const int64_t need =
      (kBytesInFlightPerCore + bytes_in_flight - 1) / bytes_in_flight;
  return std::max<int64_t>(1, std::min<int64_t>(need, fit));
}

/// Splits of each query block's keys so that `groups` threadgroups come
/// near a wave of `wave` without passing it (a second, partial wave would
/// idle most multiprocessors at the end), at most `most`; 1 when they fill
/// one already. Splits take equal runs of blocks (split_key_blocks), so
/// the count is the fewest that gives the same run: 256 blocks in 33
/// splits of 8 would leave the last one empty, a threadgroup and a
/// partial for the combine to read for nothing.
inline int key_split_count(
    int64_t groups,
    int64_t wave,
    int key_blocks,
    int64_t most) {
  if (groups >= wave) {
    return 1;
  }
  most = std::min<int64_t>(
      {most, key_blocks / kMinSplitKeyBlocks, int64_t(kMaxKeySplits)});
  const int64_t splits = std::max<int64_t>(1, std::min(wave / groups, most));
  const int64_t run = (key_blocks + splits - 1) / splits;
  return static_cast<int>((key_blocks + run - 1) / run);
}

/// From this many splits up, CUDA's combine takes the grouped or the row
/// form. H100 A/B: decode B=1 at 16 and 32 splits (a tiny grid waiting on
/// loads) ran 11.4 -> 10.7 and 54.0 -> 52.6 us grouped; at 4 splits its
/// 14% more instructions cost chunked prefill (524k threads) 31.2 -> 31.8
/// us.
constexpr int kGroupedCombineMinSplits = 8;

/// Every form of the combine (kernels/split_combine_form.h): each family
/// that splits its keys builds a combine kernel of each on CUDA.
inline constexpr fa::SplitCombineForm kSplitCombineForms[] = {
    fa::SplitCombineForm::OneElement,
    fa::SplitCombineForm::Grouped,
    fa::SplitCombineForm::RowThreadgroup};

/// The form's name, as plan summaries give it and
/// MLX_FUSED_ATTN_SPLIT_COMBINE takes it (plan/kernel_switches.h).
inline const char* split_combine_form_name(fa::SplitCombineForm form) {
  switch (form) {
    case fa::SplitCombineForm::Grouped:
      return "grouped";
    case fa::SplitCombineForm::RowThreadgroup:
      return "row";
    case fa::SplitCombineForm::OneElement:
      break;
  }
  return "one_element";
}

/// The form of the combine of `key_splits` splits into the output of `p`
/// (B * H_q * L_q * D_v elements) on `backend` with `cores`
/// multiprocessors (kernels/split_combine_form.h): `forced` where a switch
/// forces one (kernel_switches.h); on CUDA from kGroupedCombineMinSplits
/// up, a threadgroup a row where a thread an element would give fewer
/// blocks than multiprocessors (decode: a few rows, each waiting on every
/// split; H100, `gpu_bench.py --combine`: 2.5-4.1 us faster at 16-32
/// splits, 1.6 us slower at 16 queries, 256 blocks), else grouped; below,
/// one element a thread. Metal's combine has the one-element form only.
inline fa::SplitCombineForm split_combine_form(
    fa::Backend backend,
    int key_splits,
    const fa::AttnParams& p,
    int cores,
    std::optional<fa::SplitCombineForm> forced = std::nullopt) {
  if (backend != fa::Backend::Cuda) {
    return fa::SplitCombineForm::OneElement;
  }
  if (forced) {
    return *forced;
  }
  if (key_splits < kGroupedCombineMinSplits) {
    return fa::SplitCombineForm::OneElement;
  }
  const int64_t elements = int64_t(p.B) * p.H_q * p.L_q * p.D_v;
  const int64_t element_blocks =
      (elements + fa::kSplitCombineThreads - 1) / fa::kSplitCombineThreads;
  return element_blocks < cores ? fa::SplitCombineForm::RowThreadgroup
                                : fa::SplitCombineForm::Grouped;
}

/// The combine kernel's grid along x in `form` (split_combine_block): a
/// block a row, or a thread an element; y and z are H_q and B.
inline unsigned split_combine_blocks_x(
    fa::SplitCombineForm form,
    const fa::AttnParams& p) {
  return form == fa::SplitCombineForm::RowThreadgroup
      ? unsigned(p.L_q)
      : unsigned(
            (int64_t(p.L_q) * p.D_v + fa::kSplitCombineThreads - 1) /
            fa::kSplitCombineThreads);
}

} // namespace mlx_fused_attn
