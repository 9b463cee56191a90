#include "mlx_fused_attn/backend/kernel_availability.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "mlx_fused_attn/notices.h"

namespace mlx_fused_attn {

namespace {

struct Registry {
  std::mutex mutex;
  /// (family, device, what) -> reason; empty: loaded. The family is part of
  /// the key: the CPU families share their device and `what`.
  std::map<std::tuple<KernelFamily, std::string, std::string>, std::string> outcomes;
  std::atomic<int> failures{0};
};

Registry& registry() {
  static Registry r;
  return r;
}

} // namespace

bool family_broken_by_test(KernelFamily family) {
  const char* env = std::getenv("MLX_FUSED_ATTN_BREAK_FAMILY");
  if (env == nullptr) {
    return false;
  }
  std::stringstream list(env);
  std::string name;
  while (std::getline(list, name, ',')) {
    if (name == family_name(family)) {
      return true;
    }
  }
  return false;
}

const char* injected_compile_error() {
  return "\n#error \"injected by MLX_FUSED_ATTN_BREAK_FAMILY (a test hook)\"\n";
}

Support kernel_available(
    KernelFamily family,
    const std::string& device,
    const std::string& what,
    const std::function<void()>& load) {
  Registry& r = registry();
  // Held across load(): MLX builds libraries and pipelines under its own
  // locks, and a second caller should wait for the first outcome, not race
  // it into a second compile.
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto key = std::make_tuple(family, device, what);
  auto it = r.outcomes.find(key);
  if (it == r.outcomes.end()) {
    std::string reason;
    try {
      load();
    } catch (const std::exception& e) {
      reason = e.what();
      if (reason.empty()) {
        reason = "unknown error";
      }
    }
    it = r.outcomes.emplace(key, reason).first;
    if (!reason.empty()) {
      r.failures.fetch_add(1, std::memory_order_relaxed);
      post_notice(
          NoticeKind::KernelFailure,
          "mlx_fused_attn: the " + std::string(family_name(family)) +
          " kernels cannot run on " + device + " (" + what +
          "), so calls that need them run unfused: " + reason);
    }
  }
  const std::string& reason = it->second;
  if (reason.empty()) {
    return Support::yes();
  }
  return Support::no(
      "the " + std::string(family_name(family)) + " kernel family is "
      "unavailable on " + device + " (" + what + "): " + reason);
}

int kernel_failures() {
  return registry().failures.load(std::memory_order_relaxed);
}

Support cpu_kernel_available(KernelFamily family) {
  const bool broken = family_broken_by_test(family);
  return kernel_available(
      family, "CPU", broken ? "CPU kernel (broken)" : "CPU kernel", [&] {
        if (broken) {
          throw std::runtime_error(
              "disabled by MLX_FUSED_ATTN_BREAK_FAMILY (a test hook)");
        }
      });
}

std::vector<KernelOutcome> kernel_outcomes() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<KernelOutcome> out;
  for (const auto& [key, reason] : r.outcomes) {
    const auto& [family, device, what] = key;
    out.push_back({family_name(family), device, what, reason});
  }
  return out;
}

} // namespace mlx_fused_attn
