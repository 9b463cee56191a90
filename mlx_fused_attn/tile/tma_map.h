// A tensor map as the kernels and the host both see it: the driver's
// CUtensorMap (cuTensorMapEncodeTiled, backend/cuda/tensor_map.h), opaque
// here, since NVRTC compiles the kernels without the driver's headers.
// Passed to a kernel as a __grid_constant__ argument, whose address the TMA
// copies take (tma.h). Plain C++: the host includes it.
#pragma once

// The host's and CUDA's only: Metal has no `long long`.
#if defined(__METAL_VERSION__)
#error "mlx_fused_attn/tile/tma_map.h is CUDA only"
#endif

namespace fa {

struct alignas(128) TmaMap {
  unsigned long long words[16];
};

} // namespace fa
