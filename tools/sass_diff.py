"""Compares the SASS of AOT kernel tables between a git revision and the
working tree, kernel by kernel: the check that a change of a kernel's
source (its arguments, say) leaves the machine code as it was, so that the
GPU timings taken before it still hold.

    python tools/sass_diff.py [--base main] [--arch sm_90a] [--param-offsets-free] TABLE.cu...

TABLE: an AOT table, mlx_fused_attn/families/<folder>/aot/<group>.cu. The
revision is unpacked with `git archive` into a temporary folder; each table
is compiled there and here as the AOT build compiles it (cmake/cuda.cmake:
C++17, -O3 -DNDEBUG -lineinfo) to a cubin, which nvdisasm prints. A kernel
is named by its template arguments, not its parameters, so that a kernel
whose parameter list changed is compared with its former self; the listing
is compared instruction for instruction (addresses included; the spacing of
nvdisasm's comments, its file-wide numbering of branch labels and the
kernel's own mangled name, which a RET's target spells out, not; with
--param-offsets-free, nor the parameters' constant-bank offsets). Prints each kernel that differs, with its
instructions and local-memory accesses (STL/LDL: spills) before and after;
exits 1 if any differs. Needs nvcc and nvdisasm (the `test-cuda` extra
installs NVIDIA's nvdisasm wheel).
"""

import argparse
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent

_FUNCTION = re.compile(r"^\s*//-+ \.text\.(\S+)", re.M)
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/")
_LOCAL = re.compile(r"\b(STL|LDL)(\.\S+)?\s")
_LABEL = re.compile(r"\.L_x_\d+")
_BANK0 = re.compile(r"c\[0x0\]\[(0x[0-9a-f]+)\]")
# kernel_tiles.h's AttnTilesOf<...>, its arguments up to the last's E.
_TILES = re.compile(r"(11AttnTilesOfI)((?:L[ib]\d+E)*L[ib]\d+)EE")
# Where sm_90's kernel parameters start in constant bank 0.
_FIRST_PARAM = 0x210


def kernel_key(mangled):
    """The mangled name up to the function's parameters: its namespace, name
    and template arguments (`...EEEv<parameters>`: the first `Ev` ends the
    template arguments of a void kernel), with a tiles type's trailing
    `false` arguments dropped: they are its defaults, so a field added to
    the tiles leaves the kernels without it named as before."""
    return _TILES.sub(_tiles_without_defaults, mangled.split("Ev", 1)[0])


def _tiles_without_defaults(m):
    args = m.group(2)
    while args.endswith("ELb0"):
        args = args[: -len("ELb0")]
    return m.group(1) + args + "EE"


def normalized(name, line, labels, param_offsets_free):
    """An instruction line as compared: its runs of blanks made one, the
    kernel's own name <self>, its labels numbered within the kernel (in
    `labels`, from their first use), and, if `param_offsets_free`, its
    parameters' constant-bank offsets one placeholder."""
    line = " ".join(line.split()).replace(name, "<self>")
    line = _LABEL.sub(lambda m: ".L%d" % labels.setdefault(m.group(0), len(labels)), line)
    if param_offsets_free:
        line = _BANK0.sub(
            lambda m: "c[0x0][param]" if int(m.group(1), 16) >= _FIRST_PARAM else m.group(0),
            line)
    return line


def functions(sass, param_offsets_free=False):
    """{kernel_key: [instruction lines]} of nvdisasm's listing, each line
    normalized."""
    parts = _FUNCTION.split(sass)
    out = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        labels = {}
        out[kernel_key(name)] = [
            normalized(name, line, labels, param_offsets_free)
            for line in body.splitlines() if _INSTRUCTION.search(line)
        ]
    return out


def local_accesses(body):
    return sum(1 for line in body if _LOCAL.search(line))


def compare(before, after):
    """The lines that tell how `after` ({kernel: body}) differs from
    `before`: one a kernel that differs or is in one of them only."""
    lines = []
    for key in sorted(set(before) | set(after)):
        if key not in after or key not in before:
            lines.append(f"only {'before' if key in before else 'after'}: {key}")
        elif before[key] != after[key]:
            b, a = before[key], after[key]
            lines.append(
                f"differs: {key}: {len(b)} -> {len(a)} instructions, "
                f"{local_accesses(b)} -> {local_accesses(a)} local accesses")
    return lines


def find_tool(name):
    nvcc = shutil.which("nvcc")
    candidates = [shutil.which(name)]
    if nvcc:
        candidates.append(os.path.join(os.path.dirname(os.path.realpath(nvcc)), name))
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates.append(os.path.join(root, "cu13", "bin", name))
    found = next((c for c in candidates if c and os.path.exists(c)), None)
    if found is None:
        sys.exit(f"sass_diff: {name} not found")
    return found


def sass_of(root, table, arch, out_dir):
    """nvdisasm's listing of `table` compiled in the tree at `root`."""
    cubin = pathlib.Path(out_dir) / (pathlib.Path(table).stem + ".cubin")
    subprocess.run(
        [find_tool("nvcc"), "-std=c++17", "-O3", "-DNDEBUG", "-lineinfo", f"-I{root}",
         f"-arch={arch}", "-cubin", str(pathlib.Path(root) / table), "-o", str(cubin)],
        check=True, cwd=root)
    return subprocess.run([find_tool("nvdisasm"), "-c", str(cubin)], check=True,
                          capture_output=True, text=True).stdout


def unpack(rev, into):
    """The tree of git revision `rev`, written under `into`."""
    os.makedirs(into)
    archive = subprocess.run(["git", "archive", rev], check=True, capture_output=True, cwd=REPO)
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)
    return into


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", nargs="+", help="AOT tables, paths in the repository")
    parser.add_argument("--base", default="main", help="the git revision to compare with")
    parser.add_argument("--arch", default="sm_90a", help="nvcc's -arch (a real architecture)")
    parser.add_argument("--param-offsets-free", action="store_true",
                        help="a parameter read at another constant-bank offset is no difference")
    args = parser.parse_args()
    differ = False
    with tempfile.TemporaryDirectory() as tmp:
        base = unpack(args.base, os.path.join(tmp, "base"))
        for table in args.tables:
            outs = [os.path.join(tmp, side) for side in ("before", "after")]
            for out in outs:
                os.makedirs(out, exist_ok=True)
            before = functions(sass_of(base, table, args.arch, outs[0]), args.param_offsets_free)
            after = functions(sass_of(REPO, table, args.arch, outs[1]), args.param_offsets_free)
            lines = compare(before, after)
            same = len(set(before) & set(after)) - sum(line.startswith("differs") for line in lines)
            print(f"{table}: {same} of {len(set(before) | set(after))} kernels identical")
            for line in lines:
                print("  " + line)
            differ = differ or bool(lines)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
