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

/// The family's .metal file, for messages.
std::string family_source(KernelFamily family) {
  return std::string("mlx_fused_attn/families/") + family_folder(family) +
      "/" + family_name(family) + ".metal";
}

/// A family's embedded text without its instantiations.
std::string family_text(KernelFamily family) {
  const char* text = metal::jit_source(family_name(family));
  if (text == nullptr) {
    throw std::logic_error(
        std::string("no embedded source for ") + family_name(family));
  }
  return text;
}

/// The JIT instantiation that defines the pipeline's kernel.
const metal::JitInstance& jit_instance_of(const MetalPipeline& p) {
  const metal::JitInstance* instance =
      metal::jit_instance(family_name(p.family), p.kernel_name);
  if (instance == nullptr) {
    throw std::logic_error(
        "no instantiation of " + family_source(p.family) +
        " defines the kernel " + p.kernel_name);
  }
  return *instance;
}

/// Where MLX caches the library of the pipeline's kernel: the family's
/// metallib, the family's text broken by the test hook, or the JIT library
/// of the instantiation that defines the kernel (shared by the kernels one
/// line defines, as the backward's dK/dV and dQ).
std::string library_name(const MetalPipeline& p) {
  const std::string family =
      std::string("mlx_fused_attn_") + family_name(p.family);
  if (family_broken_by_test(p.family)) {
    return family + "_broken_jit";
  }
  if (use_jit()) {
    return std::string("mlx_fused_attn_jit_") + jit_instance_of(p).library;
  }
  return family;
}

/// The library of the pipeline's kernel; throws (with MLX's or the
/// compiler's message) when it cannot be built or loaded.
MTL::Library* kernel_library(mx::metal::Device& d, const MetalPipeline& p) {
  const std::string name = library_name(p);
  // A family broken by the test hook goes through the real compiler with
  // an error in its text.
  if (family_broken_by_test(p.family)) {
    return d.get_library(name, [&] {
      return family_text(p.family) + injected_compile_error();
    });
  }
  if (use_jit()) {
    return d.get_library(name, [&] {
      return family_text(p.family) + jit_instance_of(p).line + "\n";
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
        family_source(p.family) +
        " did not compile when this package was built: " + log);
  }
}

/// Whether the library of the pipeline's kernel builds or loads on `d`
/// (decided once a library).
Support library_ready(mx::metal::Device& d, const MetalPipeline& p) {
  std::string name;
  try {
    name = library_name(p);
  } catch (const std::exception& e) {
    return Support::no(e.what());
  }
  const bool jit = use_jit() || family_broken_by_test(p.family);
  return kernel_available(
      p.family,
      device_label(d),
      jit ? "JIT library " + name : "library " + name + ".metallib",
      [&] { kernel_library(d, p); });
}

} // namespace

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
      p.kernel_name, kernel_library(d, p), p.hash_name, constants);
}

Support pipeline_ready(mx::metal::Device& d, const MetalPipeline& p) {
  if (Support lib = library_ready(d, p); !lib.ok) {
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
  return {"metal", aot, use_jit(), all_kernel_families()};
}

std::string memory_kind(const mlx::core::array&) {
  return "unified";
}

} // namespace mlx_fused_attn::gpu
