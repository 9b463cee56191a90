"""Reading Metal source text the way the emulator and the strict pass need:
which lines of a preprocessed translation unit are kernel code, how Metal's
address-space qualifiers are rewritten there, and the threadgroup-array
declarations the emulator must know about.
"""

import re


_LINE_MARKER = re.compile(r'#\s*(\d+)\s+"((?:\\.|[^"\\])*)"(.*)')


def line_origins(preprocessed, internal):
    """Yields (line, origin) for the preprocessor's output. For a line marker
    (`# 12 "file" 1`) origin is ("marker", path, line number, flags); for
    any other line it is ("code", path, presumed line, is_kernel_code), where
    kernel code is what comes from neither a system header nor a file whose
    path starts with one of `internal`."""
    path, number, keep = "", 1, True
    for line in preprocessed.splitlines():
        m = _LINE_MARKER.match(line)
        if m:
            number, path, flags = int(m.group(1)), m.group(2), m.group(3).split()
            keep = "3" not in flags and not any(path.startswith(d) for d in internal)
            yield line, ("marker", path, number, flags)
        else:
            yield line, ("code", path, number, keep)
            number += 1


def _regions(preprocessed, internal):
    """Yields (line, is_kernel_code) for the preprocessor's output."""
    for line, origin in line_origins(preprocessed, internal):
        yield line, origin[0] == "code" and origin[3]


ADDRESS_SPACES = ("device", "constant", "thread", "threadgroup", "threadgroup_imageblock")
_QUALIFIER = re.compile(
    r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|\[\[.*?\]\]|\b(?:'
    + "|".join(ADDRESS_SPACES)
    + r")\b"
)


def rewrite_address_spaces(preprocessed, internal, spelling):
    """Replaces Metal's address-space qualifiers in the kernel code of a
    preprocessed translation unit by spelling[qualifier], leaving strings,
    [[...]] attributes (so [[threadgroup(n)]] survives), directives and all
    other lines untouched, so line numbers stay right.

    The qualifiers are rewritten here rather than defined as macros because
    Metal uses `threadgroup` both as a qualifier and as an attribute name,
    and because the standard headers use `thread` and `constant` as
    ordinary identifiers.
    """

    def repl(m):
        text = m.group()
        return text if text[0] in "\"'[" else spelling[text]

    return "\n".join(
        _QUALIFIER.sub(repl, line) if kernel and not line.lstrip().startswith("#") else line
        for line, kernel in _regions(preprocessed, internal)
    ) + "\n"


def kernel_code(preprocessed, internal):
    """Only the kernel-code lines of a preprocessed translation unit."""
    return "\n".join(
        line
        for line, kernel in _regions(preprocessed, internal)
        if kernel and not line.lstrip().startswith("#")
    )


# A threadgroup variable declared in a kernel's body, as MLX declares them:
# `threadgroup T x[N];` (no pointer or reference declarator before the
# name; the bound may be on the next line). Metal allows such a declaration
# only at the kernel's own scope, and the variable is one per threadgroup,
# shared by its threads: on the host it is a function-local static (one
# threadgroup runs at a time in a driver), as FA_SHARED_ARRAY_DECL is.
THREADGROUP_VARIABLE = re.compile(
    r"^(\s*)(threadgroup\s+(?:const\s+)?[A-Za-z_][\w:<>, ]*?\s+([A-Za-z_]\w*)\s*"
    r"(?:\[[^;]*\]\s*;|;|\[?$))"
)
_SHARED_ARRAY = re.compile(r"FA_SHARED_ARRAY_DECL\s+[^;]*?\b([A-Za-z_]\w*)\s*\[")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def static_threadgroup_variables(preprocessed, internal):
    """The kernel code of a preprocessed unit with each threadgroup variable
    declared in a function body (THREADGROUP_VARIABLE) made `static`; the
    `threadgroup` qualifier stays, for rewrite_address_spaces."""
    return "\n".join(
        THREADGROUP_VARIABLE.sub(r"\1static \2", line) if kernel else line
        for line, kernel in _regions(preprocessed, internal)
    ) + "\n"


def scan_source(text):
    """Returns the names of the threadgroup arrays declared in one source
    file, with FA_SHARED_ARRAY_DECL or, as MLX does, with `threadgroup`
    (THREADGROUP_VARIABLE): the runtime poisons them before each
    threadgroup."""
    text = _COMMENT.sub(" ", text)
    names = _SHARED_ARRAY.findall(text)
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = THREADGROUP_VARIABLE.match(line)
        if m:
            names.append(m.group(3))
    return names


# A member function's qualifier for the address space of `this`, after its
# parameter list (and a `const`): `complex_t() threadgroup : ...`.
_THIS_QUALIFIER = re.compile(
    r"\)(\s*(?:const\s+)?)\b(device|constant|threadgroup)\b(?=\s*(?:[:{;]|$))"
)
_THIS_ADDRESS_SPACE = {"device": 1, "constant": 2, "threadgroup": 3}


def _this_qualifier(line):
    out, pos = [], 0
    for m in _THIS_QUALIFIER.finditer(line):
        before = line[pos : m.start()]
        tag = f"::metal::emu::ThisIn<{_THIS_ADDRESS_SPACE[m.group(2)]}>"
        separator = "" if before.rstrip().endswith("(") else ", "
        out.append(f"{before}{separator}{tag}){m.group(1)}")
        pos = m.end()
    out.append(line[pos:])
    return "".join(out)


def this_address_space_overloads(preprocessed, internal):
    """The kernel code of a preprocessed unit with each member function
    qualified with device, constant or threadgroup (the address space of
    `this`) given a last parameter of type metal::emu::ThisIn<space>: the
    host has one address space, where such an overload would redeclare the
    unqualified (`thread`) one; so it stays distinct and compiled, and no
    call selects it, as no object lives outside thread memory here."""
    return "\n".join(
        _this_qualifier(line) if kernel and not line.lstrip().startswith("#") else line
        for line, kernel in _regions(preprocessed, internal)
    ) + "\n"



_DECL_TOKEN = re.compile(
    r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z_]\w*|\.?\d(?:[eEpP][+-]|[\w.])*'
    r"|::|->|[^\s\w]"
)


def _kernel_tokens(lines, kernel):
    """(token, line index, column) of every token on the kernel-code lines."""
    out = []
    for n, line in enumerate(lines):
        if kernel[n] and not line.lstrip().startswith("#"):
            out += [(m.group(), n, m.start()) for m in _DECL_TOKEN.finditer(line)]
    return out


def _runs_to_semicolon(head):
    """Whether a declaration whose first brace group follows the tokens
    `head` ends at a ';' after it (a class definition, an initialiser)
    rather than at its '}' (a function or namespace body)."""
    from .gen_trampoline import _after_template_parameters, _outside_parens

    words = _outside_parens(_after_template_parameters(head))
    # `operator==` and its kin name a function; their `=` starts no initialiser.
    initialised = "=" in words and "operator" not in words
    return initialised or any(w in words for w in ("struct", "class", "union", "enum"))


def drop_repeated_declarations(unit, internal):
    """The unit (address spaces already rewritten for the host) without the
    namespace-scope declarations that repeat an earlier one of the same
    namespace token for token. Metal code specialises and overloads on
    address spaces (`pointer_element<device T*>` beside
    `pointer_element<thread T*>`, MLX's steel/utils/type_traits.h); with one
    address space those are one declaration, of one meaning, and the first
    stands for all. The removed text is blanked, so line numbers stay."""
    lines = unit.split("\n")
    kernel = [k for _, k in _regions(unit, internal)] + [False]
    tokens = _kernel_tokens(lines, kernel)
    closing = {"(": ")", "[": "]", "{": "}"}
    seen, scopes, drop = set(), [], []
    start = i = 0
    while i < len(tokens):
        t = tokens[i][0]
        if i == start and t == "namespace":
            j = i + 1
            while j < len(tokens) and tokens[j][0] not in ("{", ";"):
                j += 1
            if j < len(tokens) and tokens[j][0] == "{":
                scopes.append(tuple(x[0] for x in tokens[i + 1 : j]))
                i = start = j + 1
                continue
        if i == start and t == "}":
            scopes.pop()
            i = start = i + 1
            continue
        if t in closing:
            level = 0
            while i < len(tokens):
                level += tokens[i][0] == t
                level -= tokens[i][0] == closing[t]
                i += 1
                if level == 0:
                    break
            if t != "{":
                continue
            head = [x[0] for x in tokens[start:i]]
            if _runs_to_semicolon(head[: head.index("{")]):
                while i < len(tokens) and tokens[i][0] != ";":
                    i += 1
                i += 1
        elif t == ";":
            i += 1
        else:
            i += 1
            continue
        decl = (tuple(scopes), tuple(x[0] for x in tokens[start:i]))
        if decl in seen:
            drop.append((tokens[start], tokens[i - 1]))
        seen.add(decl)
        start = i
    for (_, l0, c0), (last, l1, c1) in drop:
        for n in range(l0, l1 + 1):
            a = c0 if n == l0 else 0
            b = c1 + len(last) if n == l1 else len(lines[n])
            lines[n] = lines[n][:a] + " " * (b - a) + lines[n][b:]
    return "\n".join(lines)


_CLASS_KEYS = ("struct", "class", "union")
_ACCESS = ("public", "private", "protected")


def member_specializations_as_overloads(unit, internal):
    """The unit with each explicit specialization of a member function
    template declared in its class (`template <> R f(Args...)` in the class
    body, which MLX's reduction/ops.h writes and Metal's compiler accepts,
    C++17 [CWG 727]) made a plain member overload `R f(Args...)`: g++ does
    not implement declaring the specialization there. For every call that
    compiles either way the overload and the specialization are the same
    function: a call whose arguments deduce exactly Args to the template
    selects the specialization, and prefers the non-template overload, an
    equally good match, over the template. The removed `template <>` is
    blanked, so line numbers stay."""
    lines = unit.split("\n")
    kernel = [k for _, k in _regions(unit, internal)] + [False]
    tokens = _kernel_tokens(lines, kernel)
    scopes, start, blank = [], 0, []  # scopes: is each open brace a class body
    i = 0
    while i < len(tokens):
        t = tokens[i][0]
        if t == "{":
            words = list(_outside_parens_tokens(x[0] for x in tokens[start:i]))
            scopes.append("=" not in words and any(w in _CLASS_KEYS for w in words))
            start = i + 1
        elif t == "}":
            if scopes:
                scopes.pop()
            start = i + 1
        elif t == ";" or (t == ":" and tokens[i - 1][0] in _ACCESS):
            start = i + 1
        elif (
            i == start
            and scopes
            and scopes[-1]
            and t == "template"
            and [x[0] for x in tokens[i + 1 : i + 3]] == ["<", ">"]
            and (i + 3 >= len(tokens) or tokens[i + 3][0] not in _CLASS_KEYS)
        ):
            blank += tokens[i : i + 3]
        i += 1
    for tok, n, col in blank:
        lines[n] = lines[n][:col] + " " * len(tok) + lines[n][col + len(tok):]
    return "\n".join(lines)


def _outside_parens_tokens(tokens):
    depth = 0
    for t in tokens:
        depth += t in ("(", "[")
        depth -= t in (")", "]")
        if depth == 0 and t not in (")", "]"):
            yield t
