// What the generated trampoline tells the runtime about a .metal file: its
// kernels by host name, each parameter's binding, and its function constants.
#pragma once

#include <cstddef>

namespace fa_emu {

enum class ParamKind { Buffer, ThreadgroupMemory, Builtin };

enum class Builtin {
  thread_position_in_grid,
  thread_position_in_threadgroup,
  threadgroup_position_in_grid,
  threads_per_threadgroup,
  threadgroups_per_grid,
  threads_per_grid,
  thread_index_in_threadgroup,
  thread_index_in_simdgroup,
  simdgroup_index_in_threadgroup,
  threads_per_simdgroup,
  simdgroups_per_threadgroup,
};

struct ParamSpec {
  ParamKind kind;
  unsigned index; ///< n of [[buffer(n)]] / [[threadgroup(n)]]
  Builtin builtin;
  const char* name;
  const char* type; ///< as written in the source, for messages
  std::size_t pointee_size; ///< sizeof the pointed-to or referenced type
  bool by_reference; ///< `constant T& x` rather than `device T* x`
  const bool* enabled_by; ///< [[function_constant(c)]] on the parameter
};

struct KernelSpec {
  const char* host_name;
  void (*entry)(const ParamSpec* params);
  const ParamSpec* params;
  unsigned n_params;
};

enum class ConstantKind { Bool, Integer, Float };

struct ConstantValue {
  ConstantKind kind;
  long long integer;
  double real;
};

struct ConstantSpec {
  unsigned index;
  const char* name;
  const char* type;
  ConstantKind kind;
  /// Stores the value; returns false when it does not fit the type.
  bool (*assign)(void* storage, const ConstantValue& value);
  void* storage;
};

extern const KernelSpec* const kernels;
extern const unsigned n_kernels;
extern const ConstantSpec* const function_constants;
extern const unsigned n_function_constants;
/// Re-evaluates program-scope constants initialised from function constants.
void refresh_derived_constants();

/// Where a launch keeps its bound buffers, for the trampoline's entries.
void* bound_buffer(unsigned index);
void* bound_threadgroup_memory(unsigned index);

} // namespace fa_emu
