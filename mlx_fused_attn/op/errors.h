// The errors the ops raise at their boundary. Messages start with the op's
// name in brackets and name the argument and what it accepts.
#pragma once

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

} // namespace mlx_fused_attn
