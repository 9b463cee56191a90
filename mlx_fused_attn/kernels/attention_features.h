// The boolean features of the attention kernel, listed once. On Metal each is
// a function constant (the index is its [[function_constant(n)]]); on CUDA a
// template bool. The kernel body reads them from an AttnFeatures value that
// the entry point fills from either, so after inlining they are constants.
#pragma once

// X(name, function constant index):
//   has_mask   a mask array is bound (buffer 5)
//   bool_mask  that mask is boolean (true = attend), else additive in T
//   causal     bottom-right causal mask, computed from indices
//   has_sinks  per-head sink logits are bound (buffer 6)
//   align_q    L_q is a multiple of the query block: no ragged query block
//   align_k    L_k is a multiple of the key block: no ragged key block
//   split_keys the keys are split (split_keys.h): partials are bound
//              (buffers 7, 8) with the split count (buffer 9)
//   has_lse    write each row's log-sum-exp for the backward (buffer 10);
//              never with split_keys (plan_general_launch)
//   mask_blocks the mask's classes by block are bound (buffer 11;
//              mask_visits.h)
//   stride32   K's and V's row offsets from their head's key 0 fit in 32
//              bits, and the loader addresses them so, stepping a pointer
//              a thread (Metal only, a variant to time: the host sets it on
//              request, backend/metal/attention_variant.h; targets whose
//              loader has no such copy ignore it, Target::kStride32Loads)
#define FA_ATTENTION_FEATURES(X) \
  X(has_mask, 300)               \
  X(bool_mask, 301)              \
  X(causal, 302)                 \
  X(has_sinks, 303)              \
  X(align_q, 200)                \
  X(align_k, 201)                \
  X(split_keys, 304)             \
  X(has_lse, 305)                \
  X(mask_blocks, 306)            \
  X(stride32, 307)

namespace fa {

struct AttnFeatures {
#define FA_FEATURE_FIELD(name, index) bool name;
  FA_ATTENTION_FEATURES(FA_FEATURE_FIELD)
#undef FA_FEATURE_FIELD
};

} // namespace fa
