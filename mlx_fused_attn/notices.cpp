#include "mlx_fused_attn/notices.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace mlx_fused_attn {

namespace {

struct Queue {
  std::mutex mutex;
  std::set<std::string> posted; ///< every message ever queued, for once-only
  std::vector<Notice> pending;
};

Queue& queue() {
  static Queue q;
  return q;
}

bool fallback_warnings_on() {
  const char* env = std::getenv("MLX_FUSED_ATTN_WARN_FALLBACK");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

} // namespace

void post_notice(NoticeKind kind, const std::string& message) {
  Queue& q = queue();
  std::lock_guard<std::mutex> lock(q.mutex);
  if (q.posted.insert(message).second) {
    q.pending.push_back({kind, message});
  }
}

void note_fallback(
    const char* op,
    const mlx::core::Device& device,
    const std::string& reason) {
  if (!fallback_warnings_on()) {
    return;
  }
  const char* where = device == mlx::core::Device::cpu ? "the CPU" : "the GPU";
  post_notice(
      NoticeKind::Fallback,
      std::string("mlx_fused_attn: ") + op + " ran as plain MLX ops on " +
          where + " instead of a fused kernel: " + reason);
}

std::vector<Notice> take_notices() {
  Queue& q = queue();
  std::lock_guard<std::mutex> lock(q.mutex);
  std::vector<Notice> out;
  out.swap(q.pending);
  return out;
}

} // namespace mlx_fused_attn
