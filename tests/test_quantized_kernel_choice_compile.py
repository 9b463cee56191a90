"""The quantized family's kernel choice on CUDA (mlx_fused_attn/plan/
quantized_kernel_choice.h, which quantized_attention_planner.cpp reads): the
tiles, the loader's chunk policy and the key splits by batch, bits, dtype
and head dim, the H100 sweep's rows among them (decode, 32/8 heads packed
as rows, D = 128, bf16, 4 bits in groups of 64, 132 multiprocessors: the
key-slice tiles with packed rows-fastest chunks and 32 splits at B=1, the
decode tiles with packed 16-byte chunks and 16 splits at B=8), the two
switches that force each tile kind and the float chunks
(MLX_FUSED_ATTN_QUANT_DECODE_TILES, MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS), the host's alignment check of the
words the packed policies read, and that every kernel it can pick is in
the instance list's walk. Host C++ built with the machine's compiler: no
GPU, no MLX; skips without one."""

import shutil

import pytest

from conftest import run_host_program

CXX = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler on the PATH")

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "mlx_fused_attn/plan/kernel_switches.h"
#include "mlx_fused_attn/plan/quantized_kernel_choice.h"

using namespace mlx_fused_attn;
using Chunks = fa::QuantizedChunks;

int failures = 0;
constexpr int kH100 = 132;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("%s\n", what);
    ++failures;
  }
}

/// Decode with `Hq` query heads on `Hkv`, packed as the planner packs them
/// (pack_gqa_rows): H_kv heads of H_q / H_kv rows.
fa::AttnParams decode(int B, int Hq, int Hkv, int L_k, int D) {
  fa::AttnParams p{};
  p.B = B;
  p.H_q = Hkv;
  p.H_kv = Hkv;
  p.gqa_factor = 1;
  p.L_q = Hq / Hkv;
  p.L_k = L_k;
  p.D = D;
  p.D_v = D;
  return p;
}

/// The planner's choice under the switches as set, with its key splits
/// (quantized_attention_planner.cpp's quantized_key_splits through
/// family_planning.cpp's key_splits_of, default hint, splits on).
struct Planned {
  QuantizedKernelChoice choice;
  int splits;
};

Planned plan(const fa::AttnParams& p, int bits, int group, fa::DType t, fa::Backend b) {
  const QuantizedKernelChoice c = choose_quantized_kernel(
      p, bits, group, t, b, kH100, forced_quantized_tiles(),
      quantized_float_chunks_forced());
  const int64_t bytes = quantized_kv_bytes_a_key(p.D, p.D_v, bits, group, fa::dtype_size(t));
  const int64_t groups = int64_t((p.L_q + c.tiles.bq - 1) / c.tiles.bq) * p.H_q * p.B;
  const int64_t most = splits_worth_their_partials_of(
      p.L_k, p.L_q < c.tiles.bq ? p.L_q : c.tiles.bq, p.D_v, bytes, 2 * groups >= kH100 ? 16 : 8);
  const int splits = key_split_count(
      groups, c.per_core * kH100, (p.L_k + c.tiles.bk - 1) / c.tiles.bk, most);
  return {c, splits};
}

bool is_decode(const fa::AttnTiles& t) {
  return t == fa::choose_quantized_decode_tiles();
}

bool is_sliced(const fa::AttnTiles& t) {
  return t == fa::choose_quantized_sliced_tiles();
}

void check_rows() {
  const fa::DType bf16 = fa::DType::BFloat16;
  const fa::Backend cuda = fa::Backend::Cuda;
  const fa::AttnTiles def = fa::choose_quantized_attention_tiles(128, bf16, cuda);
  // The sweep's rows (H100, 2026-12-06).
  Planned b1 = plan(decode(1, 32, 8, 32768, 128), 4, 64, bf16, cuda);
  expect(is_sliced(b1.choice.tiles) && b1.choice.chunks == Chunks::PackedWideRows &&
             b1.splits == 32,
         "B=1 32K: key-slice tiles, packed rows-fastest, 32 splits");
  Planned b1s = plan(decode(1, 32, 8, 4096, 128), 4, 64, bf16, cuda);
  expect(b1s.choice.tiles == def && b1s.choice.chunks == Chunks::PackedWideRows &&
             b1s.splits == 16,
         "B=1 4K: default tiles (124 keys a key-slice threadgroup), rows-fastest, 16 splits");
  Planned b8 = plan(decode(8, 32, 8, 32768, 128), 4, 64, bf16, cuda);
  expect(is_decode(b8.choice.tiles) && b8.choice.chunks == Chunks::PackedWide && b8.splits == 16,
         "B=8 32K: decode tiles, packed 16-byte, 16 splits (twice the bytes rule's 8)");
  // Short contexts at B=8 take the key slices (993 keys a threadgroup, 124
  // a decode one).
  expect(is_sliced(plan(decode(8, 32, 8, 4096, 128), 4, 64, bf16, cuda).choice.tiles),
         "B=8 4K: key-slice tiles");
  // Large batches: decode tiles, unsplit once their blocks pass the wave.
  Planned b64 = plan(decode(64, 32, 8, 8192, 128), 4, 64, bf16, cuda);
  expect(is_decode(b64.choice.tiles) && b64.splits == 2, "B=64 8K: decode tiles, 2 splits");
  // fp16 as bf16; other head dims: decode and key-slice tiles to D = 128;
  // rows-fastest at 128 threads where they are whole groups of eight rows
  // (not D = 96 or 192).
  expect(plan(decode(8, 32, 8, 32768, 128), 4, 64, fa::DType::Float16, cuda).choice.chunks ==
             Chunks::PackedWide, "fp16 B=8: packed 16-byte");
  expect(plan(decode(1, 32, 8, 32768, 96), 4, 32, bf16, cuda).choice.chunks == Chunks::PackedWide,
         "D=96 key-slice tiles: packed 16-byte, not rows-fastest");
  expect(plan(decode(1, 32, 8, 32768, 64), 4, 64, bf16, cuda).choice.chunks ==
             Chunks::PackedWideRows, "D=64 key-slice tiles: rows-fastest");
  Planned d256 = plan(decode(8, 32, 8, 32768, 256), 4, 64, bf16, cuda);
  expect(d256.choice.tiles == fa::choose_quantized_attention_tiles(256, bf16, cuda) &&
             d256.choice.chunks == Chunks::PackedWideRows,
         "D=256 B=8: default tiles (no decode tiles past 128), rows-fastest");
  expect(plan(decode(1, 32, 8, 32768, 192), 4, 64, bf16, cuda).choice.chunks == Chunks::PackedWide,
         "D=192: packed 16-byte");
  // 8 bits and fp32: float chunks and the default tiles at any batch.
  Planned b8_8 = plan(decode(8, 32, 8, 32768, 128), 8, 64, bf16, cuda);
  expect(b8_8.choice.tiles == def && b8_8.choice.chunks == Chunks::Float && b8_8.splits == 4,
         "8 bits B=8: default tiles, float chunks, the bytes rule's splits");
  Planned f32 = plan(decode(8, 32, 8, 32768, 128), 4, 64, fa::DType::Float32, cuda);
  expect(f32.choice.tiles == fa::choose_quantized_attention_tiles(128, fa::DType::Float32, cuda) &&
             f32.choice.chunks == Chunks::Float, "fp32: its tiles, float chunks");
  // Prefill (rows past one decode block) keeps the default tiles.
  fa::AttnParams prefill = decode(8, 32, 8, 32768, 128);
  prefill.L_q = 128;
  expect(plan(prefill, 4, 64, bf16, cuda).choice.tiles == def, "prefill: default tiles");
  // Metal: its tiles, float chunks (its loader has no other).
  Planned metal = plan(decode(8, 32, 8, 32768, 128), 4, 64, bf16, fa::Backend::Metal);
  expect(metal.choice.tiles == fa::choose_quantized_attention_tiles(128, bf16, fa::Backend::Metal) &&
             metal.choice.chunks == Chunks::Float, "Metal: its tiles, float chunks");
}

void check_switches() {
  const fa::DType bf16 = fa::DType::BFloat16;
  const fa::Backend cuda = fa::Backend::Cuda;
  setenv("MLX_FUSED_ATTN_QUANT_DECODE_TILES", "1", 1);
  Planned b1 = plan(decode(1, 32, 8, 32768, 128), 4, 64, bf16, cuda);
  expect(is_decode(b1.choice.tiles) && b1.choice.chunks == Chunks::PackedWide && b1.splits == 128,
         "forced decode tiles at B=1 32K: 128 splits (the sweep's x2 row)");
  expect(!is_decode(plan(decode(8, 32, 8, 32768, 128), 8, 64, bf16, cuda).choice.tiles),
         "forced decode tiles: none at 8 bits");
  expect(!is_decode(plan(decode(8, 32, 8, 32768, 256), 4, 64, bf16, cuda).choice.tiles),
         "forced decode tiles: none past D = 128");
  setenv("MLX_FUSED_ATTN_QUANT_DECODE_TILES", "0", 1);
  const fa::AttnTiles def = fa::choose_quantized_attention_tiles(128, bf16, cuda);
  Planned b8 = plan(decode(8, 32, 8, 32768, 128), 4, 64, bf16, cuda);
  expect(b8.choice.tiles == def && b8.choice.chunks == Chunks::PackedWideRows && b8.splits == 4,
         "default tiles forced at B=8 32K: rows-fastest, 4 splits");
  expect(plan(decode(1, 32, 8, 32768, 128), 4, 64, bf16, cuda).choice.tiles == def,
         "default tiles forced at B=1 32K");
  setenv("MLX_FUSED_ATTN_QUANT_DECODE_TILES", "slices", 1);
  Planned s8 = plan(decode(8, 32, 8, 32768, 128), 4, 64, bf16, cuda);
  expect(is_sliced(s8.choice.tiles) && s8.choice.chunks == Chunks::PackedWideRows && s8.splits == 4,
         "key slices forced at B=8 32K: rows-fastest, the bytes rule's 4 splits");
  expect(plan(decode(8, 32, 8, 32768, 128), 8, 64, bf16, cuda).choice.tiles == def,
         "forced key slices: none at 8 bits");
  setenv("MLX_FUSED_ATTN_QUANT_DECODE_TILES", "yes", 1);
  expect(is_decode(plan(decode(8, 32, 8, 32768, 128), 4, 64, bf16, cuda).choice.tiles),
         "another value: the rule");
  unsetenv("MLX_FUSED_ATTN_QUANT_DECODE_TILES");
  setenv("MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS", "1", 1);
  Planned f8 = plan(decode(8, 32, 8, 32768, 128), 4, 64, bf16, cuda);
  expect(is_decode(f8.choice.tiles) && f8.choice.chunks == Chunks::Float && f8.splits == 16,
         "float chunks forced at B=8: decode tiles and splits kept, float chunks");
  expect(plan(decode(1, 32, 8, 32768, 128), 4, 64, bf16, cuda).choice.chunks == Chunks::Float,
         "float chunks forced at B=1");
  unsetenv("MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS");
}

void check_alignment() {
  // mlx-lm's cache: [B, H, L, D / 8] words at 4 bits, D = 128 (16 words).
  const int shape[3] = {2, 8, 100};
  const int64_t contiguous[3] = {8 * 100 * 16, 100 * 16, 16};
  expect(fa::quantized_words_aligned(0x1000, contiguous, shape), "contiguous cache aligned");
  expect(fa::quantized_words_aligned(0x1000 + 16 * 4 * 7, contiguous, shape),
         "a slice from row 7 aligned");
  expect(!fa::quantized_words_aligned(0x1000 + 4, contiguous, shape), "a word past 16 bytes");
  const int64_t odd_rows[3] = {8 * 100 * 18, 100 * 18, 18};
  expect(!fa::quantized_words_aligned(0x1000, odd_rows, shape), "rows 18 words apart");
  const int one_batch[3] = {1, 8, 100};
  const int64_t odd_batch[3] = {3, 100 * 16, 16};
  expect(fa::quantized_words_aligned(0x1000, odd_batch, one_batch),
         "a batch of one: its stride unread");
  expect(fa::quantized_chunks_need_aligned_words(Chunks::PackedWide) &&
             fa::quantized_chunks_need_aligned_words(Chunks::PackedWideRows) &&
             !fa::quantized_chunks_need_aligned_words(Chunks::Float),
         "the packed policies need aligned words");
}

/// Every choice the planner can make, under any switch, is a kernel of the
/// instance list's walk.
void check_instances() {
  const fa::DType types[] = {fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};
  for (fa::DType t : types)
    for (int D : {32, 64, 96, 128, 192, 256})
      for (int bits : {4, 8})
        for (int B : {1, 8, 64})
          for (int L_k : {512, 4096, 32768})
            for (const char* tiles_switch : {"", "0", "1", "slices"})
              for (const char* chunks_switch : {"", "1"}) {
                setenv("MLX_FUSED_ATTN_QUANT_DECODE_TILES", tiles_switch, 1);
                setenv("MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS", chunks_switch, 1);
                const QuantizedKernelChoice c =
                    plan(decode(B, 32, 8, L_k, D), bits, 32, t, fa::Backend::Cuda).choice;
                for (Chunks k : {c.chunks, Chunks::Float}) {
                  bool listed = false;
                  for_each_quantized_cuda_kernel(D, bits, t, [&](fa::AttnTiles tiles, Chunks chunks) {
                    listed = listed || (tiles == c.tiles && chunks == k);
                  });
                  if (!listed) {
                    std::printf("D=%d bits=%d B=%d L_k=%d: no instance of its choice\n", D, bits, B, L_k);
                    ++failures;
                  }
                }
              }
  unsetenv("MLX_FUSED_ATTN_QUANT_DECODE_TILES");
  unsetenv("MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS");
}

int main() {
  unsetenv("MLX_FUSED_ATTN_QUANT_DECODE_TILES");
  unsetenv("MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS");
  check_rows();
  check_switches();
  check_alignment();
  check_instances();
  std::printf("%d\n", failures);
  return failures != 0;
}
"""


def test_the_plan_picks_tiles_chunks_and_splits(tmp_path):
    result = run_host_program(CXX, PROGRAM, tmp_path)
    assert result.returncode == 0, f"{result.stdout}{result.stderr} failures"
