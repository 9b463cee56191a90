#include "request.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fa_emu {

const char anchor = 0;

namespace {

class Reader {
 public:
  explicit Reader(const char* path) : path_(path) {
    f_ = std::fopen(path, "rb");
    if (f_ == nullptr) {
      fail("cannot open");
    }
  }
  ~Reader() {
    std::fclose(f_);
  }

  template <class T>
  T get() {
    T v;
    read(&v, sizeof v);
    return v;
  }
  void read(void* out, std::size_t n) {
    if (n > 0 && std::fread(out, 1, n, f_) != n) {
      fail("is truncated");
    }
  }
  std::string text() {
    std::string s(get<uint32_t>(), '\0');
    read(&s[0], s.size());
    return s;
  }

 private:
  [[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "metal_emu: request file %s %s\n", path_, what);
    std::_Exit(2);
  }
  const char* path_;
  std::FILE* f_;
};

} // namespace

Request read_request(const char* path) {
  Reader in(path);
  char magic[8];
  in.read(magic, 8);
  if (std::memcmp(magic, "FAEMU01\n", 8) != 0) {
    std::fprintf(stderr, "metal_emu: %s is not a launch request\n", path);
    std::_Exit(2);
  }
  Request r;
  r.kernel = in.text();
  for (unsigned& g : r.grid) {
    g = in.get<uint32_t>();
  }
  for (unsigned& g : r.group) {
    g = in.get<uint32_t>();
  }
  r.adversarial = in.get<uint32_t>() != 0;
  r.seed = in.get<uint64_t>();
  r.stack_bytes = in.get<uint64_t>();
  for (uint32_t n = in.get<uint32_t>(); n > 0; --n) {
    ConstantBinding c;
    c.index = in.get<uint32_t>();
    c.value.kind = ConstantKind(in.get<uint32_t>());
    c.value.integer = in.get<int64_t>();
    c.value.real = in.get<double>();
    r.constants.push_back(c);
  }
  for (uint32_t n = in.get<uint32_t>(); n > 0; --n) {
    BufferBinding b;
    b.index = in.get<uint32_t>();
    b.bytes.resize(in.get<uint64_t>());
    in.read(b.bytes.data(), b.bytes.size());
    r.buffers.push_back(std::move(b));
  }
  for (uint32_t n = in.get<uint32_t>(); n > 0; --n) {
    ThreadgroupBinding t;
    t.index = in.get<uint32_t>();
    t.size = in.get<uint64_t>();
    r.threadgroup_memory.push_back(t);
  }
  for (uint32_t n = in.get<uint32_t>(); n > 0; --n) {
    SharedArray s;
    s.offset = in.get<int64_t>();
    s.size = in.get<uint64_t>();
    r.shared_arrays.push_back(s);
  }
  return r;
}

void write_result(const char* path, const std::vector<BufferBinding>& buffers) {
  std::FILE* f = std::fopen(path, "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "metal_emu: cannot write %s\n", path);
    std::_Exit(2);
  }
  for (const BufferBinding& b : buffers) {
    std::fwrite(b.bytes.data(), 1, b.bytes.size(), f);
  }
  std::fclose(f);
}

} // namespace fa_emu
