"""Strict syntax pass over .metal files: clang -fsyntax-only against a shim in
which device, constant and threadgroup are distinct address spaces, so
passing a pointer of one where another is expected does not compile (the
emulator, where every pointer is plain, cannot see that).

    python tests/metal_emu/strict_check.py mlx_fused_attn/families/*/*.metal

exits 0 when every file passes, 1 (printing clang's diagnostics) otherwise,
2 when clang is missing. The check preprocesses with clang, writes the
Metal forms stock clang cannot read as it reads them (threadgroup variables
in function bodies, array parameters in an address space, vectors declared
by direct initialisation, methods qualified with an address space, half
literals), rewrites the address-space qualifiers into clang address-space
attributes in the kernel code (the same rewrite the emulator does, with
other spellings), drops the attributes stock clang rejects on explicit
instantiations (`template [[host_name("x")]] [[kernel]] ...`, which Metal's
clang accepts), and checks the result for an aarch64 target, where _Float16
exists.
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
# Metal's char (int8_t) is signed; aarch64's is not unless told.
TARGET = [
    "-std=c++17", "-target", "aarch64-linux-gnu", "-fsigned-char", "-ffreestanding",
    "-fno-exceptions",
]
DEFINES = [
    # Metal's compiler predefines __METAL__; MLX's defines.h puts its
    # program-scope constants in `constant` space only where it is defined.
    "-D__METAL__=1",
    "-D__METAL_VERSION__=310",
    "-D__HAVE_BFLOAT__=1",
    "-DFA_SHARED_ARRAY_DECL=static " + ADDRESS_SPACE_ATTRIBUTE["threadgroup"],
]
QUIET = ["-Wno-unknown-attributes", "-Wno-unknown-pragmas", "-Wno-ignored-attributes"]

_INSTANCE_ATTRIBUTES = re.compile(r"\btemplate\s*((?:\[\[.*?\]\]\s*)+)(?=[^\s<])")
# A threadgroup variable declared in a function body, `threadgroup T x[N];`
# (no pointer or reference declarator before the name; the bound may be on
# the next line).
_THREADGROUP_VARIABLE = re.compile(
    r"^(\s*)(threadgroup\s+(?:const\s+)?[A-Za-z_][\w:<>, ]*?\s+[A-Za-z_]\w*\s*"
    r"(?:\[[^;]*\]\s*;|;|$))"
)
# A parameter declared as an array in device, constant or threadgroup memory,
# `constant const int64_t strides[2]`. C++ adjusts it to a pointer to the
# element, as Metal does, but stock clang rejects the address space on the
# array before adjusting it (only OpenCL allows it), so it is written as
# the adjusted pointer, `constant const int64_t* strides` (one dimension;
# clang reports an array of arrays, which MLX does not declare).
_ARRAY_PARAMETER = re.compile(
    r"\b((?:device|constant|threadgroup)\b[^,();{}=\[\]]*?)\s*\b([A-Za-z_]\w*)\s*"
    r"\[(?!\[)[^\]]*\](?=\s*[,)])"
)
# A vector declared by direct initialisation in a function body,
# `short2 offset(x, y);`: the strict library's vectors are clang's, built by
# the function-like macro of their type name, which a declaration does not
# invoke (nor does the preprocessed unit), so it is written as the macro
# would, `short2 offset = make_vector<short2>(x, y);`. Only a statement
# alone on an indented line, whose parentheses hold several arguments (one
# converts natively) and no two names in a row (a parameter list: a
# function declaration), is read as one.
_VECTOR_DIRECT_INIT = re.compile(
    r"^(\s+(?:const\s+|constexpr\s+)*)((?:bool|char|uchar|short|ushort|int|uint|long|ulong"
    r"|half|bfloat|float)[234])\s+([A-Za-z_]\w*)\s*\((.*)\);\s*$"
)
_TWO_NAMES = re.compile(r"\b[A-Za-z_]\w*\s+[A-Za-z_]\w*\b")
_NESTED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]|<[^<>()]*>")
# Metal's half literal, `1.0h`, which stock clang cannot lex: written as the
# float literal converted to half, `((::metal::half)1.0f)` (string and
# character literals are left alone).
_HALF_LITERAL = re.compile(
    r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|(?<![\w.])'
    r"((?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)[hH]\b"
)
# A member function's qualifier for the address space of `this`, after its
# parameter list (and a `const`): `complex_t() threadgroup : ...`.
_THIS_QUALIFIER = re.compile(
    r"(\)\s*(?:const\s+)?)\b(device|constant|threadgroup)\b(?=\s*(?:[:{;]|$))"
)
# Stock clang has no address space for `this` outside OpenCL. A method
# qualified with `thread` (Metal's default) keeps its meaning with the
# qualifier gone; one qualified with another address space stays a distinct
# overload that no call can select (an enable_if that is false, distinct per
# address space), so its body is still checked, and code that needs it (an
# object constructed in threadgroup or constant memory) does not compile
# here, rather than silently calling the `thread` overload.
_THIS_ADDRESS_SPACE = {"device": 1, "constant": 2, "threadgroup": 3}


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


def _in_kernel_code(preprocessed, transform):
    """The preprocessed unit with transform applied to each line of kernel
    code (directives aside)."""
    return "\n".join(
        transform(line)
        if origin[0] == "code" and origin[3] and not line.lstrip().startswith("#")
        else line
        for line, origin in metal_source.line_origins(preprocessed, INTERNAL)
    ) + "\n"


def _top_level_comma(args):
    while True:
        flat = _NESTED.sub("_", args)
        if flat == args:
            return "," in flat
        args = flat


def _half_literal(m):
    return f"((::metal::half){m.group(1)}f)" if m.group(1) else m.group()


def _this_qualifier(m):
    space = m.group(2)
    condition = f"!{_THIS_ADDRESS_SPACE[space]}"
    return f'{m.group(1)}__attribute__((enable_if({condition}, "{space} this")))'


def _metal_forms(line):
    """One line of kernel code with what stock clang cannot read in Metal's
    own terms written as clang reads it: a threadgroup variable in a
    function body (shared by the threadgroup, so static, as the package's
    FA_SHARED_ARRAY_DECL arrays are), an array parameter in an address
    space, a vector declared by direct initialisation, the address space of
    `this`, and half literals."""
    line = _THREADGROUP_VARIABLE.sub(r"\1static \2", line)
    line = _ARRAY_PARAMETER.sub(r"\1* \2", line)
    m = _VECTOR_DIRECT_INIT.match(line)
    if m and _top_level_comma(m.group(4)) and not _TWO_NAMES.search(m.group(4)):
        make = f"::metal::strict::make_vector<::metal::{m.group(2)}>"
        line = f"{m.group(1)}{m.group(2)} {m.group(3)} = {make}({m.group(4)});"
    line = _THIS_QUALIFIER.sub(_this_qualifier, line)
    return _HALF_LITERAL.sub(_half_literal, line)


def strict_unit(preprocessed, spelling=ADDRESS_SPACE_ATTRIBUTE):
    """The preprocessed unit as stock clang can check it: the Metal forms
    it cannot read written as it reads them (_metal_forms), the
    address-space qualifiers of the kernel code written as
    spelling[qualifier], and the attributes stock clang rejects on explicit
    instantiations dropped."""
    unit = _in_kernel_code(preprocessed, _metal_forms)
    unit = metal_source.rewrite_address_spaces(unit, INTERNAL, spelling)
    return _drop_instance_attributes(unit)


def check(path, clang=None, include_dirs=()):
    """(passed, clang's diagnostics) for one .metal file; `include_dirs` are
    searched before the repository."""
    clang = clang or find_clang()
    ok, pre = preprocess(path, clang, include_dirs)
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
