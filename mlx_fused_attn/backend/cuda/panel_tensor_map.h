// The encoding of the producer warpgroup's tensor maps (tile/kv_tma_ring.h),
// free of MLX, so that the library (tensor_map.cpp) and the standalone
// sweeps (benchmarks/cuda_attention_case.cuh) encode the same maps. Host
// code; the driver's encoder is reached through the CUDA runtime, so that
// neither links libcuda.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstring>

#include "mlx_fused_attn/tile/platform.h"
#include "mlx_fused_attn/tile/tma_map.h"

namespace fa {

static_assert(
    sizeof(TmaMap) == sizeof(CUtensorMap) &&
        alignof(TmaMap) == alignof(CUtensorMap),
    "fa::TmaMap must be the driver's CUtensorMap");

/// cuTensorMapEncodeTiled, or null where the driver lacks it.
inline decltype(&::cuTensorMapEncodeTiled) tensor_map_encoder() {
  static const auto fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found;
    const bool ok = cudaGetDriverEntryPointByVersion(
                        "cuTensorMapEncodeTiled", &p, 12000,
                        cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess;
    return ok ? reinterpret_cast<decltype(&::cuTensorMapEncodeTiled)>(p)
              : nullptr;
  }();
  return fn;
}

/// Into `out`, the 4-D map of a 16-bit array at `base` with extents `dims`
/// {D, L, H, B} and the byte strides of its three outer axes, whose boxes
/// are one 128-byte panel of columns by `rows` rows written with the
/// 128-byte swizzle: smem_layout.h's SwizzledRows panel, as the swizzled
/// blocks hold it. Rows past L read as zeros. The driver's result
/// (CUDA_ERROR_NOT_SUPPORTED where it has no encoder).
inline CUresult encode_panel_tensor_map(
    TmaMap* out,
    DType dtype,
    const void* base,
    const cuuint64_t dims[4],
    const cuuint64_t strides[3],
    int rows) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  const cuuint32_t box[4] = {
      cuuint32_t(128 / dtype_size(dtype)), cuuint32_t(rows), 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult r = encode(
      &map,
      dtype == DType::BFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                               : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      4,
      const_cast<void*>(base),
      dims,
      strides,
      box,
      unit,
      CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == CUDA_SUCCESS) {
    std::memcpy(out, &map, sizeof(*out));
  }
  return r;
}

} // namespace fa
