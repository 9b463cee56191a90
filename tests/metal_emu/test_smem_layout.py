"""The shared-memory layouts of tile/smem_layout.h, as index arithmetic on
the host: the swizzled panels that Hopper's warpgroup products read
(checked on the H200 only through whole kernels) must be a permutation of
the block that keeps 16-byte runs whole, follow the hardware's swizzle
(CuTe's Swizzle<log2(width / 16), 4, 3> on byte addresses), and move by a
constant every 8 rows, which the cp.async loader relies on."""

import subprocess

import pytest

from . import emu

PROGRAM = r"""
#include <cstdio>
#include "mlx_fused_attn/tile/smem_layout.h"

template <int kRows, int kCols>
int check() {
  typedef fa::SwizzledRows<fa::half_t, kRows, kCols> L;
  static int seen[kRows * kCols];
  int bad = 0;
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      const int o = L::offset(r, c);
      bad += o < 0 || o >= kRows * kCols || seen[o]++;
      // 16-byte runs stay whole and in order.
      bad += c % 8 != 0 && o != L::offset(r, c - c % 8) + c % 8;
      // The hardware's swizzle, written independently: within a panel of
      // w bytes, 16-byte chunk j of row r sits at chunk j ^ ((r * w / 128) % (w / 16)).
      const int w = L::panel_bytes(c);
      const int chunks = w / 16;
      const int j = (c % L::kWideCols) / 8;
      const int want = L::panel_start(c) +
          (r * chunks + (j ^ ((r * w / 128) % chunks))) * 8 + c % 8;
      bad += o != want;
      bad += L::panel_start(c) * 2 % 1024 != 0;
      if (r + 8 < kRows) {
        bad += L::offset(r + 8, c) != o + 8 * L::row_step(c);
      }
    }
  }
  std::printf("D=%d bad=%d\n", kCols, bad);
  return bad;
}

int main() {
  return check<64, 32>() + check<64, 64>() + check<64, 80>() +
      check<64, 96>() + check<64, 128>() + check<128, 64>() != 0;
}
"""


def test_swizzled_rows(tmp_path):
    src = tmp_path / "layout.cpp"
    src.write_text(PROGRAM)
    exe = tmp_path / "layout"
    # On the host every pointer is a plain pointer, as the emulator's
    # kernels see them (it strips the address spaces from their source).
    flags = [*emu.METAL_DEFINES, *(f"-D{q}=" for q in emu.metal_source.ADDRESS_SPACES),
             "-I", emu.SHIM_DIR, "-I", emu.REPO_ROOT]
    r = subprocess.run([emu.CXX, "-std=c++17", *flags, str(src), "-o", str(exe)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(r.stderr)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
