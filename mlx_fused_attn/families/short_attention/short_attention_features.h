// The boolean features of the short-sequence kernel, listed once. On Metal
// each is a function constant (the index is its [[function_constant(n)]];
// distinct from the general kernel's, since both kernels' sources are
// compiled as one JIT library); on CUDA they arrive at run time. The kernel
// body reads them from a ShortAttnFeatures value that the entry point fills.
#pragma once

// X(name, function constant index):
//   has_mask   a mask array is bound (buffer 5)
//   bool_mask  that mask is boolean (true = attend), else additive in T
//   causal     bottom-right causal mask, computed from indices
//   has_sinks  per-head sink logits are bound (buffer 6)
#define FA_SHORT_ATTENTION_FEATURES(X) \
  X(has_mask, 400)                     \
  X(bool_mask, 401)                    \
  X(causal, 402)                       \
  X(has_sinks, 403)

namespace fa {

struct ShortAttnFeatures {
#define FA_SHORT_FEATURE_FIELD(name, index) bool name;
  FA_SHORT_ATTENTION_FEATURES(FA_SHORT_FEATURE_FIELD)
#undef FA_SHORT_FEATURE_FIELD
};

} // namespace fa
