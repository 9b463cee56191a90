// The counts of op_count.h: per operation site name, the completed
// rendezvous. Keyed by the name's address (the shim passes string literals,
// so each call site costs one hash lookup) and merged by name when written,
// since one name's literal may have several addresses.
#include "op_count.h"

#if defined(FA_EMU_COUNT)

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>

namespace fa_emu {

namespace {

std::unordered_map<const char*, uint64_t> g_ops;

} // namespace

void count_op(const char* op) {
  ++g_ops[op];
}

void write_op_counts(const char* path) {
  std::map<std::string, uint64_t> by_name;
  for (const auto& op : g_ops) {
    by_name[op.first] += op.second;
  }
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    std::fprintf(stderr, "metal_emu: cannot write %s\n", path);
    std::_Exit(2);
  }
  for (const auto& op : by_name) {
    std::fprintf(
        f, "%s %llu\n", op.first.c_str(), static_cast<unsigned long long>(op.second));
  }
  std::fclose(f);
}

} // namespace fa_emu

#endif
