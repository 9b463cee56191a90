"""The CUDA kernels compile, on a machine without a GPU, one family at a time
(attention, attention_backward, short_attention, neighborhood,
strided_copy, quantized_attention).

- The AOT tables (mlx_fused_attn/families/*/aot/*.cu, written by
  tools/gen_instances.py) build with nvcc for sm_90a (Hopper with its
  warpgroup products), and one table of each body for sm_80, the AOT
  targets: every table but the head dims left out below (each builds up
  to 36 kernels). They hold exactly the kernels the host can
  name.
- The JIT source is what NVRTC will see: the family's kernel headers
  flattened by cmake/flatten_source.py, as cmake/cuda.cmake embeds them,
  self-contained. It builds with nvcc to PTX as a standalone translation
  unit (ptxas runs on the same kernels in the AOT builds, and on the JIT
  source through NVRTC below),
  instantiating kernels by the exact expressions the host code hands to
  NVRTC (the family records of families/*/cuda/*_kernel_key.h, printed by a small host
  program); and, where libnvrtc is installed (pip's nvidia-cuda-nvrtc),
  with NVRTC itself under the options the library uses.
- The PTX kernels through which MLX allocates the outputs, the no-op one
  (backend/cuda/no_op_kernel_ptx.h) and the one that zeroes split keys'
  counters (zero_words_kernel_ptx.h), assemble with ptxas for both
  targets, each entry named as the host names it.

Skips with the reason when nvcc is absent.
"""

import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAMILIES_DIR = os.path.join(REPO, "mlx_fused_attn", "families")
ARCHS = ["80", "90a"]
# The families with a CUDA source of their own (families/registry.h).
sys.path.insert(0, os.path.join(REPO, "tools"))
from family_registry import cuda_entry_points, families  # noqa: E402

FAMILIES = [f.name for f in families() if f.cuda_source]
# Every family's CUDA kernel records.
KEY_HEADERS = sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(FAMILIES_DIR, "*", "cuda", "*_kernel_key.h"))
)
# Attention head dims whose AOT table is not built here, to save time: the
# ones left are the smallest, 128 (Q in shared memory on Hopper's large
# grids), 72 (padded to whole k16 steps), 256 (the most registers) and
# 192 with 128 (v narrower than q); of the backward's, 64 (the common one)
# and 128 (the most registers). The JIT test below compiles a spread of
# every family.
AOT_SKIPPED = {
    "attention_d64_dv64",
    "attention_d80_dv80",
    "attention_d96_dv96",
    "attention_d192_dv192",
    "attention_backward_d32",
    "attention_backward_d96",
    "quantized_attention_d96",
    "quantized_attention_d192",
}
# Tables built for sm_80 too; the others instantiate the same bodies at
# other head dims, and their sm_90a build holds their mma.sync kernels.
SM80_TABLES = {
    "attention_d128_dv128",
    "attention_backward_d128",
    "attention_backward_row_dot",
    "attention_split_combine",
    "short_attention_d64",
    "neighborhood_1d",
    "neighborhood_2d",
    "neighborhood_3d",
    "strided_copy",
    "quantized_attention_d128",
    "quantized_attention_split_combine",
}
N_HEAD_DIMS = 9  # FA_ATTENTION_HEAD_DIMS


def find_nvcc():
    for candidate in [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]:
        if candidate and os.path.exists(candidate):
            return candidate
    return None


NVCC = find_nvcc()
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found (no CUDA toolkit)")


def nvcc(*args, cwd=None):
    cmd = [NVCC, "-std=c++17", "-O3", f"-I{REPO}", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}\n{r.stderr}"
    return r


def nvcc_output(tmp_path, source, kind, arch):
    """`source` (a .cu file's text) compiled to `kind` ("ptx", "cubin") for
    `arch` ("compute_90a", "sm_90a"): the output's path. Skips without nvcc."""
    if NVCC is None:
        pytest.skip("nvcc not found")
    src = tmp_path / "kernels.cu"
    src.write_text(source)
    out = tmp_path / f"kernels.{kind}"
    nvcc(f"-arch={arch}", f"-{kind}", str(src), "-o", str(out))
    return out


def gencode(archs):
    return [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]


def aot_paths():
    """{group: its AOT table}, every family folder's aot/*.cu."""
    paths = sorted(glob.glob(os.path.join(FAMILIES_DIR, "*", "aot", "*.cu")))
    return {os.path.basename(p)[: -len(".cu")]: p for p in paths}


def aot_tables():
    """{group: [expression]} of every AOT table."""
    tables = {}
    for group, path in aot_paths().items():
        with open(path) as fh:
            tables[group] = re.findall(r"^\s*FA_AOT_KERNEL\((.*)\),$", fh.read(), re.M)
    return tables


@pytest.mark.parametrize("group", sorted(set(aot_tables()) - AOT_SKIPPED))
def test_aot_table_builds(tmp_path, group):
    archs = ARCHS if group in SM80_TABLES else ["90a"]
    nvcc(*gencode(archs), "--threads=2", "-c", aot_paths()[group],
         "-o", str(tmp_path / f"{group}.o"))


def test_sm80_tables_exist():
    assert SM80_TABLES <= set(aot_tables()) - AOT_SKIPPED


# Per family, the body of a host program that prints every expression the
# host can hand to NVRTC, through the family's record with the tiles its
# plans take from the family's chooser.
HOST_KEYS = {
    # Every head dim pair, plain, causal and array mask, with and without
    # warpgroup products, for grids of one wave and past it, each tile
    # choice in both forms: the producer kernel's static and persistent
    # grids, the other kernel without and with the merge of split keys; the
    # small-grid producer tiles (opt-in) on both grids where the head dims
    # have them; the combine of split keys in each form.
    "attention": """
  for (fa::DType t : types) {
#define FA_PRINT(d, dv) \\
    for (int v = 0; v < 24; ++v) { \\
      fa::AttnTiles tiles = fa::choose_attention_tiles(d, dv, t, fa::Backend::Cuda, v % 6 >= 3, v % 12 >= 6); \\
      tiles.persistent = v >= 12 && tiles.producer; \\
      tiles.split_merge = v >= 12 && !tiles.producer; \\
      print(AttentionKernelKey{t, d, dv, tiles, v % 3 == 1, v % 3 == 2}); \\
    } \\
    for (int v = 0; v < 6 && fa::has_small_grid_tiles(d, dv, t, fa::Backend::Cuda, true); ++v) { \\
      fa::AttnTiles tiles = fa::choose_small_grid_tiles(d); \\
      tiles.persistent = v >= 3; \\
      print(AttentionKernelKey{t, d, dv, tiles, v % 3 == 1, v % 3 == 2}); \\
    }
    FA_ATTENTION_HEAD_DIMS(FA_PRINT)
  }
  for (fa::DType t : types)
    for (fa::SplitCombineForm f : {fa::SplitCombineForm::OneElement, fa::SplitCombineForm::Grouped,
                                    fa::SplitCombineForm::RowThreadgroup})
      print(SplitCombineKernelKey{t, f});""",
    # Both kernels of every head dim, plain, causal and array mask, with
    # and without warpgroup products, dK/dV in both forms; D and the
    # one-kernel form's dQ conversion.
    "attention_backward": """
  for (fa::DType t : types) {
    print(AttentionBackwardRowDotKey{t});
    print(AttentionBackwardDqConvertKey{t});
#define FA_PRINT(d) \\
    for (int v = 0; v < 18; ++v) { \\
      const fa::BwdKernel k = v % 9 < 3 || v % 9 >= 6 ? fa::BwdKernel::DkDv : fa::BwdKernel::Dq; \\
      print(AttentionBackwardKernelKey{k, t, d, \\
          fa::choose_attention_backward_tiles(d, t, fa::Backend::Cuda, v >= 9).of(k), \\
          v % 3 == 1, v % 3 == 2, v % 9 >= 6}); \\
    }
    FA_ATTENTION_BACKWARD_HEAD_DIMS(FA_PRINT)
  }""",
    # Whatever short_attention_covers sends to the short kernel, at each
    # capacity's own length.
    "short_attention": """
  for (fa::DType t : types)
    for (int d = 1; d <= 256; ++d)
      for (int l = 1; l <= 64; ++l)
        if (fa::short_attention_covers(l, l, d, d, t, fa::Backend::Cuda) && fa::short_attention_seq(l, l) == l)
          print(ShortAttentionKernelKey{t, d, fa::choose_short_attention_tiles(d, t, fa::Backend::Cuda, l)});""",
    "neighborhood": """
  for (fa::DType t : types) {
#define FA_PRINT_D(d) for (int n = 1; n <= 3; ++n) \
    print(NaKernelKey{t, d, n, fa::choose_na_tiles(d, t, fa::Backend::Cuda, n)});
    FA_NA_HEAD_DIMS(FA_PRINT_D)
  }""",
    "strided_copy": """
  for (fa::DType t : types) print(StridedCopyKernelKey{t});
  print(PoisonKernelKey{});""",
    # Every head dim and bits, plain, causal and array mask: the default
    # tiles, and at 4 bits the decode and key-slice tiles where there are,
    # each with the float chunks and the chosen packed policy where one
    # applies; the combine in each form.
    "quantized_attention": """
  for (fa::DType t : types) {
#define FA_PRINT_BITS(b) \
    for (int tv = 0; tv < 3; ++tv) { \
      if (tv > 0 && !(b == 4 && fa::has_quantized_decode_tiles(d, t, fa::Backend::Cuda))) continue; \
      const fa::AttnTiles tiles = tv == 1 ? fa::choose_quantized_decode_tiles() \
          : tv == 2 ? fa::choose_quantized_sliced_tiles() \
          : fa::choose_quantized_attention_tiles(d, t, fa::Backend::Cuda); \
      const fa::QuantizedChunks chosen = fa::choose_quantized_chunks(tiles, d, b, t, false); \
      for (int v = 0; v < 6; ++v) { \
        if (v >= 3 && chosen == fa::QuantizedChunks::Float) continue; \
        print(QuantizedAttentionKernelKey{t, d, b, tiles, v % 3 == 1, v % 3 == 2, \
            v >= 3 ? chosen : fa::QuantizedChunks::Float}); \
      } \
    }
#define FA_PRINT_D(dd) { const int d = dd; FA_QUANTIZED_ATTENTION_BITS(FA_PRINT_BITS) }
    FA_QUANTIZED_ATTENTION_HEAD_DIMS(FA_PRINT_D)
  }
  for (fa::DType t : types)
    for (fa::SplitCombineForm f : {fa::SplitCombineForm::OneElement, fa::SplitCombineForm::Grouped,
                                    fa::SplitCombineForm::RowThreadgroup})
      print(QuantizedSplitCombineKernelKey{t, f});""",
}


def host_expressions(tmp_path, family):
    """Every expression the host hands to NVRTC for `family`, in order."""
    program = tmp_path / f"{family}_names.cpp"
    program.write_text(
        "#include <cstdio>\n"
        + "".join(f'#include "{h}"\n' for h in KEY_HEADERS)
        + "using namespace mlx_fused_attn::cuda;\n"
        "template <typename Key> void print(const Key& key) {\n"
        '  std::printf("%s\\n", key.expression().c_str());\n'
        "}\n"
        "int main() {\n"
        "  const fa::DType types[] = {fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};\n"
        f"{HOST_KEYS[family]}\n"
        "}\n"
    )
    exe = tmp_path / f"{family}_names"
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    subprocess.run([cxx, "-std=c++17", f"-I{REPO}", str(program), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()


def expected_count(family):
    short_dims = listed("short_attention_config.h", "FA_SHORT_ATTENTION_HEAD_DIMS")
    short_seqs = listed("short_attention_config.h", "FA_SHORT_ATTENTION_SEQS")
    na = len(listed("na_config.h", "FA_NA_HEAD_DIMS")) * len(listed("na_config.h", "FA_NA_AXES"))
    quantized_dims = listed("quantized_attention_config.h", "FA_QUANTIZED_ATTENTION_HEAD_DIMS")
    quantized_bits = listed("quantized_attention_config.h", "FA_QUANTIZED_ATTENTION_BITS")
    return {
        # Each tile choice in two forms (HOST_KEYS); the small-grid
        # producer tiles, static and persistent: D = 64 and 128 in fp16 and
        # bf16; the combine in its three forms a type.
        "attention": 3 * N_HEAD_DIMS * 12 * 2 + 2 * 2 * 6 + 3 * 3,
        # Per type: the row dot, the dQ conversion, and per head dim 18
        # (two tile choices x three variants x dK/dV two-kernel, dK/dV
        # one-kernel and dQ).
        "attention_backward": 3 * (2 + 18 * len(listed("attention_backward_config.h", "FA_ATTENTION_BACKWARD_HEAD_DIMS"))),
        "short_attention": 3 * len(short_dims) * len(short_seqs),
        "neighborhood": 3 * na,
        "strided_copy": 3 + 1,
        # Per dtype, head dim and bits three variants of the default tiles'
        # float chunks; at 4 bits in fp16 and bf16 three of their packed
        # policy, and to D = 128 six each of the decode and the key-slice
        # tiles (float and packed); the combine in its three forms a type.
        "quantized_attention": 3 * 3 * len(quantized_dims) * len(quantized_bits)
        + 2 * 3 * len(quantized_dims) + 2 * 2 * 6 * len([d for d in quantized_dims if d <= 128])
        + 3 * 3,
    }[family]


def listed(config, macro):
    """The numbers of an X-macro list in the family folder's `config`
    (its definition may go on over backslash-continued lines)."""
    (path,) = glob.glob(os.path.join(FAMILIES_DIR, "*", config))
    with open(path) as fh:
        line = re.search(rf"^#define {macro}\(X\)((?:.*\\\n)*.*)$", fh.read(), re.M).group(1)
    return [int(x) for x in re.findall(r"X\((\d+)\)", line)]


def family_of(group):
    """The family of an AOT group: the folder its table is in."""
    return os.path.basename(os.path.dirname(os.path.dirname(aot_paths()[group])))


@pytest.mark.parametrize("family", FAMILIES)
def test_aot_tables_hold_exactly_the_host_kernels(tmp_path, family):
    exprs = host_expressions(tmp_path, family)
    assert len(exprs) == expected_count(family), exprs
    tabled = [e for group, entries in aot_tables().items() if family_of(group) == family for e in entries]
    assert len(tabled) == len(set(tabled))
    assert set(tabled) == set(exprs)


def jit_text(family):
    """`family`'s text as cmake/cuda.cmake embeds it (the NAME=PATH,...
    argument of flatten_source.py it makes of the folder's *_kernel.cuh),
    for NVRTC."""
    arg = f"{family}=" + ",".join(str(p) for p in cuda_entry_points(family))
    sys.path.insert(0, os.path.join(REPO, "cmake"))
    try:
        import flatten_source
    finally:
        sys.path.pop(0)
    ((_, _, text),) = flatten_source.family_texts([arg], [REPO])
    assert text.isascii()
    return text


# The host's expressions compiled against the JIT text: every one, or a
# spread (every dtype, head dim and variant appears) where there are many.
PROBE_STRIDE = {"attention": 7, "attention_backward": 5, "short_attention": 5, "neighborhood": 1, "strided_copy": 1,
                "quantized_attention": 7}


@pytest.mark.parametrize("family", FAMILIES)
def test_jit_source_instantiates_the_host_kernels(tmp_path, family):
    exprs = host_expressions(tmp_path, family)[:: PROBE_STRIDE[family]]
    probes = "".join(
        f"const void* fa_probe_{i} = reinterpret_cast<const void*>(&{e});\n" for i, e in enumerate(exprs)
    )
    unit = tmp_path / "jit_unit.cu"
    unit.write_text(jit_text(family) + probes)
    nvcc("-arch=compute_90a", "-ptx", str(unit), "-o", str(tmp_path / "jit_unit.ptx"))


def load_nvrtc():
    """libnvrtc from pip's nvidia-cuda-nvrtc, or the system; None if absent."""
    dirs = []
    try:
        import nvidia  # namespace package of NVIDIA's wheels

        for base in nvidia.__path__:
            dirs += [os.path.join(base, "cu13", "lib"), os.path.join(base, "cuda_nvrtc", "lib")]
    except ImportError:
        pass
    for d in dirs:
        libs = sorted(glob.glob(os.path.join(d, "libnvrtc.so.*")))
        builtins = sorted(glob.glob(os.path.join(d, "libnvrtc-builtins.so.*")))
        if libs and builtins:
            # NVRTC opens its builtins by name: load them first.
            ctypes.CDLL(builtins[0], mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(libs[0], mode=ctypes.RTLD_GLOBAL)
    try:
        return ctypes.CDLL("libnvrtc.so", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None


def cuda_include_dir():
    """Where cuda_bf16.h is, searched as nvrtc_compiler.cpp searches."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
             os.path.dirname(os.path.dirname(os.path.realpath(NVCC))), "/usr/local/cuda"]
    for root in filter(None, roots):
        if os.path.exists(os.path.join(root, "include", "cuda_bf16.h")):
            return os.path.join(root, "include")
    pytest.skip("no CUDA headers (cuda_bf16.h) found for NVRTC")


def nvrtc_attention(names):
    """A causal bf16 kernel with each kind of product (mma.sync; wgmma with
    Q in registers at D = 64; wgmma with Q in shared memory at D = 128 for
    a grid of one wave, and past it the producer warpgroup's kernel: TMA,
    mbarriers, setmaxnreg; on a static and a persistent grid; and its
    small-grid tiles, one math warpgroup), and the one of Q in shared memory
    that merges split keys; the head dims past 128 and the padded 72, with
    warpgroup products (causal; a mask) and fp32's 3xTF32 mma.sync; the
    bf16 combine of split keys in its three forms."""
    d128 = [e for e in names if e.startswith("fa::attention_kernel<fa::bfloat_t, 128,")]
    d64 = [e for e in names if e.startswith("fa::attention_kernel<fa::bfloat_t, 64,")]
    producer = [e for e in names if e.startswith("fa::attention_producer_kernel<fa::bfloat_t, 128,")]
    assert ", false, false, false, false>, true, false>" in d128[1], d128[1]
    assert ", true, false, false, false>, true, false>" in d64[4], d64[4]
    assert ", true, true, false, false>, true, false>" in d128[4], d128
    assert ", true, true, true, false>, true, false>" in producer[1], producer
    assert ", true, true, true, true>, true, false>" in producer[4], producer
    assert "AttnTilesOf<64, 64, 4, 3, 2, true, true, true, false>, true, false>" in producer[7], producer
    assert ", true, true, false, false, true>, true, false>" in d128[13], d128
    exprs = [d128[1], d64[4], d128[4], producer[1], producer[4], producer[7], d128[13]]
    for prefix, variants in [
        ("fa::half_t, 72, 72,", [4]),
        ("fa::bfloat_t, 192, 128,", [4, 2]),
        ("fa::half_t, 192, 192,", [4]),
        ("fa::bfloat_t, 256, 256,", [4]),
        ("float, 256, 256,", [1]),
    ]:
        found = [e for e in names if e.startswith(f"fa::attention_kernel<{prefix}")]
        assert len(found) == 24, (prefix, found)
        exprs += [found[i] for i in variants]
    combine = [e for e in names if e.startswith("fa::split_combine_kernel<fa::bfloat_t,")]
    assert len(combine) == 3, combine
    return exprs + combine


NVRTC_PICKS = {
    "attention": nvrtc_attention,
    # The row dot, and both kernels at bf16 D = 128 (causal) and fp32 D = 96
    # (an array mask; 3xTF32).
    "attention_backward": lambda names: [
        e
        for e in names
        if e.startswith("fa::attention_bwd_row_dot_kernel<4, fa::bfloat_t>")
        or (e.startswith("fa::attention_bwd_") and ", 128, " in e and "fa::bfloat_t" in e and e.endswith("true, false>"))
        or (e.startswith("fa::attention_bwd_") and "<float, 96, " in e and e.endswith("false, true>"))
    ],
    "short_attention": lambda names: [
        [e for e in names if e.startswith("fa::short_attention_kernel<fa::bfloat_t, 64, fa::ShortTilesOf<32,")][0]
    ],
    "neighborhood": lambda names: [
        [e for e in names if e.startswith("fa::na_attention_kernel<fa::half_t, 64,")][1]
    ],
    "strided_copy": lambda names: [names[1], names[-1]],
    # bf16 4 bits at D = 128, causal (Q in registers), each tile and chunk
    # policy; fp16 8 bits at D = 256 with an array mask (Q in shared
    # memory); fp32; the bf16 combine in its three forms.
    "quantized_attention": lambda names: [
        e
        for e in names
        if e.startswith("fa::quantized_attention_kernel<fa::bfloat_t, 128, 4,")
        and (e.endswith("true, false>") or ", true, false, true, fa::" in e)
        or e.startswith("fa::quantized_attention_kernel<fa::half_t, 256, 8,") and e.endswith("false, true>")
        or e.startswith("fa::quantized_attention_kernel<float, 64, 8,") and e.endswith("false, false>")
        or e.startswith("fa::quantized_split_combine_kernel<fa::bfloat_t,")
    ],
}


@pytest.mark.parametrize("family", FAMILIES)
def test_nvrtc_compiles_the_jit_source(tmp_path, family):
    nvrtc = load_nvrtc()
    if nvrtc is None:
        pytest.skip("libnvrtc not installed (pip install '.[test-cuda]')")
    source = jit_text(family).encode()
    # The options of nvrtc_compiler.cpp on Hopper.
    options = [b"--gpu-architecture=sm_90a", b"--include-path=" + cuda_include_dir().encode(),
               b"--std=c++17", b"-default-device", b"-DNDEBUG"]
    for expr in NVRTC_PICKS[family](host_expressions(tmp_path, family)):
        prog = ctypes.c_void_p()
        assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, b"jit.cu", 0, None, None) == 0
        assert nvrtc.nvrtcAddNameExpression(prog, expr.encode()) == 0
        opts = (ctypes.c_char_p * len(options))(*options)
        result = nvrtc.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        assert result == 0, f"{expr}:\n{log.value.decode()}"
        lowered = ctypes.c_char_p()
        assert nvrtc.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(lowered)) == 0
        name = re.match(r"fa::(\w+)", expr).group(1)
        assert lowered.value.startswith(f"_ZN2fa{len(name)}{name}".encode()), lowered.value
        nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        assert size.value > 0
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))


# The PTX kernels launched through MLX's CustomKernel to make memory
# (backend/cuda/device_buffer.cpp): header, entry name, PTX text.
PTX_KERNELS = [
    ("no_op_kernel_ptx.h", "kNoOpKernelName", "kNoOpKernelPtx"),
    ("zero_words_kernel_ptx.h", "kZeroWordsKernelName", "kZeroWordsKernelPtx"),
]


@pytest.mark.parametrize("header,name,text", PTX_KERNELS, ids=[k[0] for k in PTX_KERNELS])
def test_memory_kernel_ptx_assembles(tmp_path, header, name, text):
    ptxas = os.path.join(os.path.dirname(NVCC), "ptxas")
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None or not os.path.exists(ptxas):
        pytest.skip("no C++ compiler or ptxas")
    main = tmp_path / "print_ptx.cpp"
    main.write_text(
        f'#include <cstdio>\n#include "mlx_fused_attn/backend/cuda/{header}"\n'
        f"int main() {{ std::printf(\"%s\\n%s\", mlx_fused_attn::cuda::{name},"
        f" mlx_fused_attn::cuda::{text}); }}\n")
    exe = tmp_path / "print_ptx"
    subprocess.run([cxx, "-std=c++17", f"-I{REPO}", str(main), "-o", str(exe)], check=True)
    name, ptx = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n", 1)
    assert re.findall(r"\.entry\s+(\w+)", ptx) == [name]
    (tmp_path / "kernel.ptx").write_text(ptx)
    for arch in ["sm_80", "sm_90a"]:
        r = subprocess.run([ptxas, f"-arch={arch}", str(tmp_path / "kernel.ptx"), "-o", str(tmp_path / f"{arch}.cubin")],
                           capture_output=True, text=True)
        assert r.returncode == 0, f"{arch}: {r.stderr}"
