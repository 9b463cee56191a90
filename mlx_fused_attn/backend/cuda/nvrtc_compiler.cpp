#include "mlx_fused_attn/backend/cuda/nvrtc_compiler.h"

#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace mlx_fused_attn::cuda {

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] CUDA JIT: ";

/// The NVRTC entry points this file uses, resolved from the library that
/// MLX loaded (or loads now).
struct Nvrtc {
#define FA_NVRTC_FUNCTIONS(X) \
  X(nvrtcVersion)             \
  X(nvrtcGetErrorString)      \
  X(nvrtcCreateProgram)       \
  X(nvrtcDestroyProgram)      \
  X(nvrtcAddNameExpression)   \
  X(nvrtcCompileProgram)      \
  X(nvrtcGetProgramLogSize)   \
  X(nvrtcGetProgramLog)       \
  X(nvrtcGetLoweredName)      \
  X(nvrtcGetCUBINSize)        \
  X(nvrtcGetCUBIN)
#define FA_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  FA_NVRTC_FUNCTIONS(FA_NVRTC_MEMBER)
#undef FA_NVRTC_MEMBER
  int major = 0;
  int minor = 0;
};

const Nvrtc& nvrtc() {
  static const Nvrtc api = [] {
    const std::string versioned =
        "libnvrtc.so." + std::to_string(CUDA_VERSION / 1000);
    void* lib = dlopen(versioned.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      lib = dlopen("libnvrtc.so", RTLD_NOW | RTLD_GLOBAL);
    }
    if (lib == nullptr) {
      throw std::runtime_error(
          std::string(kOp) + "cannot load " + versioned + " (" + dlerror() +
          "); install nvidia-cuda-nvrtc or unset MLX_FUSED_ATTN_JIT");
    }
    Nvrtc n;
#define FA_NVRTC_RESOLVE(name)                                            \
  n.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));        \
  if (n.name == nullptr) {                                                \
    throw std::runtime_error(std::string(kOp) + "NVRTC lacks " #name); \
  }
    FA_NVRTC_FUNCTIONS(FA_NVRTC_RESOLVE)
#undef FA_NVRTC_RESOLVE
    n.nvrtcVersion(&n.major, &n.minor);
    return n;
  }();
  return api;
}

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) {
    throw std::runtime_error(
        std::string(kOp) + what + ": " + nvrtc().nvrtcGetErrorString(r));
  }
}

/// FNV-1a, 64 bits: a stable hash (std::hash is not) for the cache key.
uint64_t fnv1a(const std::string& text, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : text) {
    h = (h ^ c) * 1099511628211ull;
  }
  return h;
}

std::filesystem::path cache_dir() {
  if (const char* dir = std::getenv("MLX_FUSED_ATTN_CACHE_DIR")) {
    return dir;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) {
    return std::filesystem::path(xdg) / "mlx_fused_attn";
  }
  if (const char* home = std::getenv("HOME")) {
    return std::filesystem::path(home) / ".cache" / "mlx_fused_attn";
  }
  return {};
}

// A cache file holds the lowered name, a newline, then the cubin.
bool read_cached(const std::filesystem::path& file, CompiledKernel& out) {
  std::ifstream in(file, std::ios::binary);
  if (!in || !std::getline(in, out.lowered_name) || out.lowered_name.empty()) {
    return false;
  }
  std::ostringstream rest;
  rest << in.rdbuf();
  out.cubin = rest.str();
  return !out.cubin.empty();
}

// Written to a temporary name and renamed, so that a reader (another
// process compiling the same kernel) never sees a partial file.
void write_cached(const std::filesystem::path& file, const CompiledKernel& k) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  if (ec) {
    return;
  }
  const std::filesystem::path tmp =
      file.string() + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << k.lowered_name << '\n';
    out.write(k.cubin.data(), static_cast<std::streamsize>(k.cubin.size()));
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, file, ec);
}

/// Where cuda_fp16.h and cuda_bf16.h are: NVRTC has no built-in copy. The
/// toolkit this library was built with, one named by CUDA_HOME or
/// CUDA_PATH, or the include folder beside a pip-installed libnvrtc
/// (nvidia/cu13/lib -> nvidia/cu13/include).
std::string cuda_include_dir() {
  std::vector<std::filesystem::path> candidates;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(var)) {
      candidates.push_back(std::filesystem::path(root) / "include");
    }
  }
  candidates.push_back(FA_CUDA_TOOLKIT_INCLUDE_DIR);
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(nvrtc().nvrtcVersion), &info)) {
    candidates.push_back(
        std::filesystem::path(info.dli_fname).parent_path().parent_path() /
        "include");
  }
  candidates.push_back("/usr/local/cuda/include");
  for (const auto& dir : candidates) {
    std::error_code ec;
    if (std::filesystem::exists(dir / "cuda_bf16.h", ec)) {
      return dir.string();
    }
  }
  throw std::runtime_error(
      std::string(kOp) +
      "cannot find the CUDA headers (cuda_bf16.h); set CUDA_HOME to the "
      "CUDA toolkit");
}

/// Hopper compiles for sm_90a, whose code runs only on sm_90 and may use
/// the warpgroup products (wgmma); other GPUs for their plain sm_XY.
std::string target_name(int arch) {
  return "sm_" + std::to_string(arch) + (arch == 90 ? "a" : "");
}

CompiledKernel compile_uncached(
    const std::string& source,
    const std::string& expression,
    int arch) {
  const Nvrtc& api = nvrtc();
  nvrtcProgram prog;
  check(
      api.nvrtcCreateProgram(
          &prog, source.c_str(), "mlx_fused_attn.cu", 0, nullptr, nullptr),
      "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() {
      nvrtc().nvrtcDestroyProgram(p);
    }
  } destroy{&prog};

  check(
      api.nvrtcAddNameExpression(prog, expression.c_str()),
      "nvrtcAddNameExpression");
  const std::string arch_flag = "--gpu-architecture=" + target_name(arch);
  const std::string include_flag = "--include-path=" + cuda_include_dir();
  // -default-device: the shared headers' constexpr helpers (tile choosers,
  // sizes) carry no __device__, as the host uses them too.
  const char* options[] = {
      arch_flag.c_str(),
      include_flag.c_str(),
      "--std=c++17",
      "-default-device",
      "-DNDEBUG"};
  const nvrtcResult compiled = api.nvrtcCompileProgram(
      prog, static_cast<int>(sizeof(options) / sizeof(options[0])), options);
  if (compiled != NVRTC_SUCCESS) {
    size_t log_size = 0;
    api.nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    api.nvrtcGetProgramLog(prog, log.data());
    throw std::runtime_error(
        std::string(kOp) + "compiling " + expression + " for " +
        target_name(arch) + " failed:\n" + log);
  }
  CompiledKernel out;
  const char* lowered = nullptr;
  check(
      api.nvrtcGetLoweredName(prog, expression.c_str(), &lowered),
      "nvrtcGetLoweredName");
  out.lowered_name = lowered;
  size_t size = 0;
  check(api.nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
  out.cubin.resize(size);
  check(api.nvrtcGetCUBIN(prog, out.cubin.data()), "nvrtcGetCUBIN");
  return out;
}

} // namespace

CompiledKernel compile_kernel(
    const std::string& source,
    const std::string& expression,
    int arch) {
  const Nvrtc& api = nvrtc();
  uint64_t key = fnv1a(source);
  key = fnv1a(expression, key ^ 0x9e3779b97f4a7c15ull);
  key = fnv1a(
      target_name(arch) + " nvrtc " + std::to_string(api.major) +
          "." + std::to_string(api.minor),
      key);
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx.cubin", (unsigned long long)key);

  const std::filesystem::path dir = cache_dir();
  CompiledKernel k;
  if (!dir.empty() && read_cached(dir / name, k)) {
    return k;
  }
  k = compile_uncached(source, expression, arch);
  if (!dir.empty()) {
    write_cached(dir / name, k);
  }
  return k;
}

} // namespace mlx_fused_attn::cuda
