"""Generates the trampoline that exposes a .metal file's kernels to the
emulator's driver by host name.

C++ cannot introspect attributes, so this reads them from the preprocessed
source: every `[[kernel]]` function definition (its parameters and their
`[[buffer(n)]]`, `[[threadgroup(n)]]`, `[[function_constant(c)]]` and builtin
attributes; a buffer without `[[buffer(n)]]` gets the index Metal assigns),
every explicit instantiation
`template [[host_name("name")]] [[kernel]] decltype(fn<...>) fn<...>;`, every
`[[function_constant(n)]]` declaration, and the program-scope variables
initialised from function constants (re-evaluated once the constants are set).
It emits the tables the runtime reads (runtime/kernel_table.h), appended to
the preprocessed source. The wrapper puts the .metal source inside an
unnamed namespace; README.md says why.
"""

import re
from dataclasses import dataclass, field

from .metal_source import kernel_code

BUILTINS = {
    "thread_position_in_grid",
    "thread_position_in_threadgroup",
    "threadgroup_position_in_grid",
    "threads_per_threadgroup",
    "threadgroups_per_grid",
    "threads_per_grid",
    "thread_index_in_threadgroup",
    "thread_index_in_simdgroup",
    "simdgroup_index_in_threadgroup",
    "threads_per_simdgroup",
    "simdgroups_per_threadgroup",
}

# A kernel parameter in one of these address spaces is a buffer, with or
# without [[buffer(n)]].
BUFFER_ADDRESS_SPACES = {"device", "constant"}

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<str>"(?:\\.|[^"\\])*")
  | (?P<chr>'(?:\\.|[^'\\])*')
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>::|->|<<=|>>=|<=|>=|==|!=|&&|\|\||\+\+|--|[-+*/%&|^~!=<>?:;,.(){}\[\]\#@$\\])
    """,
    re.VERBOSE,
)


class ParseError(Exception):
    """The source uses a form the trampoline generator does not handle."""


def tokenize(text):
    tokens = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ParseError(f"cannot tokenize near {text[pos:pos + 40]!r}")
        if m.lastgroup != "ws":
            tokens.append(m.group())
        pos = m.end()
    return tokens


def skip_balanced(tokens, i, open_tok, close_tok):
    """Index just past the token closing the group that opens at tokens[i]."""
    depth = 0
    while i < len(tokens):
        if tokens[i] == open_tok:
            depth += 1
        elif tokens[i] == close_tok:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ParseError(f"unbalanced {open_tok}")


def split_top_level(tokens, sep=","):
    """Splits at `sep` outside (), [], {} and template angle brackets."""
    parts, cur, depth = [], [], 0
    for t in tokens:
        if t in ("(", "[", "{", "<"):
            depth += 1
        elif t in (")", "]", "}", ">"):
            depth -= 1
        if t == sep and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        parts.append(cur)
    return parts


@dataclass
class Attribute:
    name: str
    args: list  # token list


def read_attributes(tokens, i):
    """Parses consecutive `[[...]]` groups starting at tokens[i]."""
    attrs = []
    while i + 1 < len(tokens) and tokens[i] == "[" and tokens[i + 1] == "[":
        end = skip_balanced(tokens, i, "[", "]")
        for item in split_top_level(tokens[i + 2 : end - 2]):
            if not item:
                continue
            name = item[0]
            args = item[2:-1] if len(item) > 1 and item[1] == "(" else []
            attrs.append(Attribute(name, args))
        i = end
    return attrs, i


def attributes_outside_parens(tokens):
    """All attributes of a declaration, skipping its parameter list."""
    attrs, i = [], 0
    while i < len(tokens):
        if tokens[i] == "(":
            i = skip_balanced(tokens, i, "(", ")")
        elif tokens[i] == "[" and i + 1 < len(tokens) and tokens[i + 1] == "[":
            found, i = read_attributes(tokens, i)
            attrs += found
        else:
            i += 1
    return attrs


def join(tokens):
    out = ""
    for t in tokens:
        if out and (re.match(r"\w", t) and re.search(r"\w$", out)):
            out += " "
        out += t
    return out


def int_arg(attr):
    text = join(attr.args)
    if not re.fullmatch(r"\d+", text):
        raise ParseError(f"[[{attr.name}({text})]]: expected an integer literal")
    return int(text)


@dataclass
class Param:
    name: str
    type: str
    kind: str  # "buffer", "threadgroup" or "builtin"
    index: int = 0
    builtin: str = ""
    enabled_by: str = ""


@dataclass
class KernelDef:
    name: str
    namespace: tuple
    params: list
    is_template: bool
    host_name: str


@dataclass
class Instance:
    host_name: str
    ref: str  # the instantiated function as written, e.g. fn<half, 64>
    base: str  # the template's name
    namespace: tuple


@dataclass
class Constant:
    index: int
    name: str
    type: str
    namespace: tuple


@dataclass
class Derived:
    name: str
    expr: str
    namespace: tuple


@dataclass
class Program:
    kernels: list = field(default_factory=list)
    instances: list = field(default_factory=list)
    constants: list = field(default_factory=list)
    derived: list = field(default_factory=list)


def parse_param(tokens, kernel):
    attrs = []
    decl = tokens
    for k in range(len(tokens) - 1):
        if tokens[k] == "[" and tokens[k + 1] == "[":
            attrs, _ = read_attributes(tokens, k)
            decl = tokens[:k]
            break
    if len(decl) < 2 or not re.fullmatch(r"[A-Za-z_]\w*", decl[-1]):
        raise ParseError(f"kernel {kernel}: cannot read parameter {join(tokens)!r}")
    name = decl[-1]
    ptype = join(decl[:-1])
    p = None
    enabled_by = ""
    for a in attrs:
        if a.name == "buffer":
            p = Param(name, ptype, "buffer", index=int_arg(a))
        elif a.name == "threadgroup":
            p = Param(name, ptype, "threadgroup", index=int_arg(a))
        elif a.name in BUILTINS:
            p = Param(name, ptype, "builtin", builtin=a.name)
        elif a.name == "function_constant":
            enabled_by = join(a.args)
        else:
            raise ParseError(
                f"kernel {kernel}: parameter {name} has [[{a.name}]], which "
                "the emulator does not support"
            )
    if p is None and BUFFER_ADDRESS_SPACES.intersection(decl[:-1]):
        p = Param(name, ptype, "buffer", index=None)
    if p is None:
        raise ParseError(
            f"kernel {kernel}: parameter {name} has no [[buffer(n)]], "
            "[[threadgroup(n)]] or builtin attribute and is no device or "
            "constant buffer, whose index Metal would assign"
        )
    p.enabled_by = enabled_by
    return p


def assign_buffer_indices(params):
    """Gives each buffer parameter without [[buffer(n)]] its index as the
    Metal Shading Language specification says the compiler assigns it
    (section "Locating Buffer, Texture, and Sampler Arguments"): the first
    index no buffer parameter of the kernel holds, in declaration order.
    Explicit indices are taken first, wherever they are declared."""
    taken = {p.index for p in params if p.kind == "buffer" and p.index is not None}
    for p in params:
        if p.kind == "buffer" and p.index is None:
            p.index = min(set(range(len(taken) + 1)) - taken)
            taken.add(p.index)
    return params


def parse_kernel_def(tokens, namespace, arguments=True):
    is_template = tokens[0] == "template" and tokens[1] == "<"
    i = 0
    if is_template:
        depth = 0
        while True:
            if tokens[i] == "<":
                depth += 1
            elif tokens[i] == ">":
                depth -= 1
                if depth == 0:
                    i += 1
                    break
            i += 1
    attrs, i = read_attributes(tokens, i)
    paren = tokens.index("(", i)
    name = tokens[paren - 1]
    if "void" not in tokens[i : paren - 1]:
        raise ParseError(f"kernel {name} must return void")
    end = skip_balanced(tokens, paren, "(", ")")
    params = (
        assign_buffer_indices(
            [parse_param(p, name) for p in split_top_level(tokens[paren + 1 : end - 1])]
        )
        if arguments
        else []
    )
    host = name
    for a in attrs:
        if a.name == "host_name":
            host = "".join(s[1:-1] for s in a.args)
    return KernelDef(name, namespace, params, is_template, host)


def parse_instance(tokens, namespace):
    attrs = attributes_outside_parens(tokens)
    host = None
    for a in attrs:
        if a.name == "host_name":
            host = "".join(s[1:-1] for s in a.args)
    if host is None:
        raise ParseError(f"explicit kernel instantiation without host_name: {join(tokens)}")
    d = tokens.index("decltype")
    end = skip_balanced(tokens, d + 1, "(", ")")
    ref = tokens[end:]
    if "<" not in ref:
        raise ParseError(f"cannot read the instantiated kernel in {join(tokens)}")
    base = ref[ref.index("<") - 1]
    return Instance(host, join(ref), base, namespace)


def analyse(stmt, has_body, namespace, prog, arguments=True):
    if not stmt:
        return
    attrs = attributes_outside_parens(stmt)
    names = {a.name for a in attrs}
    if stmt[0] == "template" and len(stmt) > 1 and stmt[1] != "<":
        if "kernel" in names:
            prog.instances.append(parse_instance(stmt, namespace))
        return
    if "kernel" in names:
        if has_body:
            prog.kernels.append(parse_kernel_def(stmt, namespace, arguments))
        return
    if "function_constant" in names and not has_body:
        k = next(
            j for j in range(len(stmt) - 1) if stmt[j] == "[" and stmt[j + 1] == "["
        )
        fc = next(a for a in attrs if a.name == "function_constant")
        prog.constants.append(
            Constant(int_arg(fc), stmt[k - 1], join(stmt[: k - 1]), namespace)
        )
        return
    if has_body or "=" not in stmt:
        return
    eq = stmt.index("=")
    head, expr = stmt[:eq], stmt[eq + 1 :]
    if not head or "(" in head or "[" in head or head[0] in ("using", "typedef", "template"):
        return
    fc_names = {c.name for c in prog.constants}
    if fc_names.intersection(expr) or {d.name for d in prog.derived}.intersection(expr):
        prog.derived.append(Derived(head[-1], join(expr), namespace))


def _outside_parens(tokens):
    out, depth = [], 0
    for t in tokens:
        depth += t in ("(", "[")
        depth -= t in (")", "]")
        if depth == 0 and t not in (")", "]"):
            out.append(t)
    return out


def _after_template_parameters(tokens):
    """A declaration without its leading `template <...>`, whose default
    arguments (`typename MaskType = float`) are no initialiser."""
    if tokens[:2] != ["template", "<"]:
        return tokens
    depth = 0
    for i, t in enumerate(tokens):
        if t in ("(", "["):
            depth += 100
        elif t in (")", "]"):
            depth -= 100
        elif t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
            if depth == 0:
                return tokens[i + 1 :]
    return tokens


def parse(preprocessed, internal, arguments=True):
    """Reads the kernel code of a preprocessed translation unit; `internal`
    lists path prefixes (shim, runtime, wrapper) that are not kernel code.
    Without `arguments` the kernels' parameters are not read (the
    conformance pass checks them itself, and Metal allows some the emulator
    cannot bind)."""
    tokens = tokenize(kernel_code(preprocessed, internal))
    prog = Program()
    scopes = []  # namespace names, "" for an unnamed one
    i, start = 0, 0
    while i < len(tokens):
        t = tokens[i]
        if t == "namespace" and i == start:
            j = i + 1
            parts = []
            while tokens[j] != "{":
                if tokens[j] != "::":
                    parts.append(tokens[j])
                j += 1
            if tokens[j - 1] == "=":
                raise ParseError("namespace alias at program scope is not supported")
            scopes.append(parts or [""])
            i = start = j + 1
        elif t == "}" and i == start:
            scopes.pop()
            i = start = i + 1
        elif t in ("(", "["):
            i = skip_balanced(tokens, i, t, ")" if t == "(" else "]")
        elif t == "{":
            ns = tuple(n for parts in scopes for n in parts)
            stmt = tokens[start:i]
            i = skip_balanced(tokens, i, "{", "}")
            if "=" in _outside_parens(_after_template_parameters(stmt)) or (
                stmt and stmt[0] in ("struct", "class", "union", "enum")
            ):
                # An initialiser or a type definition: runs on to its ';'.
                while tokens[i] != ";":
                    i = skip_balanced(tokens, i, "{", "}") if tokens[i] == "{" else i + 1
                i += 1
            analyse(stmt, True, ns, prog, arguments)
            start = i
        elif t == ";":
            ns = tuple(n for parts in scopes for n in parts)
            analyse(tokens[start:i], False, ns, prog, arguments)
            i = start = i + 1
        else:
            i += 1
    return prog


def _open_ns(namespace):
    return "".join(f"namespace {n} {{ " for n in namespace)


def _close_ns(namespace):
    return "} " * len(namespace)


def _qualified(namespace, name):
    return "::" + "::".join(list(namespace) + [name])


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


WRAPPER = """// Generated by tests/metal_emu; do not edit.
#include "invoke.h"
#include <metal_stdlib>
namespace {{
#include {path}
}} // namespace
"""
# The kernel source at program scope, as Metal compiles it.
WRAPPER_AT_PROGRAM_SCOPE = """// Generated by tests/metal_emu; do not edit.
#include "invoke.h"
#include <metal_stdlib>
#include {path}
"""


def wrapper(metal_path, unnamed_namespace=True):
    """The translation unit to preprocess: runtime glue, then the shim, then
    the kernel source inside an unnamed namespace (or at program scope)."""
    text = WRAPPER if unnamed_namespace else WRAPPER_AT_PROGRAM_SCOPE
    return text.format(path=c_string(metal_path))


def generate(prog):
    """The kernel and function-constant tables for a parsed program, to be
    appended to the preprocessed wrapper."""
    defs = {}
    for k in prog.kernels:
        defs.setdefault(k.name, k)
    entries = []  # (host name, namespace, ref, params)
    for k in prog.kernels:
        if not k.is_template:
            entries.append((k.host_name, k.namespace, k.name, k.params))
    for inst in prog.instances:
        if inst.base not in defs:
            raise ParseError(f"instantiation {inst.ref}: no [[kernel]] template named {inst.base}")
        entries.append((inst.host_name, inst.namespace, inst.ref, defs[inst.base].params))
    seen = set()
    for host, *_ in entries:
        if host in seen:
            raise ParseError(f"two kernels have host name {host!r}")
        seen.add(host)

    out = []
    table = []
    for n, (host, ns, ref, params) in enumerate(entries):
        fn = f"fa_emu_kernel_{n}"
        specs = []
        for j, p in enumerate(params):
            ptype = f"::fa_emu::param_t<decltype(&{ref}), {j}>"
            if p.kind == "buffer":
                enabled = f"&{p.enabled_by}" if p.enabled_by else "nullptr"
                specs.append(
                    f"::fa_emu::buffer_param<{ptype}>({p.index}, {c_string(p.name)}, "
                    f"{c_string(p.type)}, {enabled})"
                )
            elif p.kind == "threadgroup":
                specs.append(
                    f"::fa_emu::threadgroup_param<{ptype}>({p.index}, "
                    f"{c_string(p.name)}, {c_string(p.type)})"
                )
            else:
                specs.append(
                    f"::fa_emu::builtin_param(::fa_emu::Builtin::{p.builtin}, "
                    f"{c_string(p.name)}, {c_string(p.type)})"
                )
        out.append(f"namespace {{ {_open_ns(ns)}")
        out.append(f"const ::fa_emu::ParamSpec {fn}_params[] = {{")
        out += [f"    {s}," for s in specs]
        out.append("};")
        out.append(f"void {fn}(const ::fa_emu::ParamSpec* p) {{")
        out.append(f"  ::fa_emu::call_kernel(&{ref}, p);")
        out.append("}")
        out.append(f"{_close_ns(ns)}}} // namespace")
        q = "::".join(list(ns) + [fn])
        table.append(f"    {{{c_string(host)}, &{q}, {q}_params, {len(params)}}},")

    consts = [
        f"    ::fa_emu::constant_spec({c.index}, {c_string(c.name)}, "
        f"{c_string(c.type)}, &{_qualified(c.namespace, c.name)}),"
        for c in prog.constants
    ]
    for n, d in enumerate(prog.derived):
        out.append(f"namespace {{ {_open_ns(d.namespace)}")
        out.append(f"void fa_emu_derived_{n}() {{ {d.name} = ({d.expr}); }}")
        out.append(f"{_close_ns(d.namespace)}}} // namespace")

    out.append("namespace {")
    out.append("const ::fa_emu::KernelSpec fa_emu_kernel_table[] = {")
    out += table or ["    {nullptr, nullptr, nullptr, 0},"]
    out.append("};")
    out.append("const ::fa_emu::ConstantSpec fa_emu_constant_table[] = {")
    out += consts or ["    {0, nullptr, nullptr, ::fa_emu::ConstantKind::Bool, nullptr, nullptr},"]
    out.append("};")
    out.append("} // namespace")
    out.append("const ::fa_emu::KernelSpec* const ::fa_emu::kernels = fa_emu_kernel_table;")
    out.append(f"const unsigned ::fa_emu::n_kernels = {len(table)};")
    out.append(
        "const ::fa_emu::ConstantSpec* const ::fa_emu::function_constants = "
        "fa_emu_constant_table;"
    )
    out.append(f"const unsigned ::fa_emu::n_function_constants = {len(consts)};")
    out.append("void ::fa_emu::refresh_derived_constants() {")
    for n, d in enumerate(prog.derived):
        out.append(f"  {'::'.join(list(d.namespace) + [f'fa_emu_derived_{n}'])}();")
    out.append("}")
    return "\n".join(out) + "\n"
