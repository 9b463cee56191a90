// Threads per block of the CUDA helper kernels, shared by their entry
// points (device code) and the host code that launches them.
#pragma once

namespace fa {

enum {
  kStridedCopyThreads = 256,
  kPoisonThreads = 256,
  kSplitCombineThreads = 256
};

} // namespace fa
