#include "mlx_fused_attn/backend/metal/kernel_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>

#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/metal/jit_source.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

/// Directory of the shared library holding this code: the metallibs are
/// installed beside it.
std::string library_dir() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&library_dir), &info)) {
    throw std::runtime_error("cannot locate the mlx_fused_attn library");
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

/// The compiler's message that cmake/build_metallib.py installs in place of
/// a family's metallib when the family did not compile (empty when there is
/// none), cut short: it becomes a fallback reason and a warning.
std::string build_log(const std::string& path) {
  constexpr size_t kShown = 4000;
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (text.size() > kShown) {
    text = text.substr(0, kShown) + "\n... (the whole log: " + path + ")";
  }
  return text;
}

std::string device_label(mx::metal::Device& d) {
  return std::string("Metal GPU ") + d.mtl_device()->name()->utf8String();
}

} // namespace

MTL::Library* family_library(mx::metal::Device& d, KernelFamily family) {
  const std::string name =
      std::string("mlx_fused_attn_") + family_name(family);
  // A family broken by the test hook goes through the real compiler with
  // an error in its source, under a name of its own.
  if (family_broken_by_test(family)) {
    return d.get_library(name + "_broken_jit", [family] {
      return std::string(metal::jit_source(family_name(family))) +
          injected_compile_error();
    });
  }
  if (use_jit()) {
    return d.get_library(name + "_jit", [family] {
      const char* text = metal::jit_source(family_name(family));
      if (text == nullptr) {
        throw std::logic_error(
            std::string("no embedded source for ") + family_name(family));
      }
      return std::string(text);
    });
  }
  const std::string dir = library_dir();
  try {
    return d.get_library(name, dir);
  } catch (const std::exception&) {
    std::string log = build_log(dir + "/" + name + ".metallib.log");
    if (log.empty()) {
      throw;
    }
    throw std::runtime_error(
        std::string("metal/") + family_name(family) +
        ".metal did not compile when this package was built: " + log);
  }
}

Support family_ready(mx::metal::Device& d, KernelFamily family) {
  return kernel_available(
      family,
      device_label(d),
      std::string(use_jit() ? "JIT" : "metallib") + " library",
      [&] { family_library(d, family); });
}

MTL::ComputePipelineState* get_pipeline(
    mx::metal::Device& d,
    const MetalPipeline& p) {
  // MLX reads the constants through pointers while it specialises.
  auto values = std::make_unique<bool[]>(p.constants.size());
  mx::metal::MTLFCList constants;
  for (size_t i = 0; i < p.constants.size(); ++i) {
    values[i] = p.constants[i].value;
    constants.emplace_back(
        &values[i], MTL::DataType::DataTypeBool, p.constants[i].index);
  }
  return d.get_kernel(
      p.kernel_name, family_library(d, p.family), p.hash_name, constants);
}

Support pipeline_ready(mx::metal::Device& d, const MetalPipeline& p) {
  if (Support lib = family_ready(d, p.family); !lib.ok) {
    return lib;
  }
  return kernel_available(p.family, device_label(d), p.hash_name, [&] {
    MTL::ComputePipelineState* pipeline = get_pipeline(d, p);
    if (pipeline->maxTotalThreadsPerThreadgroup() < p.threads) {
      throw std::runtime_error(
          "the pipeline takes at most " +
          std::to_string(pipeline->maxTotalThreadsPerThreadgroup()) +
          " threads a threadgroup; the dispatch needs " +
          std::to_string(p.threads));
    }
    const size_t limit = d.mtl_device()->maxThreadgroupMemoryLength();
    if (pipeline->staticThreadgroupMemoryLength() > limit) {
      throw std::runtime_error(
          "the pipeline declares " +
          std::to_string(pipeline->staticThreadgroupMemoryLength()) +
          " bytes of threadgroup memory; this GPU allows " +
          std::to_string(limit));
    }
  });
}

BackendInfo backend_info() {
#ifdef MLX_FUSED_ATTN_HAS_METALLIB
  const bool aot = true;
#else
  const bool aot = false;
#endif
  return {
      "metal",
      aot,
      use_jit(),
      {KernelFamily::Attention,
       KernelFamily::ShortAttention,
       KernelFamily::AttentionBackward,
       KernelFamily::AttentionBackwardRowDot,
       KernelFamily::Neighborhood,
       KernelFamily::Copy}};
}

} // namespace mlx_fused_attn::gpu
