// One emulated dispatch: checks the request against the kernel's signature
// (every enabled [[buffer(n)]] bound, sizes that fit the parameter types, no
// stray bindings, every function constant given with a fitting value), puts
// each buffer in its own exact-size heap allocation so the sanitizer sees
// any access past its ends, then runs the threadgroups one after another.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "geometry.h"
#include "kernel_table.h"
#include "load_count.h"
#include "request.h"
#include "scheduler.h"
#include "splitmix.h"

namespace fa_emu {

namespace {

std::map<unsigned, void*> g_buffers;
std::map<unsigned, std::pair<void*, uint64_t>> g_threadgroup_memory;
const KernelSpec* g_kernel = nullptr;
LaunchGeometry g_geometry;

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "metal_emu error: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(3);
}

std::string param_text(const ParamSpec& p) {
  const char* attr = p.kind == ParamKind::Buffer ? "buffer" : "threadgroup";
  return std::string("`") + p.type + " " + p.name + " [[" + attr + "(" +
      std::to_string(p.index) + ")]]`";
}

const KernelSpec& find_kernel(const std::string& name) {
  std::string known;
  for (unsigned i = 0; i < n_kernels; ++i) {
    if (name == kernels[i].host_name) {
      return kernels[i];
    }
    known += std::string(i ? ", " : "") + kernels[i].host_name;
  }
  fail("no kernel with host name '" + name + "'; this file has: " + known);
}

void set_function_constants(const Request& r) {
  std::map<unsigned, const ConstantSpec*> declared;
  for (unsigned i = 0; i < n_function_constants; ++i) {
    declared[function_constants[i].index] = &function_constants[i];
  }
  std::map<unsigned, bool> given;
  for (const ConstantBinding& c : r.constants) {
    auto it = declared.find(c.index);
    if (it == declared.end()) {
      fail(
          "function constant " + std::to_string(c.index) +
          " is not declared in this file");
    }
    if (!it->second->assign(it->second->storage, c.value)) {
      fail(
          "the value given for function constant " + std::to_string(c.index) +
          " does not fit `" + it->second->type + " " + it->second->name + "`");
    }
    given[c.index] = true;
  }
  for (const auto& d : declared) {
    if (!given.count(d.first)) {
      fail(
          "function constant " + std::to_string(d.first) + " (`" +
          d.second->type + " " + d.second->name + "`) has no value");
    }
  }
  refresh_derived_constants();
}

void bind_buffers(const Request& r, const KernelSpec& k) {
  std::map<unsigned, const BufferBinding*> bound;
  for (const BufferBinding& b : r.buffers) {
    bound[b.index] = &b;
  }
  std::map<unsigned, bool> wanted;
  for (unsigned i = 0; i < k.n_params; ++i) {
    const ParamSpec& p = k.params[i];
    if (p.kind != ParamKind::Buffer) {
      continue;
    }
    wanted[p.index] = true;
    if (p.enabled_by != nullptr && !*p.enabled_by) {
      continue;
    }
    auto it = bound.find(p.index);
    if (it == bound.end()) {
      fail(
          "kernel '" + std::string(k.host_name) + "' reads " + param_text(p) +
          " but no buffer is bound at index " + std::to_string(p.index));
    }
    const std::size_t size = it->second->bytes.size();
    if (p.by_reference ? size < p.pointee_size : size % p.pointee_size != 0) {
      fail(
          "buffer " + std::to_string(p.index) + " holds " +
          std::to_string(size) + " bytes, which does not fit " +
          param_text(p) + " (element size " +
          std::to_string(p.pointee_size) + ")");
    }
  }
  for (const BufferBinding& b : r.buffers) {
    if (!wanted.count(b.index)) {
      fail(
          "buffer " + std::to_string(b.index) + " is bound but kernel '" +
          k.host_name + "' has no [[buffer(" + std::to_string(b.index) +
          ")]] parameter");
    }
    void* p = std::malloc(b.bytes.size());
    std::memcpy(p, b.bytes.data(), b.bytes.size());
    g_buffers[b.index] = p;
    count_buffer(b.index, p, b.bytes.size());
  }
}

void bind_threadgroup_memory(const Request& r, const KernelSpec& k) {
  std::map<unsigned, uint64_t> sizes;
  for (const ThreadgroupBinding& t : r.threadgroup_memory) {
    sizes[t.index] = t.size;
  }
  for (unsigned i = 0; i < k.n_params; ++i) {
    const ParamSpec& p = k.params[i];
    if (p.kind != ParamKind::ThreadgroupMemory) {
      continue;
    }
    auto it = sizes.find(p.index);
    if (it == sizes.end() || it->second == 0) {
      fail(
          "kernel '" + std::string(k.host_name) + "' uses " + param_text(p) +
          " but no threadgroup memory length is set at that index");
    }
    if (it->second % 16 != 0) {
      fail(
          "threadgroup memory length " + std::to_string(it->second) +
          " at index " + std::to_string(p.index) +
          " is not a multiple of 16 bytes, which Metal requires");
    }
    g_threadgroup_memory[p.index] = {std::malloc(it->second), it->second};
    count_threadgroup_memory(g_threadgroup_memory[p.index].first, it->second);
    sizes.erase(it);
  }
  if (!sizes.empty()) {
    fail(
        "threadgroup memory length set at index " +
        std::to_string(sizes.begin()->first) + " but kernel '" + k.host_name +
        "' has no [[threadgroup(" + std::to_string(sizes.begin()->first) +
        ")]] parameter");
  }
}

void shuffle(std::vector<std::array<unsigned, 3>>& v, uint64_t seed) {
  for (std::size_t i = v.size(); i > 1; --i) {
    std::swap(v[i - 1], v[splitmix64(seed) % i]);
  }
}

void body(const ThreadState&) {
  g_kernel->entry(g_kernel->params);
}

} // namespace

void* bound_buffer(unsigned index) {
  auto it = g_buffers.find(index);
  return it == g_buffers.end() ? nullptr : it->second;
}

void* bound_threadgroup_memory(unsigned index) {
  return g_threadgroup_memory.at(index).first;
}

const LaunchGeometry& geometry() {
  return g_geometry;
}

void run_launch(Request& r) {
  const KernelSpec& k = find_kernel(r.kernel);
  g_kernel = &k;
  const uint64_t threads = uint64_t(r.group[0]) * r.group[1] * r.group[2];
  if (threads == 0 || threads > 1024 || r.grid[0] * r.grid[1] * r.grid[2] == 0) {
    fail("a launch needs 1 to 1024 threads per threadgroup and a non-empty grid");
  }
  set_function_constants(r);
  bind_buffers(r, k);
  bind_threadgroup_memory(r, k);
  std::vector<std::pair<char*, uint64_t>> shared;
  for (const SharedArray& s : r.shared_arrays) {
    shared.emplace_back(const_cast<char*>(&anchor) + s.offset, s.size);
    count_threadgroup_memory(shared.back().first, s.size);
  }
  for (int i = 0; i < 3; ++i) {
    g_geometry.grid[i] = r.grid[i];
    g_geometry.group[i] = r.group[i];
  }
  std::vector<std::array<unsigned, 3>> groups;
  for (unsigned z = 0; z < r.grid[2]; ++z) {
    for (unsigned y = 0; y < r.grid[1]; ++y) {
      for (unsigned x = 0; x < r.grid[0]; ++x) {
        groups.push_back({x, y, z});
      }
    }
  }
  if (r.adversarial) {
    // The GPU runs threadgroups in no particular order; neither do we, so
    // two threadgroups writing one location give order-dependent results.
    shuffle(groups, r.seed);
  }
  Scheduler scheduler(r.group, r.stack_bytes);
  for (uint64_t serial = 0; serial < groups.size(); ++serial) {
    const std::array<unsigned, 3>& pos = groups[serial];
    for (int i = 0; i < 3; ++i) {
      g_geometry.group_pos[i] = pos[i];
    }
    // Threadgroup memory starts undefined on the GPU: all-ones bytes
    // (NaN in every float type) make a read before a write show.
    count_threadgroup_begins();
    for (auto& s : shared) {
      std::memset(s.first, 0xff, s.second);
    }
    for (auto& t : g_threadgroup_memory) {
      std::memset(t.second.first, 0xff, t.second.second);
    }
    const std::string where = "kernel '" + r.kernel + "' threadgroup (" +
        std::to_string(pos[0]) + ", " + std::to_string(pos[1]) + ", " +
        std::to_string(pos[2]) + ")";
    scheduler.run(
        &body, Schedule{r.adversarial, r.seed * 1000003u + serial}, where);
  }
  for (BufferBinding& b : r.buffers) {
    std::memcpy(b.bytes.data(), g_buffers[b.index], b.bytes.size());
    std::free(g_buffers[b.index]);
  }
  for (auto& t : g_threadgroup_memory) {
    std::free(t.second.first);
  }
}

} // namespace fa_emu
