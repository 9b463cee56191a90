// The errors the ops raise at their boundary, and the checks that every
// attention op makes alike. Messages start with the op's name in brackets
// and name the argument and what it accepts.
#pragma once

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mlx/utils.h"

namespace mlx_fused_attn {

/// Raised for arguments of the wrong kind (dtype); Python sees TypeError.
/// Shape and value problems raise std::invalid_argument (Python ValueError).
class TypeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// "[op] " followed by the parts, streamed (shapes and dtypes print as MLX
/// prints them).
template <typename... Parts>
std::string op_message(const char* op, const Parts&... parts) {
  std::ostringstream msg;
  msg << "[" << op << "] ";
  (msg << ... << parts);
  return msg.str();
}

/// Checks that the softmax scale is finite.
inline void check_scale(const char* op, float scale) {
  if (!std::isfinite(scale)) {
    throw std::invalid_argument(
        op_message(op, "scale must be finite; got ", scale));
  }
}

/// Checks that the H_q query heads share the H_kv key/value heads evenly
/// (GQA).
inline void check_gqa_heads(const char* op, int H_q, int H_kv) {
  if (H_kv == 0 || H_q % H_kv != 0) {
    throw std::invalid_argument(op_message(
        op, "the query heads (", H_q, ") must be a multiple of the "
        "key/value heads (", H_kv, ")"));
  }
}

} // namespace mlx_fused_attn
