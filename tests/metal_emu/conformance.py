#!/usr/bin/env python3
"""Metal Shading Language conformance pass: an allowlist. Every construct of
the kernel code of a .metal file, as clang's AST shows it (templates
instantiated, macros expanded) and as its text holds Metal's attributes,
must be of a form in metal_vocabulary.py, where each form cites the Metal
Shading Language Specification 3.1 or a line of MLX's own Metal kernels;
anything else is a finding until it is reviewed and added there. The
emulator, the strict pass and the host compile checks all accept what they
compile as C++; this pass accepts only what Apple's compiler is known to.

    python tests/metal_emu/conformance.py [--flattened] [-v] FILE.metal ...

exits 0 when every file conforms, 1 (printing one line per finding,
`path:line:col: [rule] message`) otherwise, 2 when clang is missing.
--flattened also checks each file's JIT text (cmake/flatten_source.py, one
file at a time); -v prints every kernel's threadgroup memory.

The unit is the strict pass's (strict_check.preprocess and strict_unit) with
one change: an explicit `thread` becomes the comment `/*thread*/` instead of
nothing, so a pointer or reference written with `thread` is told apart from
one written with no address space, while clang still types both the same
(a real address space for `thread` would make `&local` mistyped). Clang
dumps the AST as JSON; the offsets in it are offsets into the unit, which the
line markers map back to files. RULES lists what is checked; README.md says
how each rule is detected and where it stops.
"""

import argparse
import bisect
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

if __package__:
    from . import gen_trampoline, kernel_attributes, metal_source, metal_vocabulary, strict_check
else:  # run as a script: import the package so its relative imports work
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from metal_emu import (
        gen_trampoline, kernel_attributes, metal_source, metal_vocabulary, strict_check,
    )

REPO_ROOT = strict_check.REPO_ROOT
FLATTEN = os.path.join(REPO_ROOT, "cmake", "flatten_source.py")


def _max_threadgroup_bytes():
    """fa::kMetalMaxThreadgroupBytes, which the .metal files also assert."""
    header = os.path.join(REPO_ROOT, "mlx_fused_attn", "tile", "platform.h")
    with open(header) as fh:
        return int(re.search(r"\bkMetalMaxThreadgroupBytes = (\d+)", fh.read()).group(1))


MAX_THREADGROUP_BYTES = _max_threadgroup_bytes()

RULES = {
    "construct": "the construct is not in the vocabulary (metal_vocabulary.NODES)",
    "type": "the type is not a Metal type in the vocabulary (metal_vocabulary.TYPES)",
    "address-space": "every pointer and reference needs an address space "
    "(`device`, `constant`, `threadgroup` or `thread`) before Metal 4.1",
    "implicit-object": "a member function called on an object in `device`, `constant` "
    "or `threadgroup` memory must be declared for that address space",
    "declaration": "the declaration is not of a form the vocabulary allows at its scope "
    "(metal_vocabulary.DECLARATIONS)",
    "language-level": "Metal 3.1 is C++14; the feature is not one of the later ones the "
    "vocabulary allows (metal_vocabulary.LATER_FEATURES)",
    "attribute": "the attribute is not in the vocabulary",
    "kernel-argument": "a kernel argument has at most one [[buffer(n)]], [[threadgroup(n)]] "
    "or builtin attribute (Metal assigns the index of one without) and no other attribute "
    "but [[function_constant(name)]]",
    "argument-index": "a kernel's [[buffer(n)]] and [[threadgroup(n)]] indexes are unique "
    "integer literals",
    "function-constant": "[[function_constant(n)]] indexes are unique integer literals "
    "in a translation unit",
    "function-pointer": "Metal 3.1 has no function pointers",
    "recursion": "Metal has no recursion",
    "std-header": "kernel sources may include only Metal's <metal_*> headers "
    "and the package's own",
    "threadgroup-memory": f"a kernel may declare at most {MAX_THREADGROUP_BYTES} "
    "bytes of threadgroup memory",
    "compile": "the source does not compile",
}

_THREAD_MARK = "/*thread*/"
SPELLING = dict(strict_check.ADDRESS_SPACE_ATTRIBUTE, thread=_THREAD_MARK)
# -fexceptions so that `throw` and `try` reach the AST instead of failing.
AST_FLAGS = [
    *strict_check.TARGET, "-fexceptions", "-fcxx-exceptions", *strict_check.QUIET,
    "-fsyntax-only", "-ferror-limit=0", "-Xclang", "-ast-dump=json",
]

_FUNCTIONS = {
    "FunctionDecl", "CXXMethodDecl", "CXXConstructorDecl", "CXXDestructorDecl",
    "CXXConversionDecl",
}
_CALLS = {"CallExpr", "CXXOperatorCallExpr"}
_TEMPLATES = {"FunctionTemplateDecl", "ClassTemplateDecl", "VarTemplateDecl"}
_TEMPLATE_PARAMS = {"TemplateTypeParmDecl", "NonTypeTemplateParmDecl", "TemplateTemplateParmDecl"}
_TYPED_DECLS = {"ParmVarDecl", "VarDecl", "FieldDecl", "TypedefDecl", "TypeAliasDecl"}
_CASTS = {
    "CStyleCastExpr", "CXXStaticCastExpr", "CXXReinterpretCastExpr", "CXXConstCastExpr",
    "CXXFunctionalCastExpr",
}
_VARIABLES = {"VarDecl", "VarTemplateSpecializationDecl", "VarTemplatePartialSpecializationDecl"}
_SCOPES = {
    "TranslationUnitDecl": "program", "NamespaceDecl": "program", "LinkageSpecDecl": "program",
    "CXXRecordDecl": "class", "ClassTemplateSpecializationDecl": "class",
    "ClassTemplatePartialSpecializationDecl": "class",
}
# Node kinds of features past C++14, named so that their finding says which
# (a kind that is neither here nor in the vocabulary is a `construct`).
_LATER_NODES = {
    "DecompositionDecl": "structured binding (C++17)",
    "BindingDecl": "structured binding (C++17)",
    "CXXFoldExpr": "fold expression (C++17)",
    "CXXDeductionGuideDecl": "deduction guide (C++17)",
    "ConceptDecl": "concept (C++20)",
    "RequiresExpr": "requires expression (C++20)",
    "ConceptSpecializationExpr": "concept (C++20)",
    "CoroutineBodyStmt": "coroutine (C++20)",
    "CoreturnStmt": "coroutine (C++20)",
    "CoawaitExpr": "coroutine (C++20)",
    "CoyieldExpr": "coroutine (C++20)",
    "CXXRewrittenBinaryOperator": "three-way comparison (C++20)",
}
# The words clang prints builtin types with; a run of them (or one reserved
# identifier, `__int128`, `__SVInt8_t`) is one builtin type, which must be in
# metal_vocabulary.TYPES.
_BUILTIN_WORDS = {
    "void", "bool", "char", "signed", "unsigned", "short", "int", "long", "float",
    "double", "wchar_t", "char8_t", "char16_t", "char32_t", "_Complex", "_Imaginary",
    "_Float16", "__fp16", "__bf16", "__int128", "__float128", "__ibm128",
}
_TYPE_TOKEN = re.compile(r"[A-Za-z_]\w*|\S")
_RESERVED = re.compile(r"_[_A-Z]")
# Pointer to (member) function, reference to function: `void (*)(int)`,
# `void (A::*)()`, `void (&)(int)`; `T (&)[4]` (an array) does not match.
_FUNCTION_POINTER = re.compile(r"\((?:[\w:<>, ]*::)?[*&]+\s*(?:const\s*)?\)\s*\(")
_ATTRIBUTE = re.compile(r"__attribute__\(\((?:[^()]|\([^()]*\))*\)\)")
_NAMED_PARENS = re.compile(r"(\w)\([^()]*\)")
_SCALAR_BYTES = {
    "bool": 1, "char": 1, "signed char": 1, "unsigned char": 1,
    "short": 2, "unsigned short": 2, "_Float16": 2, "__fp16": 2,
    "int": 4, "unsigned int": 4, "float": 4,
    "long": 8, "unsigned long": 8,
}
_EXT_VECTOR = re.compile(r"^(.*?)\s*__attribute__\(\(ext_vector_type\((\d+)\)\)\)$")


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    col: int
    rule: str
    message: str

    def __str__(self):
        path = self.path
        if path.startswith(REPO_ROOT + os.sep):
            path = os.path.relpath(path, REPO_ROOT)
        return f"{path}:{self.line}:{self.col}: [{self.rule}] {self.message}"


@dataclass
class Report:
    findings: list = field(default_factory=list)
    # Host name -> bytes of threadgroup arrays, for every instantiated kernel.
    threadgroup_bytes: dict = field(default_factory=dict)

    @property
    def rules(self):
        return {f.rule for f in self.findings}


class _SourceMap:
    """Offsets into the unit -> (file, line, column, is kernel code)."""

    def __init__(self, unit):
        self.starts, self.origins = [], []
        offset = 0
        for line, origin in metal_source.line_origins(unit, strict_check.INTERNAL):
            self.starts.append(offset)
            self.origins.append(origin)
            offset += len(line.encode()) + 1

    def locate(self, offset):
        i = bisect.bisect_right(self.starts, offset) - 1
        kind, path, line, kernel = self.origins[i]
        return path, line, offset - self.starts[i] + 1, kind == "code" and kernel


def _offset(node):
    loc = node.get("loc") or node.get("range", {}).get("begin") or {}
    loc = loc.get("spellingLoc", loc)
    return loc.get("offset")


def _end_offset(node):
    end = node.get("range", {}).get("end", {})
    end = end.get("spellingLoc", end)
    return end["offset"] + end.get("tokLen", 0) if "offset" in end else None


def _types(node):
    t = node.get("type") or {}
    return [t[k] for k in ("qualType", "desugaredQualType") if k in t]


def _return_type(function_type):
    """`int (const float *)` -> `int `: the text before the parameter list."""
    text = _ATTRIBUTE.sub(lambda m: "_" * len(m.group()), function_type)
    depth = 0
    for i, c in enumerate(text):
        depth += c == "<"
        depth -= c == ">"
        if c == "(" and depth == 0:
            return function_type[:i]
    return function_type


def _unqualified_declarators(type_text):
    """How many pointer and reference declarators of a printed type have a
    pointee with no address-space attribute (template arguments aside)."""
    text = _ATTRIBUTE.sub(lambda m: "@AS" if "address_space" in m.group() else "", type_text)
    # Parentheses after a name (decltype(a * b), sizeof(T *)) hold
    # expressions and other types, not declarators of this one.
    while True:
        shorter = _NAMED_PARENS.sub(r"\1_", text)
        if shorter == text:
            break
        text = shorter
    count, depth, qualified, i = 0, 0, False, 0
    while i < len(text):
        c = text[i]
        if c in "<[":
            depth += 1
        elif c in ">]":
            depth -= 1
        elif depth == 0 and c == "@":
            qualified = True
        elif depth == 0 and c in "*&":
            count += not qualified
            qualified = False
            i += text[i : i + 2] == "&&"
        elif depth == 0 and c in "(,":
            qualified = False
        i += 1
    return count


def _builtin_types(type_text):
    """The builtin types a printed type names: `const unsigned int *` ->
    ['unsigned int'], `vec<long long, 2>` -> ['long long']."""
    found, run = [], []
    for word in _TYPE_TOKEN.findall(_ATTRIBUTE.sub(" ", type_text)) + [""]:
        if word in _BUILTIN_WORDS:
            run.append(word)
            continue
        if run:
            found.append(" ".join(run))
            run = []
        if _RESERVED.match(word) and word != "__attribute__":
            found.append(word)
    return found


def _later_feature(node, kind, unit):
    """The C++17 feature that a node of a known kind uses, or None."""
    if kind == "IfStmt" and node.get("isConstexpr"):
        return "if constexpr"
    if kind in ("IfStmt", "SwitchStmt") and node.get("hasInit"):
        return f"init-statement in {kind[:-4].lower()}"
    if kind == "StaticAssertDecl" and len(node.get("inner", [])) < 2:
        return "static_assert without a message"
    if kind == "NonTypeTemplateParmDecl" and "auto" in _types(node):
        return "`auto` template parameter"
    begin = node.get("range", {}).get("begin", {}).get("offset")
    name_at = _offset(node)
    if kind == "VarDecl" and node.get("inline") and begin is not None and name_at is not None:
        if re.search(rb"\binline\b", unit[begin:name_at]):
            return "inline variable"
    if kind == "NamespaceDecl" and name_at is not None and node.get("name"):
        after = unit[name_at + len(node["name"]) : name_at + len(node["name"]) + 8]
        if after.lstrip().startswith(b"::"):
            return "nested namespace definition"
    return None


class _Checker:
    def __init__(self, unit, source_map, kernels, original_lines, recovered=()):
        self.unit = unit.encode()
        self.map = source_map
        self.kernels = kernels  # host names, in the order of _kernel_references
        # (file, line) -> the line before strict_unit rewrote it.
        self.original_lines = original_lines
        # (file, line) of the errors clang recovered from that Metal accepts.
        self.recovered = set(recovered)
        self.findings = set()
        self.functions = {}  # id -> (name, offset, kernel code)
        self.previous = {}  # redeclaration id -> earlier declaration id
        self.calls = set()  # (caller id, callee id)
        self.typedefs = {}  # name -> aliased type, to size threadgroup arrays
        # (function or record id, name) -> (aliased type, id of the record it
        # names or None), for the element types of threadgroup arrays
        # written as members of a class (`typename kernel_t::acc_type`).
        self.aliases = {}
        self.kernel_ids = {}  # host name -> id of the function clang resolved
        # function id -> [(name, type, function id)] of its static variables
        self.shared = {}
        self.deduced = set()  # class templates whose arguments clang deduced
        # (offset, class template) of variables whose type is a template
        # specialization written without its arguments.
        self.written_without_arguments = []

    def report(self, offset, rule, detail):
        path, line, col, _ = self.map.locate(offset)
        self.findings.add(Finding(path, line, col, rule, f"{detail}: {RULES[rule]}"))

    def marks(self, begin, end):
        """The `thread` marks in [begin, end), and those just before begin: a
        comment is no token, so a declaration's range starts after them."""
        mark = _THREAD_MARK.encode()
        while True:
            start = len(self.unit[:begin].rstrip())
            if not self.unit[:start].endswith(mark):
                break
            begin = start - len(mark)
        return self.unit.count(mark, begin, end)

    def walk(self, root):
        # (node, kernel code, in an instantiation, enclosing function, is a
        # callee, scope: "program", "class" or "function"; "template" for
        # the variable of a variable template)
        stack = [(root, False, False, None, False, "program")]
        while stack:
            node, kernel, instance, function, callee, scope = stack.pop()
            kind = node.get("kind", "")
            if kind.endswith("Type") or kind == "TemplateArgument":
                continue
            if node.get("name", "").startswith(_GUIDE) and any(
                c.get("kind") == "CXXDeductionGuideDecl" and c.get("isUsed")
                for c in [node, *node.get("inner", [])]
            ):
                # A deduction guide used: a class template's arguments were
                # deduced somewhere (which declaration, check_deduction finds).
                self.deduced.add(node["name"][len(_GUIDE) : -1])
            if node.get("isImplicit") or node.get("implicit"):
                continue
            offset = _offset(node)
            if offset is not None:
                kernel = self.map.locate(offset)[3]
            if kind == "RecoveryExpr" and offset is not None:
                if self.map.locate(offset)[:2] in self.recovered:
                    continue
            if kind in _FUNCTIONS:
                self.functions[node["id"]] = (node.get("name", ""), offset, kernel)
                if "previousDecl" in node:
                    self.previous[node["id"]] = node["previousDecl"]
                function = node["id"]
            if kind in _ALIASES and "type" in node:
                self.typedefs[node["name"]] = node["type"]["qualType"]
                if function is not None:
                    self.aliases[(function, node["name"])] = _alias(node)
            if kind in ("CXXRecordDecl", "ClassTemplateSpecializationDecl"):
                for c in node.get("inner", []):
                    if c.get("kind") in _ALIASES and "type" in c:
                        self.aliases[(node["id"], c["name"])] = _alias(c)
            if kind == "VarDecl" and node.get("name", "").startswith(_KERNEL_REFERENCE):
                index = int(node["name"][len(_KERNEL_REFERENCE) :])
                self.kernel_ids[self.kernels[index]] = _referenced_function(node)
            if kernel and offset is not None:
                self.visit(node, kind, offset, instance, function, callee, scope)
            inner_scope = _SCOPES.get(kind, "function" if kind in _FUNCTIONS else scope)
            if kind == "VarTemplateDecl" and scope == "program":
                inner_scope = "template"
            children = node.get("inner", [])
            if kind in _TEMPLATES:
                templated = [c for c in children if c.get("kind") not in _TEMPLATE_PARAMS]
                pattern = templated[0]["id"] if templated else None
                entries = [
                    (c, kernel, instance or c["id"] != pattern, function, False, inner_scope)
                    for c in children
                ]
            else:
                entries = [
                    (c, kernel, instance, function, kind in _CALLS and i == 0, inner_scope)
                    for i, c in enumerate(children)
                ]
            stack.extend(reversed(entries))

    def visit(self, node, kind, offset, instance, function, callee, scope):
        if kind not in metal_vocabulary.NODES:
            if kind in _LATER_NODES:
                self.report(offset, "language-level", _LATER_NODES[kind])
            elif kind.endswith("Attr"):
                self.report(offset, "attribute", f"`{kind}` in clang's AST")
            else:
                self.report(offset, "construct", f"`{kind}` in clang's AST")
        feature = _later_feature(node, kind, self.unit)
        if feature and feature not in metal_vocabulary.LATER_FEATURES:
            self.report(offset, "language-level", f"{feature} (C++17)")
        self.visit_declaration(node, kind, offset, scope)
        if kind in ("DeclRefExpr", "MemberExpr") and function is not None:
            ref = node.get("referencedDecl", {})
            if ref.get("kind") in _FUNCTIONS:
                target = ref["id"]
            else:
                target = node.get("referencedMemberDecl")
            if target:
                self.calls.add((function, target))
        if kind == "UnaryOperator" and node.get("opcode") == "&":
            operand = node["inner"][0]
            while operand.get("kind") == "ParenExpr":
                operand = operand["inner"][0]
            if operand.get("referencedDecl", {}).get("kind") in _FUNCTIONS:
                name = operand["referencedDecl"].get("name")
                self.report(offset, "function-pointer", f"address of function '{name}'")
        decays = node.get("castKind") == "FunctionToPointerDecay"
        if kind == "ImplicitCastExpr" and decays and not callee:
            self.report(offset, "function-pointer", "function used as a pointer")
        if kind in ("IntegerLiteral", "FloatingLiteral"):
            # An unsuffixed floating literal is a float in Metal, a double here.
            allowed = set(metal_vocabulary.TYPES)
            if kind == "FloatingLiteral":
                allowed.add("double")
            for t in {b for t in _types(node) for b in _builtin_types(t)} - allowed:
                self.report(offset, "type", f"literal of type '{t}'")
        if kind in _TYPED_DECLS or kind in _FUNCTIONS or kind in _CASTS:
            self.visit_typed(node, kind, offset, instance)
        if kind == "UnaryExprOrTypeTraitExpr" and "argType" in node:
            for t in {b for t in _types({"type": node["argType"]}) for b in _builtin_types(t)}:
                if t not in metal_vocabulary.TYPES:
                    self.report(offset, "type", f"{node.get('name', 'sizeof')} of '{t}'")
        if kind == "VarDecl" and not instance:
            self.note_template_without_arguments(node, offset)
        if kind == "VarDecl" and node.get("storageClass") == "static" and function is not None:
            self.shared.setdefault(function, []).append(
                (node["name"], node["type"]["qualType"], function))

    def visit_declaration(self, node, kind, offset, scope):
        """Declarations by scope: each must be of a form in
        metal_vocabulary.DECLARATIONS."""
        name = node.get("name", "")
        if kind == "CXXMethodDecl" and node.get("virtual"):
            self.report(offset, "declaration", f"virtual function '{name}'")
        for base in node.get("bases", []):
            if base.get("isVirtual"):
                self.report(offset, "declaration", f"virtual base '{base['type']['qualType']}'")
        if kind not in _VARIABLES:
            return
        type_text = node.get("type", {}).get("qualType", "")
        # The variable's own address space: that of its type's outermost
        # declarator (after the last `*` or `&`), arrays aside.
        own = type_text.split("[")[0]
        own = own[max(own.rfind("*"), own.rfind("&")) + 1 :]
        spaces = set(re.findall(r"address_space\((\d+)\)", own))
        static = node.get("storageClass") == "static"
        if node.get("tls"):
            form = None
        elif scope in ("program", "template"):
            variable_template = scope == "template" or kind != "VarDecl"
            form = None
            if spaces == {"2"}:
                form = "variable template in constant" if variable_template else (
                    "program-scope variable in constant")
        elif scope == "class":
            form = "static data member in constant" if spaces == {"2"} else None
        elif static:
            array = type_text.rstrip().endswith("]")
            form = "function-scope threadgroup array" if spaces == {"3"} and array else None
        elif node.get("constexpr"):
            form = "local constexpr variable"
        else:
            form = "local variable" if not spaces else None
        if form is None or form not in metal_vocabulary.DECLARATIONS:
            where = {
                "program": "program-scope variable",
                "template": "variable template",
                "class": "static data member",
                "function": "function-scope static variable" if static else "local variable",
            }
            what = "`thread_local` variable" if node.get("tls") else where[scope]
            self.report(offset, "declaration", f"{what} '{name}' of type '{type_text}'")

    def visit_typed(self, node, kind, offset, instance):
        types = _types(node)
        if kind in _FUNCTIONS:
            types = [_return_type(t) for t in types]
        # Clang specializes a conversion function template for every target
        # type it tries in overload resolution, written nowhere.
        if not types or (instance and kind == "CXXConversionDecl"):
            return
        written = types[0]
        what = f"'{node['name']}'" if node.get("name") else "cast"
        what = f"{what} has type '{written}'"
        # A deduced type (auto, a template argument) prints the same sugared
        # and desugared, and an instantiation's types are deduced: an
        # unsuffixed literal is a float in Metal, a double here.
        deduced = instance or (len(types) == 2 and types[0] == types[1])
        allowed = set(metal_vocabulary.TYPES) | ({"double"} if deduced else set())
        unknown = sorted({b for t in types for b in _builtin_types(t)} - allowed)
        if unknown:
            self.report(offset, "type", f"{what} ('{', '.join(unknown)}')")
        if _FUNCTION_POINTER.search(written):
            self.report(offset, "function-pointer", what)
            return  # a function has no address space
        unqualified = _unqualified_declarators(written)
        if kind == "ParmVarDecl" and self.array_parameter(node, offset):
            # C++ makes an array parameter a pointer to its element; the array
            # is the caller's, in thread memory, and needs no address space.
            unqualified -= 1
        if instance or unqualified <= 0:
            return
        # The `thread`s count up to the name, or over the whole of a
        # declaration without one (a cast, a typedef, an unnamed parameter).
        named = kind not in _CASTS and kind not in ("TypedefDecl", "TypeAliasDecl")
        end = offset if named and node.get("name") else _end_offset(node)
        begin = node.get("range", {}).get("begin", {}).get("offset", offset)
        if self.marks(begin, end) < unqualified:
            self.report(offset, "address-space", what)

    def array_parameter(self, node, offset):
        """Whether a parameter is declared as an array (`T x[N]`), as the
        source writes it (strict_unit writes some as pointers)."""
        name = node.get("name", "")
        line = self.original_lines.get(self.map.locate(offset)[:2], "")
        return bool(name) and re.search(rf"\b{re.escape(name)}\s*\[", line) is not None

    def note_template_without_arguments(self, node, offset):
        """Notes a variable whose type is a class template specialization and
        whose declaration writes no template arguments (nor `auto`)."""
        m = _SPECIALIZATION.match(node.get("type", {}).get("qualType", ""))
        begin = node.get("range", {}).get("begin", {}).get("offset")
        if m and begin is not None:
            written = self.unit[begin:offset]
            if b"<" not in written and not re.search(rb"\b(auto|decltype)\b", written):
                self.written_without_arguments.append((offset, m.group(1)))

    def check_deduction(self):
        """Class template argument deduction (C++17), unless allowed."""
        if "class template argument deduction" in metal_vocabulary.LATER_FEATURES:
            return
        for offset, template in self.written_without_arguments:
            if template in self.deduced:
                self.report(offset, "language-level",
                            f"class template argument deduction of '{template}' (C++17)")

    def canonical(self, fid):
        while fid in self.previous:
            fid = self.previous[fid]
        return fid

    def check_recursion(self):
        graph = {}
        for caller, callee in self.calls:
            if callee in self.functions:
                graph.setdefault(self.canonical(caller), set()).add(self.canonical(callee))
        for component in _strongly_connected(graph):
            if len(component) == 1 and (
                component[0] not in graph.get(component[0], ())
                or "a function that calls itself" in metal_vocabulary.RECURSION
            ):
                continue
            # Reported at the first function of the cycle in kernel code (a
            # specialization of a template declared before its definition
            # has no location of its own).
            ordered = sorted(component, key=lambda f: (
                self.functions[f][1] is None, self.functions[f][1] or 0))
            located = [
                f for f in ordered if self.functions[f][1] is not None and self.functions[f][2]
            ]
            if located:
                names = [self.functions[f][0] for f in ordered]
                cycle = " -> ".join(names + names[:1])
                self.report(self.functions[located[0]][1], "recursion", cycle)

    def resolve(self, type_name):
        seen = set()
        while type_name not in seen:
            seen.add(type_name)
            # Typedefs are recorded by their unqualified names.
            name = type_name.split("::")[-1]
            if name not in self.typedefs:
                break
            type_name = self.typedefs[name]
        return type_name

    def check_threadgroup(self, report):
        shared = {}
        for fid, arrays in self.shared.items():
            shared.setdefault(self.canonical(fid), []).extend(arrays)
        for host in self.kernels:
            fid = self.kernel_ids.get(host)
            if fid is None or fid not in self.functions:
                self.report(0, "threadgroup-memory", f"kernel '{host}': not found in the AST")
                continue
            where = self.functions[fid][1]
            total, parts = 0, []
            for array, type_text, function in shared.get(self.canonical(fid), []):
                if "address_space(3)" not in type_text:
                    continue
                size = self.array_bytes(type_text, function)
                if size is None:
                    self.report(where, "threadgroup-memory",
                                f"kernel '{host}': cannot size '{array}' of type '{type_text}'")
                    continue
                total += size
                parts.append(f"{array} {size}")
            report.threadgroup_bytes[host] = total
            if total > MAX_THREADGROUP_BYTES:
                self.report(where, "threadgroup-memory",
                            f"kernel '{host}' declares {total} bytes of threadgroup memory "
                            f"({', '.join(parts)})")

    def array_bytes(self, type_text, function):
        text = _ATTRIBUTE.sub("", type_text).replace("const ", "").strip()
        element = text.split("[")[0].strip()
        if element.startswith("typename "):
            owner, member = element[len("typename ") :].rsplit("::", 1)
            record = self.aliases.get((function, owner), (None, None))[1]
            element = self.aliases.get((record, member), (element, None))[0]
        element = self.resolve(element)
        count = 1
        for n in re.findall(r"\[(\d+)\]", text):
            count *= int(n)
        lanes = 1
        m = _EXT_VECTOR.match(element)
        if m:
            element, lanes = m.group(1), int(m.group(2))
            lanes += lanes == 3  # Metal's 3-vectors take the space of 4
        scalar = _SCALAR_BYTES.get(element)
        return None if scalar is None else scalar * lanes * count


def _strongly_connected(graph):
    """Tarjan's algorithm, iterative; yields lists of nodes."""
    index, low, on_stack, stack, counter = {}, {}, set(), [], [0]
    for start in list(graph):
        if start in index:
            continue
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, successors = work[-1]
            advanced = False
            for w in successors:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph.get(w, ()))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                yield component


_KERNEL_REFERENCE = "fa_conformance_kernel_"
_GUIDE = "<deduction guide for "
# A class template specialization as clang prints a type: `const fa::Box<int>`.
_SPECIALIZATION = re.compile(r"^(?:const |volatile )*(?:[A-Za-z_]\w*::)*([A-Za-z_]\w*)<")
_ALIASES = ("TypedefDecl", "TypeAliasDecl")


def _alias(node):
    """(the type a typedef or alias names, the id of the record it names or
    None), read from its type nodes."""
    type_text = node["type"].get("desugaredQualType", node["type"]["qualType"])
    stack = list(node.get("inner", []))
    while stack:
        n = stack.pop()
        if n.get("kind") == "RecordType" and "decl" in n:
            return type_text, n["decl"]["id"]
        stack.extend(n.get("inner", []))
    return type_text, None


def _kernel_references(kernels):
    """Lines appended to the unit, outside kernel code (a system-header line
    marker), that take the address of each kernel, [(host name, namespace,
    the function as written)], so that clang resolves each to its function
    (template arguments through typedefs, defaults and all)."""
    lines = ['# 1 "<conformance: kernel references>" 3']
    for i, (_, namespace, ref) in enumerate(kernels):
        opened = "".join(f"namespace {n} {{ " for n in namespace)
        lines.append(f"{opened}auto* const {_KERNEL_REFERENCE}{i} = &{ref};{' }' * len(namespace)}")
    return "\n".join(lines) + "\n"


def _referenced_function(node):
    """The id of the first function a DeclRefExpr under node refers to."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.get("kind") == "DeclRefExpr" and n.get("referencedDecl", {}).get("kind") in _FUNCTIONS:
            return n["referencedDecl"]["id"]
        stack.extend(reversed(n.get("inner", [])))
    return None


def _include_findings(source_map):
    """Headers entered from kernel code that are neither kernel code nor one
    of Metal's <metal_*> headers (here: the strict library's or the shim's)."""
    findings = []
    stack = []  # [path, kernel code, line of the next code line]
    for kind, path, line, extra in source_map.origins:
        if kind == "code":
            if stack:
                stack[-1][2] = line + 1
            continue
        kernel = "3" not in extra and not any(path.startswith(d) for d in strict_check.INTERNAL)
        if "1" in extra:
            metal_header = os.path.basename(path).startswith("metal_")
            if stack and stack[-1][1] and not kernel and not metal_header:
                includer = stack[-1]
                findings.append(Finding(
                    includer[0], includer[2], 1, "std-header",
                    f"includes {path}: {RULES['std-header']}"))
            stack.append([path, kernel, line])
        else:
            if "2" in extra:
                while stack and stack[-1][0] != path:
                    stack.pop()
            if stack:
                stack[-1] = [path, kernel, line]
            else:
                stack.append([path, kernel, line])
    return findings


_NOT_FOUND = re.compile(r"^(.*?):(\d+):(\d+): fatal error: '([^']+)' file not found", re.M)
_DIAGNOSTIC = re.compile(r"^(.*?):(\d+):(\d+): (fatal error|error|note|warning): (.*)$")
# What clang says of a member function called on an object in another
# address space than its implicit object parameter's (the generic one, which
# is Metal's `thread`, unless the method is declared for another): the
# error itself, or a note under an error about a conversion or a call.
_IMPLICIT_OBJECT = re.compile(
    r"'this' argument to member function|cannot initialize object parameter|"
    r"'this' object is in address space")
# A candidate clang declares itself, which Metal declares for every address
# space.
_IMPLICIT_MEMBER = re.compile(r"\(the implicit (?:copy|move) (?:assignment operator|constructor)\)")


@dataclass
class _Error:
    """One error of clang's on the unit, with what its notes say."""

    file: str
    line: int
    col: int
    message: str
    implicit_object: bool = False  # a method called on an object in another space
    explicit_candidate: bool = False  # a candidate so refused that the code declares

    @property
    def implicit_member(self):
        """Only implicit special members (`=` of a struct) refused for the
        address space of the object: Metal has them in every space."""
        return self.implicit_object and not self.explicit_candidate


def _errors(stderr):
    errors = []
    for text in stderr.splitlines():
        m = _DIAGNOSTIC.match(text)
        if not m:
            continue
        file, line, col, severity, message = m.groups()
        implicit = bool(_IMPLICIT_OBJECT.search(message))
        if severity in ("error", "fatal error"):
            errors.append(_Error(file, int(line), int(col), message, implicit, implicit))
        elif severity == "note" and errors and implicit:
            errors[-1].implicit_object = True
            if not _IMPLICIT_MEMBER.search(message):
                errors[-1].explicit_candidate = True
    return errors


def _error_findings(errors, path, stderr):
    """One Finding an error, where it points (the line markers make clang
    name the source file and line): `implicit-object` where it or a note
    under it is about a member function's implicit object, `compile`
    otherwise."""
    findings = []
    for e in errors:
        rule = "implicit-object" if e.implicit_object else "compile"
        findings.append(Finding(e.file, e.line, e.col, rule, f"{e.message}: {RULES[rule]}"))
    return findings or [Finding(os.path.abspath(path), 0, 0, "compile", stderr.strip())]


def _attribute_findings(pre):
    """The findings of kernel_attributes over the kernel code of `pre`."""
    # The emulator's FA_SHARED_ARRAY_DECL, which the pass itself defines.
    masked = [d.split("=", 1)[1] for d in strict_check.DEFINES if "FA_SHARED_ARRAY_DECL" in d]
    text = kernel_attributes.KernelText(pre, strict_check.INTERNAL, masked)
    findings = []
    for issue in kernel_attributes.check(text):
        file, line, col = text.locate(issue.offset)
        message = f"{issue.message}: {RULES[issue.rule]}"
        findings.append(Finding(file, line, col, issue.rule, message))
    return findings


def check(path, clang=None, include_dirs=()):
    """The Report for one .metal file; `include_dirs` are searched before the
    repository (to check other versions of its headers)."""
    clang = clang or strict_check.find_clang()
    ok, pre = strict_check.preprocess(path, clang, include_dirs)
    if not ok:
        missing = [
            Finding(p, int(line), int(col), "std-header",
                    f"includes <{name}>: {RULES['std-header']}")
            for p, line, col, name in _NOT_FOUND.findall(pre)
            if not any(p.startswith(d) for d in strict_check.INTERNAL)
        ]
        return Report(missing or [Finding(os.path.abspath(path), 0, 0, "compile", pre.strip())])
    attribute_findings = _attribute_findings(pre)
    unit = strict_check.strict_unit(pre, SPELLING)
    try:
        program = gen_trampoline.parse(pre, strict_check.INTERNAL, arguments=False)
    except gen_trampoline.ParseError as e:
        # Kernels or function constants the trampoline cannot read; the
        # attribute findings say which, or else the error does.
        findings = attribute_findings or [Finding(os.path.abspath(path), 0, 0, "compile", str(e))]
        return Report(sorted(set(findings)))
    kernels = [
        (k.host_name or k.name, k.namespace, k.name) for k in program.kernels if not k.is_template
    ]
    kernels += [(inst.host_name, inst.namespace, inst.ref) for inst in program.instances]
    unit += _kernel_references(kernels)
    source_map = _SourceMap(unit)

    with tempfile.TemporaryDirectory(prefix="fa_conformance_") as tmp:
        ii = os.path.join(tmp, os.path.basename(path) + ".ii")
        with open(ii, "w") as fh:
            fh.write(unit)
        proc = subprocess.run(
            [clang, *AST_FLAGS, "-x", "c++-cpp-output", ii], capture_output=True, text=True
        )
    # An error about an implicit special member alone (MLX's assignment of
    # a struct in threadgroup memory) is stock clang's, not Metal's: the AST
    # clang still dumps is checked, its recovery nodes there aside.
    errors = _errors(proc.stderr)
    tolerated = {(e.file, e.line) for e in errors if e.implicit_member}
    if proc.returncode != 0 and (
        not tolerated
        or "implicit special members" not in metal_vocabulary.ADDRESS_SPACES
        or any(not e.implicit_member for e in errors)
    ):
        findings = _error_findings(
            [e for e in errors if not e.implicit_member], path, proc.stderr)
        return Report(sorted(set(findings + attribute_findings)))
    original_lines = {
        (origin[1], origin[2]): line
        for line, origin in metal_source.line_origins(pre, strict_check.INTERNAL)
        if origin[0] == "code"
    }
    checker = _Checker(unit, source_map, [k[0] for k in kernels], original_lines, tolerated)
    checker.walk(json.loads(proc.stdout))
    report = Report()
    checker.check_recursion()
    checker.check_deduction()
    checker.check_threadgroup(report)
    findings = checker.findings | set(_include_findings(source_map)) | set(attribute_findings)
    report.findings = sorted(findings)
    return report


def flattened(path, directory, kernel=None):
    """Writes the JIT text of one .metal file (flatten_source.py), or with
    `kernel` the one-kernel text the JIT compiles for that kernel, into
    `directory`, under the same name (and the kernel's), and returns its
    path."""
    cmd = [sys.executable, FLATTEN, "-I", REPO_ROOT, path]
    if kernel is not None:
        cmd += ["--instance", kernel]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    name = os.path.basename(path)
    if kernel is not None:
        name = f"{os.path.splitext(name)[0]}_{kernel}.metal"
    out = os.path.join(directory, name)
    with open(out, "w") as fh:
        fh.write(text)
    return out


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+")
    parser.add_argument("--flattened", action="store_true", help="also check each file's JIT text")
    parser.add_argument("-v", action="store_true", help="print every kernel's threadgroup memory")
    args = parser.parse_args(argv)
    clang = strict_check.find_clang()
    if clang is None:
        print("conformance: no clang++ found (apt-get install clang)", file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory(prefix="fa_flattened_") as tmp:
        units = [(s, s) for s in args.sources]
        if args.flattened:
            units += [(f"{s} (flattened)", flattened(s, tmp)) for s in args.sources]
        for label, path in units:
            report = check(path, clang)
            print(f"{'FAIL' if report.findings else 'ok  '} {label}")
            for finding in report.findings:
                print(f"  {finding}")
            if args.v:
                for host, size in sorted(report.threadgroup_bytes.items()):
                    print(f"  {host}: {size} bytes of threadgroup memory")
            failed += bool(report.findings)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
