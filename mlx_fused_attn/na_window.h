// Neighborhood-attention geometry (NATTEN's na1d/na2d/na3d), shared by the
// CPU kernel, the GPU kernels and the host checks: which keys a query sees
// along one axis.
//
// An axis of length n with kernel size k and dilation d splits its positions
// into d interleaved groups (position i is in group i mod d, at index i / d).
// In a group of length m, the query at index j sees the k group positions
// starting at clamp(j - k/2, 0, m - k), so every query sees exactly k keys
// and windows shift inward at the borders; with causal, positions
// max(0, j - k + 1) .. j. The neighborhood is the product over the axes.
#pragma once

#ifndef FA_HOST_DEVICE
#define FA_HOST_DEVICE inline
#endif

namespace fa {

/// Up to three spatial axes; unused axes have n = k = d = 1.
enum { kNaMaxAxes = 3 };

struct NaAxis {
  int n; ///< axis length
  int k; ///< kernel size (window length)
  int d; ///< dilation
  int causal; ///< 1: only keys at or before the query
};

/// The window of one query position along one axis: keys
/// first, first + d, ..., first + (count - 1) * d.
struct NaWindow {
  int first;
  int count;
};

FA_HOST_DEVICE int na_group_length(int n, int d, int group) {
  return (n - group + d - 1) / d;
}

/// The window of the query at index j of a dilation group of length m, in
/// indices of that group (first, first + 1, ...): what the GPU kernels, which
/// tile within one dilation group, compute per query row.
FA_HOST_DEVICE NaWindow na_group_window(NaAxis a, int m, int j) {
  int start;
  int count;
  if (a.causal) {
    start = j - a.k + 1 > 0 ? j - a.k + 1 : 0;
    count = j - start + 1;
  } else {
    start = j - a.k / 2;
    start = start < 0 ? 0 : start;
    start = start > m - a.k ? m - a.k : start;
    count = a.k;
  }
  NaWindow w;
  w.first = start;
  w.count = count;
  return w;
}

FA_HOST_DEVICE NaWindow na_window(NaAxis a, int pos) {
  const int group = pos % a.d;
  NaWindow w =
      na_group_window(a, na_group_length(a.n, a.d, group), pos / a.d);
  w.first = group + w.first * a.d;
  return w;
}

} // namespace fa
