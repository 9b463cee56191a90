// The per-.metal-file driver executable: `driver REQUEST RESULT` runs one
// launch; `driver --list` prints the kernels, parameters and function
// constants the trampoline found, one per line, for the harness. The
// counting build also writes RESULT.loads (load_count.h) and RESULT.ops
// (op_count.h).
#include <cstdio>
#include <cstring>
#include <string>

#include "kernel_table.h"
#include "load_count.h"
#include "op_count.h"
#include "request.h"

namespace fa_emu {
void run_launch(Request& r);
} // namespace fa_emu

namespace {

const char* kind_name(fa_emu::ParamKind k) {
  switch (k) {
    case fa_emu::ParamKind::Buffer:
      return "buffer";
    case fa_emu::ParamKind::ThreadgroupMemory:
      return "threadgroup";
    case fa_emu::ParamKind::Builtin:
      return "builtin";
  }
  return "";
}

void list() {
  for (unsigned i = 0; i < fa_emu::n_kernels; ++i) {
    const fa_emu::KernelSpec& k = fa_emu::kernels[i];
    std::printf("kernel\t%s\n", k.host_name);
    for (unsigned j = 0; j < k.n_params; ++j) {
      const fa_emu::ParamSpec& p = k.params[j];
      std::printf(
          "param\t%s\t%u\t%s\t%s\t%zu\n",
          kind_name(p.kind),
          p.index,
          p.name,
          p.type,
          p.pointee_size);
    }
  }
  for (unsigned i = 0; i < fa_emu::n_function_constants; ++i) {
    const fa_emu::ConstantSpec& c = fa_emu::function_constants[i];
    std::printf("constant\t%u\t%s\t%s\n", c.index, c.name, c.type);
  }
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    list();
    return 0;
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s REQUEST RESULT | --list\n", argv[0]);
    return 2;
  }
  fa_emu::Request r = fa_emu::read_request(argv[1]);
  fa_emu::run_launch(r);
  fa_emu::write_result(argv[2], r.buffers);
  fa_emu::write_load_counts((std::string(argv[2]) + ".loads").c_str());
  fa_emu::write_op_counts((std::string(argv[2]) + ".ops").c_str());
  return 0;
}
