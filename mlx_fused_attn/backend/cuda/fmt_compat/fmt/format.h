// MLX's CUDA headers (mlx/backend/cuda/lru_cache.h, reached through
// device.h) include <fmt/format.h>, which MLX's wheel does not ship. Where
// no fmt is installed, cmake/cuda.cmake puts this folder on the include
// path instead: those headers only name fmt::format inside a template this
// library never instantiates, so a declaration is all they need (using it
// would fail to link, not misbehave).
#pragma once

#include <string>

namespace fmt {

template <typename... Args>
std::string format(const char* format_string, Args&&... args);

} // namespace fmt
