// The forms of the combine of split keys (split_keys.h), one kernel
// instance each on CUDA; the plan picks one by its split count and rows
// (plan/split_count.h's split_combine_form). Metal's combine has the
// one-element form only.
#pragma once

namespace fa {

enum class SplitCombineForm {
  /// split_combine_element: a loop over the splits, each split's loads used
  /// as they come; the fewest instructions a thread.
  OneElement,
  /// split_combine_element_grouped: through split_combine_elements<1>, the
  /// loads of each batch of splits issued before any is used; more
  /// instructions a thread, less waiting on memory.
  Grouped,
  /// split_combine_row: a threadgroup a row, its simdgroups over the
  /// splits and its lanes over the columns; for few rows over many splits.
  RowThreadgroup,
};

} // namespace fa
