// A tensor map as the kernels and the host both see it: the driver's
// CUtensorMap (cuTensorMapEncodeTiled, backend/cuda/tensor_map.h), opaque
// here, since NVRTC compiles the kernels without the driver's headers.
// Passed to a kernel as a __grid_constant__ argument, whose address the TMA
// copies take (tma.h). Plain C++: the host includes it.
#pragma once

namespace fa {

struct alignas(128) TmaMap {
  unsigned long long words[16];
};

} // namespace fa
