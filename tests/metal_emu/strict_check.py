"""Strict syntax pass over .metal files: clang -fsyntax-only against a shim in
which device, constant and threadgroup are distinct address spaces, so
passing a pointer of one where another is expected does not compile (the
emulator, where every pointer is plain, cannot see that).

    python tests/metal_emu/strict_check.py metal/attention.metal ...

exits 0 when every file passes, 1 (printing clang's diagnostics) otherwise,
2 when clang is missing. The check preprocesses with clang, rewrites the
address-space qualifiers into clang address-space attributes in the kernel
code (the same rewrite the emulator does, with other spellings), drops the
attributes stock clang rejects on explicit instantiations
(`template [[host_name("x")]] [[kernel]] ...`, which Metal's clang accepts),
and checks the result for an aarch64 target, where _Float16 exists.
See README.md for what the pass does and does not catch.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

if __package__:
    from . import metal_source
else:  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import metal_source

EMU_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(EMU_DIR))
STRICT_INCLUDE = os.path.join(EMU_DIR, "strict", "include")
SHIM_INCLUDE = os.path.join(EMU_DIR, "include")
CLANG_NAMES = ("clang++", "clang++-14", "clang++-15", "clang++-16")

ADDRESS_SPACE_ATTRIBUTE = {
    "device": "__attribute__((address_space(1)))",
    "constant": "__attribute__((address_space(2)))",
    "threadgroup": "__attribute__((address_space(3)))",
    "threadgroup_imageblock": "__attribute__((address_space(3)))",
    # Metal's default address space for pointers and references.
    "thread": "",
}
TARGET = ["-std=c++17", "-target", "aarch64-linux-gnu", "-ffreestanding", "-fno-exceptions"]
DEFINES = [
    "-D__METAL_VERSION__=310",
    "-D__HAVE_BFLOAT__=1",
    "-DFA_SHARED_ARRAY_DECL=static " + ADDRESS_SPACE_ATTRIBUTE["threadgroup"],
]
QUIET = ["-Wno-unknown-attributes", "-Wno-unknown-pragmas", "-Wno-ignored-attributes"]

_INSTANCE_ATTRIBUTES = re.compile(r"\btemplate\s*((?:\[\[.*?\]\]\s*)+)(?=[^\s<])")


def find_clang():
    """The clang++ to use: $FA_EMU_CLANG, or the first on PATH; None if none."""
    if os.environ.get("FA_EMU_CLANG"):
        return os.environ["FA_EMU_CLANG"]
    for name in CLANG_NAMES:
        if shutil.which(name):
            return shutil.which(name)
    return None


def _drop_instance_attributes(text):
    return _INSTANCE_ATTRIBUTES.sub(lambda m: "template" + " " * len(m.group(1)), text)


# Path prefixes of what is not kernel code: the strict library and the shim.
INTERNAL = [STRICT_INCLUDE + os.sep, SHIM_INCLUDE + os.sep]


def preprocess(path, clang, include_dirs=()):
    """(ok, clang -E output or clang's diagnostics) for one .metal file against
    the strict library; `include_dirs` are searched before the repository."""
    path = os.path.abspath(path)
    includes = ["-I", STRICT_INCLUDE, "-I", SHIM_INCLUDE]
    for d in include_dirs:
        includes += ["-I", d]
    includes += ["-I", REPO_ROOT, "-I", os.path.dirname(path)]
    pre = subprocess.run(
        [clang, "-E", *TARGET, *DEFINES, *includes, "-x", "c++", path],
        capture_output=True,
        text=True,
    )
    return pre.returncode == 0, pre.stdout if pre.returncode == 0 else pre.stderr


def strict_unit(preprocessed, spelling=ADDRESS_SPACE_ATTRIBUTE):
    """The preprocessed unit as stock clang can check it: the address-space
    qualifiers of the kernel code written as spelling[qualifier], the
    attributes stock clang rejects on explicit instantiations dropped."""
    unit = metal_source.rewrite_address_spaces(preprocessed, INTERNAL, spelling)
    return _drop_instance_attributes(unit)


def check(path, clang=None):
    """(passed, clang's diagnostics) for one .metal file."""
    clang = clang or find_clang()
    ok, pre = preprocess(path, clang)
    if not ok:
        return False, pre
    with tempfile.TemporaryDirectory(prefix="fa_strict_") as tmp:
        ii = os.path.join(tmp, os.path.basename(path) + ".ii")
        with open(ii, "w") as fh:
            fh.write(strict_unit(pre))
        proc = subprocess.run(
            [clang, "-fsyntax-only", *TARGET, *QUIET, "-ferror-limit=50",
             "-x", "c++-cpp-output", ii],
            capture_output=True,
            text=True,
        )
    return proc.returncode == 0, proc.stderr


def main(argv):
    clang = find_clang()
    if clang is None:
        print("strict_check: no clang++ found (apt-get install clang)", file=sys.stderr)
        return 2
    failed = 0
    for path in argv:
        ok, diagnostics = check(path, clang)
        print(f"{'ok  ' if ok else 'FAIL'} {path}")
        if diagnostics:
            print(diagnostics, end="")
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
