#include "mlx_fused_attn/op/plan_inputs_state.h"

#include <cstring>

#include "mlx_fused_attn/backend/kernel_availability.h"

#if defined(__APPLE__)
#include <crt_externs.h>
#else
extern char** environ;
#endif

namespace mlx_fused_attn {

namespace {

char** environment() {
#if defined(__APPLE__)
  // A shared library on macOS reaches the environment through this call.
  return *_NSGetEnviron();
#else
  return environ;
#endif
}

} // namespace

std::uint64_t plan_inputs_state() {
  constexpr char kPrefix[] = "MLX_FUSED_ATTN_";
  // FNV-1a over the switches' "NAME=value" entries, in the environment's order.
  std::uint64_t h = 1469598103934665603ull;
  for (char** e = environment(); e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, kPrefix, sizeof(kPrefix) - 1) != 0) {
      continue;
    }
    for (const char* c = *e; *c != '\0'; ++c) {
      h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
    }
    h = (h ^ 0xffu) * 1099511628211ull;
  }
  return h ^ (static_cast<std::uint64_t>(kernel_failures()) << 1);
}

} // namespace mlx_fused_attn
