#!/usr/bin/env python3
"""Flattens kernel sources into self-contained texts for the JIT.

Every `#include "..."` is replaced by the file it names (each file once, as
`#pragma once` would have it), searched in the include directories and then
beside the including file; `#include <...>` (the Metal standard library) is
kept. The result must be ASCII: MLX hands JIT source to Metal as an ASCII
string.

    flatten_source.py -I ROOT a.metal b.metal              # one flattened text
    flatten_source.py -I ROOT --instance KERNEL a.metal    # its one-kernel text
    flatten_source.py -I ROOT --list-instances a.metal     # its kernel names
    flatten_source.py -I ROOT --cpp out.cpp a.metal ...    # C++ embedding one
                                                           # text a family

With --cpp each argument is a kernel family, `NAME=PATH[,PATH...]` or a
PATH whose stem is the name, flattened on its own: the C++ defines
`const char* jit_source(const std::string& family)` (nullptr for an unknown
name), so that one family's compile error cannot take the others down.
The CUDA backend embeds its NVRTC sources the same way, naming its own
namespace and header (--namespace mlx_fused_attn::cuda --header ...).

With --cpp --instances (the Metal JIT) jit_source is the family's text
without its kernel instantiations, and `jit_instance(family, kernel)` hands
out the one instantiation that defines `kernel`: the JIT compiles a library
of that kernel alone (one_kernel_text), not the whole family, so a model's
first call pays for the kernels it runs. The instantiations are the lines
that invoke a macro whose definition holds `[[host_name(...)]]` (the .metal
files' instance lists, generated or written by hand); their kernel names
are that macro's host names with the arguments put in, so the list in the
.metal file is the only list.

Runs anywhere Python does (the tests flatten on Linux and compile the result
in the Metal emulator).
"""

import argparse
import pathlib
import re
import sys

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\(([^)]*)\)(.*)$", re.S)
# host_name( then adjacent string literals and #parameters, then ).
_HOST_NAME = re.compile(r'host_name\(((?:\s*(?:"[^"]*"|#\s*\w+))+)\s*\)')
_HOST_NAME_PART = re.compile(r'"([^"]*)"|#\s*(\w+)')
_INVOCATION = re.compile(r"^(\w+)\(([^()]*)\)\s*;?\s*$")
_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\b")
_DELIMITER = "FA_JIT_SOURCE"
_NAMESPACE = "mlx_fused_attn::metal"
_HEADER = "mlx_fused_attn/backend/metal/jit_source.h"


class FlattenError(Exception):
    pass


def _resolve(name, including_dir, include_dirs):
    for base in list(include_dirs) + [including_dir]:
        candidate = pathlib.Path(base) / name
        if candidate.is_file():
            return candidate.resolve()
    raise FlattenError(f'cannot find "{name}" (searched {include_dirs} and {including_dir})')


def flatten(sources, include_dirs):
    """Returns the flattened text of `sources` (paths), in order."""
    seen = set()
    lines = []

    def emit(path):
        path = pathlib.Path(path).resolve()
        if path in seen:
            return
        seen.add(path)
        raw = path.read_bytes()
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError as e:
            raise FlattenError(f"{path}: byte {e.start} is not ASCII") from None
        lines.append(f"// ---- {path.name}")
        for line in text.splitlines():
            m = _INCLUDE.match(line)
            if m:
                emit(_resolve(m.group(1), path.parent, include_dirs))
            elif not _PRAGMA_ONCE.match(line):
                lines.append(line)

    for source in sources:
        emit(source)
    return "\n".join(lines) + "\n"


def _logical_lines(text):
    """[(first physical line index, logical line)]: backslash continuations
    joined, as the preprocessor sees a #define."""
    out, pending, start = [], None, 0
    for i, line in enumerate(text.split("\n")):
        if pending is None:
            pending, start = "", i
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = None
    if pending is not None:
        out.append((start, pending))
    return out


def _host_names(params, body, args):
    """The kernel names a macro with `params` and `body` defines when
    invoked with `args`."""
    values = dict(zip(params, args))
    names = []
    for m in _HOST_NAME.finditer(body):
        parts = []
        for literal, param in _HOST_NAME_PART.findall(m.group(1)):
            if param and param not in values:
                raise FlattenError(f"host_name stringifies #{param}, which is not a macro parameter")
            parts.append(values[param] if param else literal)
        names.append("".join(parts))
    return names


def split_instances(text):
    """(`text` without its kernel instantiations, [(kernel names, line)]):
    each instantiation is one line invoking a macro whose definition names
    kernels with [[host_name(...)]], and defines those kernels."""
    macros = {}
    for _, logical in _logical_lines(text):
        m = _DEFINE.match(logical)
        if m and "host_name(" in m.group(3):
            params = [p.strip() for p in m.group(2).split(",")]
            macros[m.group(1)] = (params, m.group(3))
    # A #define's continuation lines are part of the macro, never an
    # instantiation, whatever they invoke.
    continued, previous = set(), ""
    for i, line in enumerate(text.split("\n")):
        if previous.endswith("\\"):
            continued.add(i)
        previous = line
    body, instances = [], []
    for i, line in enumerate(text.split("\n")):
        m = None if i in continued else _INVOCATION.match(line.strip())
        if m and m.group(1) in macros:
            params, definition = macros[m.group(1)]
            args = [a.strip() for a in m.group(2).split(",")]
            if len(args) != len(params):
                raise FlattenError(f"{line.strip()}: {m.group(1)} takes {len(params)} arguments")
            instances.append((_host_names(params, definition, args), line.strip()))
        else:
            body.append(line)
    body = "\n".join(body)
    # A kernel named outside an instantiating macro would be compiled into
    # every one-kernel library.
    for start, logical in _logical_lines(body):
        if "host_name(" in logical and not _DEFINE.match(logical):
            raise FlattenError(f"line {start + 1}: a host_name outside an instantiating #define")
    return body, instances


def one_kernel_text(body, line):
    """The text the JIT compiles for one instantiation `line` of a family
    whose text without instantiations is `body` (as the generated C++
    joins them)."""
    return body + line + "\n"


def instance_text(text, kernel):
    """The one-kernel text of `kernel` in a family's flattened `text`."""
    body, instances = split_instances(text)
    for names, line in instances:
        if kernel in names:
            return one_kernel_text(body, line)
    raise FlattenError(f"no instantiation defines the kernel {kernel!r}")


def parse_family(arg):
    """(name, [paths]) of a `NAME=PATH[,PATH...]` or `PATH` argument."""
    name, sep, paths = arg.partition("=")
    if not sep:
        return pathlib.Path(arg).stem, [pathlib.Path(arg)]
    if not name.isidentifier() or not paths:
        raise FlattenError(f"bad family argument {arg!r} (NAME=PATH[,PATH...])")
    return name, [pathlib.Path(p) for p in paths.split(",")]


def family_texts(args, include_dirs):
    """[(name, paths, text)] for `NAME=PATH[,PATH...]` or `PATH` arguments:
    each family flattened on its own, as the JIT compiles it."""
    families = []
    for arg in args:
        name, paths = parse_family(str(arg))
        families.append((name, paths, flatten(paths, include_dirs)))
    return families


def _instance_table(families):
    """C++ of jit_instance(family, kernel) over `families`' instantiations."""
    branches = []
    for name, _, text in families:
        for _, line in split_instances(text)[1]:
            if '"' in line or "\\" in line:
                raise FlattenError(f"{name}: {line} cannot be a C++ string literal as it is")
        rows = "".join(
            f'      {{"{kernel}", {{"{names[0]}", "{line}"}}}},\n'
            for names, line in split_instances(text)[1]
            for kernel in names
        )
        branches.append(
            f'  if (family == "{name}") {{\n'
            "    static const std::unordered_map<std::string, JitInstance> kernels = {\n"
            f"{rows}"
            "    };\n"
            "    auto it = kernels.find(kernel);\n"
            "    return it == kernels.end() ? nullptr : &it->second;\n"
            "  }\n"
        )
    return (
        "const JitInstance* jit_instance(\n"
        "    const std::string& family,\n"
        "    const std::string& kernel) {\n"
        + "".join(branches)
        + "  return nullptr;\n"
        "}\n\n"
    )


def embed_cpp(families, namespace=_NAMESPACE, header=_HEADER, instances=False):
    """C++ defining <namespace>::jit_source(family) over `families`, a list
    of (name, sources, text); with `instances`, jit_source holds each text
    without its instantiations and jit_instance hands them out."""
    branches = []
    for name, _, text in families:
        if instances:
            text = split_instances(text)[0]
        if f"){_DELIMITER}\"" in text:
            raise FlattenError(f"the {name} source contains the raw-string delimiter")
        branches.append(
            f'  if (family == "{name}") {{\n'
            f'    return R"{_DELIMITER}(\n{text}){_DELIMITER}";\n'
            "  }\n"
        )
    names = ", ".join(pathlib.Path(s).name for _, sources, _ in families for s in sources)
    return (
        f"// Generated by cmake/flatten_source.py from {names}. Do not edit.\n"
        f'#include "{header}"\n\n'
        + ("#include <unordered_map>\n\n" if instances else "")
        + f"namespace {namespace} {{\n\n"
        "const char* jit_source(const std::string& family) {\n"
        + "".join(branches)
        + "  return nullptr;\n"
        "}\n\n"
        + (_instance_table(families) if instances else "")
        + f"}} // namespace {namespace}\n"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", help="PATH, or NAME=PATH[,PATH...] with --cpp")
    parser.add_argument("-I", dest="include_dirs", action="append", default=[])
    parser.add_argument("--cpp", type=pathlib.Path, help="write C++ here")
    parser.add_argument("--namespace", default=_NAMESPACE, help="of jit_source()")
    parser.add_argument("--header", default=_HEADER, help="declaring jit_source()")
    parser.add_argument("--instances", action="store_true", help="with --cpp: also jit_instance()")
    parser.add_argument("--instance", metavar="KERNEL", help="print the one-kernel text of KERNEL")
    parser.add_argument("--list-instances", action="store_true", help="print the kernel names, one a line")
    args = parser.parse_args(argv)
    try:
        if args.cpp is None:
            text = flatten(args.sources, args.include_dirs)
            if args.list_instances:
                text = "".join(f"{n}\n" for names, _ in split_instances(text)[1] for n in names)
            elif args.instance is not None:
                text = instance_text(text, args.instance)
            sys.stdout.write(text)
            return 0
        families = family_texts(args.sources, args.include_dirs)
        cpp = embed_cpp(families, args.namespace, args.header, args.instances)
    except FlattenError as e:
        print(f"flatten_source.py: {e}", file=sys.stderr)
        return 1
    # Rewrite only on change, so that a rebuild does not recompile it.
    if not args.cpp.exists() or args.cpp.read_text() != cpp:
        args.cpp.parent.mkdir(parents=True, exist_ok=True)
        args.cpp.write_text(cpp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
