// Whether each kernel family (kernel_family.h) can run here. A family is
// one .metal file (one metallib, or one JIT library an instantiation, on
// Metal; one NVRTC source on CUDA), so one family's build failure never
// takes the others down. The op asks kernel_available, through the
// backends' prepare, before it builds the graph; a family or pipeline that
// cannot be built makes the call fall back, with the reason, instead of
// failing inside eval.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "mlx_fused_attn/plan/kernel_family.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn {

/// Test hook: MLX_FUSED_ATTN_BREAK_FAMILY lists families (comma separated,
/// by family_name) whose sources get a compile error, so that their real
/// build path fails (GPU) or their kernels refuse (CPU). Read at each call.
bool family_broken_by_test(KernelFamily family);

/// The line the test hook appends to a broken family's source.
const char* injected_compile_error();

/// Whether `what` (a library, a kernel or a pipeline of `family`, named
/// uniquely on `device`) can be used: `load` builds or finds it and throws
/// with the reason when it cannot. The outcome is kept for the process; a
/// failure is returned as a reason naming the family and the message, and
/// posted once as a KernelFailure notice (notices.h).
Support kernel_available(
    KernelFamily family,
    const std::string& device,
    const std::string& what,
    const std::function<void()>& load);

/// How many builds have failed in this process (each posts a notice): a
/// change in it can change what the planner finds built.
int kernel_failures();

/// Whether the CPU kernel of `family` may run: always, but for the test
/// hook, which makes it refuse (through kernel_available, as a GPU family
/// that fails to build would).
Support cpu_kernel_available(KernelFamily family);

/// Every remembered outcome: (family, device, what, reason), reason empty
/// when it loaded; for kernel_status() and the selftest's report.
struct KernelOutcome {
  std::string family;
  std::string device;
  std::string what;
  std::string reason;
};
std::vector<KernelOutcome> kernel_outcomes();

} // namespace mlx_fused_attn
