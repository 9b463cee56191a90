// The launch request the Python harness writes for the driver, and the
// result file the driver writes back. Both are little-endian binary files;
// emu.py holds the writer and reader that mirror this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernel_table.h"

namespace fa_emu {

struct BufferBinding {
  unsigned index;
  std::vector<unsigned char> bytes;
};

struct ThreadgroupBinding {
  unsigned index;
  uint64_t size;
};

struct ConstantBinding {
  unsigned index;
  ConstantValue value;
};

/// A program-scope threadgroup array (FA_SHARED_ARRAY_DECL), located by the
/// harness in the driver's symbol table relative to `anchor`.
struct SharedArray {
  int64_t offset;
  uint64_t size;
};

struct Request {
  std::string kernel;
  unsigned grid[3];
  unsigned group[3];
  bool adversarial;
  uint64_t seed;
  uint64_t stack_bytes;
  std::vector<ConstantBinding> constants;
  std::vector<BufferBinding> buffers;
  std::vector<ThreadgroupBinding> threadgroup_memory;
  std::vector<SharedArray> shared_arrays;
};

/// Reads a request; on a malformed file prints why and exits.
Request read_request(const char* path);

/// Writes every bound buffer's final bytes, in request order.
void write_result(const char* path, const std::vector<BufferBinding>& buffers);

/// The symbol the harness measures shared-array offsets from.
extern const char anchor;

} // namespace fa_emu
