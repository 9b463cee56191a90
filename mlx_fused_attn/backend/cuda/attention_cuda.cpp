// The GPU interface (backend/gpu.h) on MLX's CUDA backend: what the fused
// kernel covers, and its launch through MLX's command encoder (a node of
// the encoder's CUDA graph, ordered after the nodes that write its inputs).
//
// Kernels come from nvcc (AOT, built into this library for sm_80 and sm_90)
// or from NVRTC (JIT) when MLX_FUSED_ATTN_JIT=1 or the build has no AOT
// kernels (kernels.h). fp32 runs the same kernel with 3xTF32 products
// (tile/mma_frag.h): fp32 accuracy from the tensor cores.
#include <cuda_runtime.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/backend/cuda/device_buffer.h"
#include "mlx_fused_attn/backend/cuda/device_limits.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/backend/cuda/short_attention_cuda.h"
#include "mlx_fused_attn/backend/attention_covers.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/short_attention_names.h"
#include "mlx_fused_attn/params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] CUDA: ";
/// Grid limits of the y (heads) and z (batch) axes.
constexpr int kMaxGridYZ = 65535;

/// The kernel for a problem on `device`: its tiles come from the kernel's
/// dtype, head dim, mask, the GPU's products and the grid's size. A grid
/// with more query blocks than one wave of the default tiles (their blocks
/// a multiprocessor times the multiprocessors) takes the large-grid tiles
/// (choose_attention_tiles says why).
cuda::AttentionKernelKey attention_key(
    const AttentionSpec& spec,
    fa::DType dtype,
    const mx::array& q,
    const mx::array& v,
    int device,
    int arch) {
  cuda::AttentionKernelKey key{
      dtype,
      static_cast<int>(q.shape(3)),
      static_cast<int>(v.shape(3)),
      spec.mask == MaskKind::Causal,
      spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive,
      cuda::has_wgmma(arch),
      false};
  const fa::AttnTiles tiles = key.tiles();
  const long long q_blocks =
      (q.shape(2) + tiles.bq - 1) / tiles.bq * q.shape(1) * q.shape(0);
  key.large_grid = q_blocks >
      static_cast<long long>(tiles.min_blocks) *
          cuda::multiprocessor_count(device);
  return key;
}

} // namespace

Support supports(
    const AttentionSpec& spec,
    const std::vector<mx::array>& inputs) {
  const mx::array& q = inputs[0];
  const mx::array& v = inputs[2];
  const int D = q.shape(3);
  const int D_v = v.shape(3);
  fa::DType dtype;
  if (Support covered = attention_kernel_covers(kOp, inputs, &dtype);
      !covered.ok) {
    return covered;
  }
  // The kernel runs on the stream's device; support is answered for the
  // default GPU (MLX's CUDA backend uses one).
  cu::Device& d = cu::device(mx::Device(mx::Device::gpu, 0));
  if (Support s = cuda::device_supported(kOp, d); !s.ok) {
    return s;
  }
  const int device = d.cuda_device();
  const int arch = cuda::arch_of(d);
  if (Support copy = cuda::copy_kernels_ready(dtype, device, arch); !copy.ok) {
    return {false, kOp + copy.reason};
  }
  // Short sequences run the short kernel (short_attention_covers), whose
  // grid is one axis of sequences; the reason names it.
  if (auto short_tiles =
          cuda::short_attention_tiles_cuda(inputs, dtype, device)) {
    const Support ready =
        cuda::short_attention_ready(dtype, *short_tiles, D, device, arch);
    if (!ready.ok) {
      return {false, kOp + ready.reason};
    }
    return {true, fa::short_attention_note(*short_tiles)};
  }
  if (q.shape(0) > kMaxGridYZ || q.shape(1) > kMaxGridYZ) {
    std::ostringstream msg;
    msg << kOp << "batch " << q.shape(0) << " or query heads " << q.shape(1)
        << " over the grid limit of " << kMaxGridYZ;
    return Support::no(msg.str());
  }
  const cuda::AttentionKernelKey key =
      attention_key(spec, dtype, q, v, device, arch);
  const int smem = key.smem_bytes();
  if (smem > cuda::max_smem_per_block(device)) {
    std::ostringstream msg;
    msg << kOp << "the kernel for head dims " << D << " (q, k) and " << D_v
        << " (v) and " << q.dtype()
        << " needs " << smem << " bytes of shared memory a block; this GPU "
        << "allows " << cuda::max_smem_per_block(device);
    return Support::no(msg.str());
  }
  const Support ready = cuda::kernel_ready(key, device, arch);
  return ready.ok ? ready : Support::no(kOp + ready.reason);
}

BackendInfo backend_info() {
#ifdef MLX_FUSED_ATTN_HAS_CUDA_AOT
  const bool aot = true;
#else
  const bool aot = false;
#endif
  return {"cuda", aot, cuda::use_jit()};
}

void eval(
    const AttentionSpec& spec,
    const std::vector<mx::array>& inputs,
    mx::array& out,
    mx::Stream s) {
  cu::Device& dev = cu::device(s.device);
  dev.make_current();
  const int device = dev.cuda_device();
  const int arch = cuda::arch_of(dev);
  cu::CommandEncoder& enc = cu::get_command_encoder(s);

  fa::DType dtype;
  if (!kernel_dtype(out.dtype(), &dtype)) {
    throw std::logic_error(
        std::string(kOp) + "internal error: eval without a supported dtype");
  }
  const bool has_mask =
      spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive;
  const mx::array q = cuda::readable_rows(inputs[0], dtype, enc, device, arch);
  const mx::array k = cuda::readable_rows(inputs[1], dtype, enc, device, arch);
  const mx::array v = cuda::readable_rows(inputs[2], dtype, enc, device, arch);
  // Sinks are read as sinks[head]: a strided view is copied.
  mx::array sinks = inputs.back();
  if (spec.has_sinks && sinks.strides()[0] != 1 && sinks.shape(0) > 1) {
    sinks = cuda::contiguous_copy(sinks, dtype, enc, device, arch);
  }
  cuda::set_device_data(out, enc);
  cuda::poison(out, enc, device, arch);

  const int B = q.shape(0);
  const int H_q = q.shape(1);
  const int L_q = q.shape(2);
  const int L_k = k.shape(2);
  const int D = q.shape(3);
  const int D_v = v.shape(3);

  const cuda::AttentionKernelKey key =
      attention_key(spec, dtype, q, v, device, arch);
  const fa::AttnTiles tiles = key.tiles();
  fa::AttnFeatures features{};
  features.has_mask = has_mask;
  features.bool_mask = spec.mask == MaskKind::Bool;
  features.causal = spec.mask == MaskKind::Causal;
  features.has_sinks = spec.has_sinks;
  features.align_q = L_q % tiles.bq == 0;
  features.align_k = L_k % tiles.bk == 0;

  fa::AttnParams params{};
  params.B = B;
  params.H_q = H_q;
  params.H_kv = k.shape(1);
  params.gqa_factor = H_q / params.H_kv;
  params.L_q = L_q;
  params.L_k = L_k;
  params.D = D;
  params.D_v = D_v;
  params.causal_offset = L_k - L_q;
  params.scale_log2 = spec.scale * 1.4426950408889634f;
  for (int i = 0; i < 3; ++i) {
    params.q_strides[i] = q.strides()[i];
    params.k_strides[i] = k.strides()[i];
    params.v_strides[i] = v.strides()[i];
    params.o_strides[i] = out.strides()[i];
  }
  const void* mask_ptr = nullptr;
  if (has_mask) {
    for (int i = 0; i < 4; ++i) {
      params.mask_strides[i] = inputs[3].strides()[i];
    }
    mask_ptr = mx::gpu_ptr<void>(inputs[3]);
    enc.set_input_array(inputs[3]);
  }
  const void* sinks_ptr = nullptr;
  if (spec.has_sinks) {
    sinks_ptr = mx::gpu_ptr<void>(sinks);
    enc.set_input_array(sinks);
  }
  enc.set_input_array(q);
  enc.set_input_array(k);
  enc.set_input_array(v);
  enc.set_output_array(out);

  if (auto short_tiles = cuda::short_attention_tiles_cuda(inputs, dtype, device)) {
    cuda::launch_short_attention(
        enc, spec, dtype, *short_tiles, params, mx::gpu_ptr<void>(q),
        mx::gpu_ptr<void>(k), mx::gpu_ptr<void>(v), mx::gpu_ptr<void>(out),
        mask_ptr, sinks_ptr, device, arch);
    return;
  }

  const dim3 grid((L_q + tiles.bq - 1) / tiles.bq, H_q, B);
  enc.add_kernel_node_ex(
      cuda::kernel_function(key, device, arch),
      grid,
      dim3(key.threads()),
      {},
      static_cast<uint32_t>(key.smem_bytes()),
      mx::gpu_ptr<void>(q),
      mx::gpu_ptr<void>(k),
      mx::gpu_ptr<void>(v),
      mx::gpu_ptr<void>(out),
      params,
      mask_ptr,
      sinks_ptr,
      features);
}

} // namespace mlx_fused_attn::gpu
