// Messages for the user that the Python layer raises as warnings. Each is
// queued once a process and drained after every call (take_notices), so a
// warning shows in the call that caused it and never repeats.
#pragma once

#include <string>
#include <vector>

#include "mlx/device.h"

namespace mlx_fused_attn {

enum class NoticeKind {
  KernelFailure, ///< a kernel family cannot be built or loaded
  Fallback, ///< a call ran as plain MLX ops (MLX_FUSED_ATTN_WARN_FALLBACK=1)
};

struct Notice {
  NoticeKind kind;
  std::string message;
};

/// Queues `message` unless the same message was queued before in this
/// process. Thread-safe.
void post_notice(NoticeKind kind, const std::string& message);

/// When MLX_FUSED_ATTN_WARN_FALLBACK=1 (read at each call), posts a Fallback
/// notice saying that `op` ran as plain MLX ops on `device`, and why.
void note_fallback(
    const char* op,
    const mlx::core::Device& device,
    const std::string& reason);

/// The notices queued since the last call, oldest first.
std::vector<Notice> take_notices();

} // namespace mlx_fused_attn
