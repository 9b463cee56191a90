"""The Metal kernel's variants a Mac user can time (MetalAttnVariant,
mlx_fused_attn/kernels/attention_config.h) in the Metal emulator, against
the float64 reference: Q in threadgroup memory and 32-key blocks at D = 128
(instances of their own in mlx_fused_attn/families/attention/attention.metal), and the function constant
stride32 (32-bit row offsets stepped by pointer in the K/V loader), alone
and with each tile variant. Every case is ragged unless it says otherwise,
and each mask kind, causal, sinks, GQA and the three dtypes occur.

The host's parsing of MLX_FUSED_ATTN_METAL_VARIANT and its choice of
instance (backend/metal/attention_variant.h, choose_attention_tiles) are
compiled and run here too.
"""

import subprocess

import pytest

from . import emu
from .test_attention_kernel import FC, METAL, run_case
from .test_split_keys_kernel import run_split

STRIDE32 = 307  # attention_features.h

# (dtype, suffix of the instance past its tiles, bk): the tile variants.
TILE_VARIANTS = [
    ("float16", "_qs", 16),
    ("float16", "_qs", 32),
    ("float16", "", 32),
    ("bfloat16", "_qs", 16),
    ("bfloat16", "_qs", 32),
    ("bfloat16", "", 32),
]

FEATURES = [
    dict(causal=True, sinks=True, H_q=4, H_kv=2, L_q=65, L_k=127),
    dict(mask="bool", L_q=33, L_k=65),
    dict(mask="additive", mask_shape=(33, 100), H_q=4, H_kv=1, L_q=33, L_k=100, layout="blhd"),
    dict(causal=True, L_q=127, L_k=33),
]


@pytest.fixture(scope="module")
def prog():
    return emu.load(METAL)


@pytest.mark.parametrize("stride32", [False, True])
@pytest.mark.parametrize("variant", range(len(TILE_VARIANTS)))
def test_tile_variants(prog, variant, stride32):
    dtype, suffix, bk = TILE_VARIANTS[variant]
    features = FEATURES[(variant + stride32) % len(FEATURES)]
    run_case(
        prog, dtype=dtype, D=128, suffix=suffix, bk=bk, seed=200 + 2 * variant + stride32,
        constants={STRIDE32: stride32}, **features,
    )


# stride32 on default instances: head dims whose rows are not a whole
# number of the threadgroup's 16-byte runs (the stepped pointer wraps to the
# next row: D = 72, 80, 96, 192 in 128 threads), and ones that are.
STRIDE32_CASES = [
    ("float16", 96, 96, dict(mask="bool", H_q=4, H_kv=2, L_q=33, L_k=65)),
    ("bfloat16", 80, 80, dict(causal=True, sinks=True, L_q=65, L_k=127, layout="blhd")),
    ("float32", 72, 72, dict(mask="additive", L_q=40, L_k=33)),
    ("float32", 192, 128, dict(causal=True, H_q=3, H_kv=1, L_q=33, L_k=47)),
    ("float16", 64, 64, dict(L_q=127, L_k=65, layout="blhd")),
    ("float32", 256, 256, dict(mask="bool", sinks=True, L_q=33, L_k=40)),
]


@pytest.mark.parametrize("case", range(len(STRIDE32_CASES)))
def test_stride32(prog, case):
    dtype, D, D_v, features = STRIDE32_CASES[case]
    run_case(prog, dtype=dtype, D=D, D_v=D_v, seed=300 + case, constants={STRIDE32: True}, **features)


# With split keys (a split past a causal query block's keys visits none and
# loads no Q), under an array mask's visit lists (blocks out of order), and
# in decode with GQA packed as rows.
SPLIT_CASES = [
    (5, dict(L_q=70, L_k=300, causal=True)),
    (4, dict(L_q=33, L_k=300, B=2, mask="bool", mask_shape=(33, 300), sinks=True)),
    (3, dict(L_q=1, L_k=500, B=2, H_q=8, H_kv=2, packed=True)),
]


@pytest.mark.parametrize("case", range(len(SPLIT_CASES)))
@pytest.mark.parametrize("variant", [1, 5])
def test_variants_with_split_keys(prog, variant, case):
    dtype, suffix, bk = TILE_VARIANTS[variant]
    n_splits, features = SPLIT_CASES[case]
    run_split(prog, n_splits, dtype=dtype, D=128, suffix=suffix, bk=bk, constants={STRIDE32: True},
              seed=500 + 10 * variant + case, **features)


def test_variants_under_an_adversarial_schedule(prog):
    """Q's threadgroup rows are written before the first K/V barrier and
    only read after it: simdgroups far ahead of each other show a missing
    barrier."""
    for seed in (1, 2):
        run_case(prog, dtype="float16", D=128, suffix="_qs", bk=32, L_q=70, L_k=90, causal=True,
                 schedule=seed, seed=400 + seed, constants={STRIDE32: True})


def test_variant_race_check(prog):
    run_case(prog, dtype="bfloat16", D=128, suffix="_qs", bk=16, L_q=40, L_k=40, mask="bool",
             race_check=True, seed=410, constants={STRIDE32: True})


def test_stride32_is_declared_as_the_feature_table_says(prog):
    assert STRIDE32 in prog.constants
    assert STRIDE32 not in FC.values()


# ---------------------------------------------------------------------------
# The host's side: the variable and the instance it selects

PARSE = r"""
#include <cstdio>
#include <stdexcept>
#include "mlx_fused_attn/families/attention/metal/attention_variant.h"
#include "mlx_fused_attn/kernels/attention_kernel_name.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    try {
      const fa::MetalAttnVariant v = mlx_fused_attn::parse_metal_variant(argv[i]);
      const fa::DType dtypes[] = {fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};
      std::printf("ok %d %d %d", v.q_threadgroup, v.bk, v.stride32);
      for (fa::DType t : dtypes) {
        std::printf(" %s", fa::attention_kernel_name(t, 128, 128,
            fa::choose_attention_tiles(128, 128, t, fa::Backend::Metal, false, false, v)).c_str());
      }
      std::printf(" %s\n", fa::attention_kernel_name(fa::DType::Float16, 64, 64,
          fa::choose_attention_tiles(64, 64, fa::DType::Float16, fa::Backend::Metal, false, false, v)).c_str());
    } catch (const std::invalid_argument& e) {
      std::printf("error %s\n", e.what());
    }
  }
}
"""


@pytest.fixture(scope="module")
def parse(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("variant")
    (tmp / "parse.cpp").write_text(PARSE)
    exe = tmp / "parse"
    subprocess.run([emu.CXX, "-std=c++17", "-I", emu.REPO_ROOT, str(tmp / "parse.cpp"), "-o", str(exe)], check=True)

    def run(*texts):
        out = subprocess.run([str(exe), *texts], capture_output=True, text=True, check=True).stdout
        return [line.split(" ", 1) for line in out.splitlines()]

    return run


def test_parse_selects_instances_that_exist(prog, parse):
    """Every combination of words selects, for each dtype at D = 128, a
    kernel mlx_fused_attn/families/attention/attention.metal has: the variant's own in 16 bits, the
    default in float32 (no variant fits its threadgroup memory), and the
    default at D = 64."""
    texts = [
        f"{q},{bk},{st}"
        for q in ("", "q_registers", "q_threadgroup")
        for bk in ("", "bk16", "bk32")
        for st in ("", "stride64", "stride32")
    ]
    default = parse("")[0][1].split()[3:]
    for text, (kind, rest) in zip(texts, parse(*texts)):
        assert kind == "ok", (text, rest)
        q, bk, stride32, *names = rest.split()
        assert (q, bk, stride32) == (
            str(int("q_threadgroup" in text)),
            "32" if "bk32" in text else "16" if "bk16" in text else "0",
            str(int("stride32" in text)),
        ), text
        assert set(names) <= set(prog.kernels), (text, names)
        want = f"fa_attention_float16_d128_dv128_bq32_bk{32 if 'bk32' in text else 16}_wm4" + (
            "_qs" if "q_threadgroup" in text else "")
        assert names[0] == want, text
        assert names[2:] == default[2:], text  # float32 at 128, float16 at 64


@pytest.mark.parametrize(
    "text,word",
    [
        ("q_shared", "q_shared"),
        ("bk64", "bk64"),
        ("bk16,bk32", "bk32"),
        ("stride32, q_threadgroup,stride64", "stride64"),
        ("q_threadgroup;bk32", "q_threadgroup;bk32"),
    ],
)
def test_parse_rejects_with_the_accepted_words(parse, text, word):
    ((kind, message),) = parse(text)
    assert kind == "error"
    assert f'MLX_FUSED_ATTN_METAL_VARIANT="{text}"' in message
    assert f'"{word}"' in message
    assert "q_registers or q_threadgroup, bk16 or bk32, stride64 or stride32" in message


def test_parse_ignores_spaces_and_empty_words(parse):
    (a, b) = parse(" q_threadgroup , ,bk32,", "")
    assert a[0] == "ok" and a[1].split()[:3] == ["1", "32", "0"]
    assert b[0] == "ok" and b[1].split()[:3] == ["0", "0", "0"]
