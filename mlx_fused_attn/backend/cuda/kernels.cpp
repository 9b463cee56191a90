#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/families/strided_copy/cuda/strided_copy_kernel_key.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "mlx_fused_attn/backend/cuda/jit_source.h"
#include "mlx_fused_attn/backend/cuda/nvrtc_compiler.h"
#ifdef MLX_FUSED_ATTN_HAS_CUDA_AOT
#include "mlx_fused_attn/backend/cuda/aot_kernels.h"
#endif

namespace mlx_fused_attn::cuda {

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] CUDA: ";

/// The driver entry points used here, taken through the CUDA runtime so
/// that this library needs no link to libcuda (MLX has loaded it).
struct Driver {
  decltype(&::cuModuleLoadData) module_load_data;
  decltype(&::cuModuleGetFunction) module_get_function;
  decltype(&::cuFuncSetAttribute) func_set_attribute;
  decltype(&::cuFuncGetAttribute) func_get_attribute;
  decltype(&::cuGetErrorString) get_error_string;
};

template <typename F>
void entry_point(const char* symbol, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion(
          symbol, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    throw std::runtime_error(
        std::string(kOp) + "the CUDA driver lacks " + symbol);
  }
  *fn = reinterpret_cast<F>(p);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver d;
    entry_point("cuModuleLoadData", &d.module_load_data);
    entry_point("cuModuleGetFunction", &d.module_get_function);
    entry_point("cuFuncSetAttribute", &d.func_set_attribute);
    entry_point("cuFuncGetAttribute", &d.func_get_attribute);
    entry_point("cuGetErrorString", &d.get_error_string);
    return d;
  }();
  return d;
}

void check(CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) {
    const char* msg = "unknown error";
    driver().get_error_string(r, &msg);
    throw std::runtime_error(std::string(kOp) + what + ": " + msg);
  }
}

void check(cudaError_t r, const std::string& what) {
  if (r != cudaSuccess) {
    throw std::runtime_error(
        std::string(kOp) + what + ": " + cudaGetErrorString(r));
  }
}

CUfunction
load_jit(KernelFamily family, const std::string& expression, int arch) {
  const char* text = jit_source(family_name(family));
  if (text == nullptr) {
    throw std::logic_error(
        std::string(kOp) + "internal error: no JIT source for " +
        family_name(family));
  }
  std::string source = text;
  if (family_broken_by_test(family)) {
    source += injected_compile_error();
  }
  const CompiledKernel k = compile_kernel(source, expression, arch);
  CUmodule module;
  check(
      driver().module_load_data(&module, k.cubin.data()),
      "loading the JIT module of " + expression);
  CUfunction f;
  check(
      driver().module_get_function(&f, module, k.lowered_name.c_str()),
      "finding " + expression + " in its JIT module");
  return f;
}

/// The nvcc-built kernel's driver handle. Its host-side address is no
/// handle: this library's CUDA runtime is not MLX's, so the kernel must be
/// looked up in the current context first (cudaGetFuncBySymbol).
CUfunction load_aot(const std::string& expression, int device) {
#ifdef MLX_FUSED_ATTN_HAS_CUDA_AOT
  const void* symbol = aot_kernel(expression);
#else
  const void* symbol = nullptr;
#endif
  if (symbol == nullptr) {
    throw std::logic_error(
        std::string(kOp) + "internal error: no AOT kernel " + expression);
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaFunction_t f;
  check(cudaGetFuncBySymbol(&f, symbol), "cudaGetFuncBySymbol " + expression);
  return reinterpret_cast<CUfunction>(f);
}

} // namespace

bool use_jit() {
#ifdef MLX_FUSED_ATTN_HAS_CUDA_AOT
  const char* env = std::getenv("MLX_FUSED_ATTN_JIT");
  return env != nullptr && std::string(env) == "1";
#else
  return true;
#endif
}

bool has_wgmma(int arch) {
#ifdef MLX_FUSED_ATTN_AOT_SM90A
  const bool aot_sm90a = true;
#else
  const bool aot_sm90a = false;
#endif
  return arch == 90 && (aot_sm90a || use_jit());
}

/// Each kernel is loaded once per (device, JIT or AOT): the first call
/// compiles or looks it up, later calls find it here.
CUfunction load_kernel(
    KernelFamily family,
    const std::string& expression,
    int device,
    int arch,
    int smem_bytes,
    bool max_shared) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, int, bool, bool>, CUfunction>
      functions;
  const bool broken = family_broken_by_test(family);
  const bool jit = use_jit() || broken;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(expression, device, jit, broken);
  if (auto it = functions.find(key); it != functions.end()) {
    return it->second;
  }
  const CUfunction f = jit ? load_jit(family, expression, arch)
                           : load_aot(expression, device);
  if (smem_bytes > 0) {
    check(
        driver().func_set_attribute(
            f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem_bytes),
        "raising the shared memory limit of " + expression);
  }
  if (max_shared) {
    check(
        driver().func_set_attribute(
            f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            CU_SHAREDMEM_CARVEOUT_MAX_SHARED),
        "preferring shared memory for " + expression);
  }
  functions.emplace(key, f);
  return f;
}

Support kernel_ready(
    KernelFamily family,
    const std::string& expression,
    int device,
    int threads,
    const std::function<CUfunction()>& load) {
  return kernel_available(
      family,
      "CUDA GPU " + std::to_string(device),
      std::string(use_jit() || family_broken_by_test(family) ? "JIT " : "AOT ") +
          expression,
      [&] {
        const CUfunction f = load();
        int max_threads = 0;
        check(
            driver().func_get_attribute(
                &max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f),
            "reading the thread limit of " + expression);
        if (max_threads < threads) {
          throw std::runtime_error(
              expression + " takes at most " + std::to_string(max_threads) +
              " threads a block; the launch needs " + std::to_string(threads));
        }
      });
}

Support copy_kernels_ready(fa::DType dtype, int device, int arch) {
  const Support copy = kernel_ready(StridedCopyKernelKey{dtype}, device, arch);
  return copy.ok ? kernel_ready(PoisonKernelKey{}, device, arch) : copy;
}

} // namespace mlx_fused_attn::cuda
