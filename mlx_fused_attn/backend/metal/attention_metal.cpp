// The GPU interface (backend/gpu.h) on Metal: what the fused kernel covers,
// and its dispatch through MLX's Metal device and command encoder.
//
// Kernels come from the .metallib built next to this library (AOT), or from
// the embedded source compiled at run time (JIT) when MLX_FUSED_ATTN_JIT=1 or
// when the build has no metallib. Both hold the same kernels under the same
// names; MLX's Device caches the libraries and the specialised pipelines.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/metal/device.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/backend/attention_covers.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/metal/jit_source.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/backend/metal/short_attention_metal.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/attention_kernel_name.h"
#include "mlx_fused_attn/kernels/short_attention_names.h"
#include "mlx_fused_attn/kernels/strided_copy_params.h"
#include "mlx_fused_attn/params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] Metal: ";

/// Directory of the shared library holding this code: the metallib is
/// installed beside it.
std::string library_dir() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&library_dir), &info)) {
    throw std::runtime_error(
        std::string(kOp) + "cannot locate the mlx_fused_attn library");
  }
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

bool use_jit() {
#ifdef MLX_FUSED_ATTN_HAS_METALLIB
  const char* env = std::getenv("MLX_FUSED_ATTN_JIT");
  return env != nullptr && std::string(env) == "1";
#else
  return true;
#endif
}

MTL::Library* kernel_library(mx::metal::Device& d) {
  if (use_jit()) {
    return d.get_library(
        "mlx_fused_attn_jit", [] { return std::string(metal::jit_source()); });
  }
  return d.get_library("mlx_fused_attn", library_dir());
}

std::string strided_copy_kernel_name(fa::DType dtype) {
  return std::string("fa_strided_copy_") + fa::dtype_name(dtype);
}

/// `x` with a unit stride along its last axis: `x` itself, or a contiguous
/// copy made on the GPU (kept alive until the command buffer completes).
/// Encodes its own dispatch, so it runs before the attention kernel is set.
mx::array with_contiguous_rows(
    const mx::array& x,
    fa::DType dtype,
    mx::metal::Device& d,
    mx::metal::CommandEncoder& enc) {
  if (x.ndim() == 0 || x.strides()[x.ndim() - 1] == 1 || x.shape(-1) == 1) {
    return x;
  }
  mx::array copy(x.shape(), x.dtype(), nullptr, {});
  copy.set_data(mx::allocator::malloc(copy.nbytes()));

  fa::StridedCopyParams params{};
  const int pad = 4 - static_cast<int>(x.ndim());
  for (int i = 0; i < 4; ++i) {
    params.shape[i] = i < pad ? 1 : x.shape(i - pad);
    params.strides[i] = i < pad ? 0 : x.strides()[i - pad];
  }

  auto* kernel =
      d.get_kernel(strided_copy_kernel_name(dtype), kernel_library(d));
  enc.set_compute_pipeline_state(kernel);
  enc.set_input_array(x, 0);
  enc.set_output_array(copy, 1);
  enc.set_bytes(params, 2);
  const size_t inner = size_t(params.shape[2]) * params.shape[3];
  MTL::Size grid(inner, params.shape[1], params.shape[0]);
  MTL::Size group(std::min<size_t>(inner, 256), 1, 1);
  enc.dispatch_threads(grid, group);
  enc.add_temporary(copy);
  return copy;
}

} // namespace

MTL::Library* metal_kernel_library(mx::metal::Device& d) {
  return kernel_library(d);
}

Support supports(
    const AttentionSpec& /* spec: every mask kind and sinks are covered */,
    const std::vector<mx::array>& inputs) {
  fa::DType dtype;
  if (Support covered = attention_kernel_covers(kOp, inputs, &dtype);
      !covered.ok) {
    return covered;
  }
  // Short sequences run the short kernel (short_attention_covers); the
  // reason names it.
  if (auto tiles = short_attention_tiles_metal(inputs, dtype)) {
    return {true, fa::short_attention_note(*tiles)};
  }
  return Support::yes();
}

void eval(
    const AttentionSpec& spec,
    const std::vector<mx::array>& inputs,
    mx::array& out,
    mx::Stream s) {
  auto& d = mx::metal::device(s.device);
  auto& enc = mx::metal::get_command_encoder(s);

  fa::DType dtype;
  if (!kernel_dtype(out.dtype(), &dtype)) {
    throw std::logic_error(
        std::string(kOp) + "internal error: eval without a supported dtype");
  }
  const bool has_mask =
      spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive;
  const mx::array q = with_contiguous_rows(inputs[0], dtype, d, enc);
  const mx::array k = with_contiguous_rows(inputs[1], dtype, d, enc);
  const mx::array v = with_contiguous_rows(inputs[2], dtype, d, enc);
  const mx::array sinks = spec.has_sinks
      ? with_contiguous_rows(inputs.back(), dtype, d, enc)
      : inputs.back();
  out.set_data(mx::allocator::malloc(out.nbytes()));

  const int B = q.shape(0);
  const int H_q = q.shape(1);
  const int H_kv = k.shape(1);
  const int L_q = q.shape(2);
  const int L_k = k.shape(2);
  const int D = q.shape(3);
  const int D_v = v.shape(3);

  const fa::AttnTiles tiles = fa::choose_attention_tiles(
      D, D_v, dtype, fa::Backend::Metal, spec.mask == MaskKind::Causal, false);
  fa::AttnFeatures features{};
  features.has_mask = has_mask;
  features.bool_mask = spec.mask == MaskKind::Bool;
  features.causal = spec.mask == MaskKind::Causal;
  features.has_sinks = spec.has_sinks;
  features.align_q = L_q % tiles.bq == 0;
  features.align_k = L_k % tiles.bk == 0;

  mx::metal::MTLFCList function_constants = {
#define FA_FUNCTION_CONSTANT(name, index) \
  {&features.name, MTL::DataType::DataTypeBool, index},
      FA_ATTENTION_FEATURES(FA_FUNCTION_CONSTANT)
#undef FA_FUNCTION_CONSTANT
  };

  fa::AttnParams params{};
  params.B = B;
  params.H_q = H_q;
  params.H_kv = H_kv;
  params.gqa_factor = H_q / H_kv;
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
  if (has_mask) {
    for (int i = 0; i < 4; ++i) {
      params.mask_strides[i] = inputs[3].strides()[i];
    }
  }

  if (auto short_tiles = short_attention_tiles_metal(inputs, dtype)) {
    encode_short_attention(
        d, enc, kernel_library(d), spec, dtype, *short_tiles, params, inputs,
        q, k, v, sinks, out);
    return;
  }

  const std::string kernel_name = fa::attention_kernel_name(dtype, D, D_v, tiles);
  auto* kernel = d.get_kernel(
      /* base_name = */ kernel_name,
      /* mtl_lib = */ kernel_library(d),
      /* hash_name = */ fa::attention_pipeline_name(kernel_name, features),
      /* func_consts = */ function_constants);

  enc.set_compute_pipeline_state(kernel);
  enc.set_input_array(q, 0);
  enc.set_input_array(k, 1);
  enc.set_input_array(v, 2);
  enc.set_output_array(out, 3);
  enc.set_bytes(params, 4);
  if (has_mask) {
    enc.set_input_array(inputs[3], 5);
  }
  if (spec.has_sinks) {
    enc.set_input_array(sinks, 6);
  }

  const MTL::Size grid((L_q + tiles.bq - 1) / tiles.bq, H_q, B);
  const MTL::Size group(fa::kSimdWidth, tiles.warps, 1);
  enc.dispatch_threadgroups(grid, group);
}

} // namespace mlx_fused_attn::gpu
