"""The attributes of the kernel code of a preprocessed Metal translation unit,
read from its text: stock clang drops Metal's attributes ([[kernel]],
[[buffer(n)]], [[function_constant(n)]], ...) as unknown, so they never
reach its AST. Part of the conformance pass (conformance.py), whose rules
`attribute`, `kernel-argument`, `argument-index` and `function-constant`
this module finds; what is allowed is metal_vocabulary.py's.
"""

import bisect
import re
from dataclasses import dataclass

if __package__:
    from . import metal_source, metal_vocabulary
else:  # imported by conformance.py run as a script
    from metal_emu import metal_source, metal_vocabulary

_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z_]\w*|\d[\w.\']*|::|\S')
_INDEX = re.compile(r"\d+")
_LOCATORS = {**metal_vocabulary.ARGUMENT_INDEXES, **metal_vocabulary.ARGUMENT_BUILTINS}
_ANYWHERE = {
    **metal_vocabulary.FUNCTION_ATTRIBUTES, **metal_vocabulary.FUNCTION_CONSTANT,
    **_LOCATORS,
}


@dataclass(frozen=True)
class Attribute:
    name: str
    args: str  # the text between its parentheses, "" without
    offset: int  # of its name in the kernel text


@dataclass(frozen=True)
class Issue:
    offset: int
    rule: str
    message: str


class KernelText:
    """The kernel-code lines of a preprocessed unit, other lines left empty so
    that offsets map back to (path, line, column)."""

    def __init__(self, preprocessed, internal, masked=()):
        lines, self.origins = [], []
        for line, origin in metal_source.line_origins(preprocessed, internal):
            code = origin[0] == "code" and origin[3] and not line.lstrip().startswith("#")
            lines.append(line if code else "")
            self.origins.append(origin)
        self.starts = []
        offset = 0
        for line in lines:
            self.starts.append(offset)
            offset += len(line) + 1
        self.text = "\n".join(lines)
        # Text the pass itself put into kernel code (the emulator's spelling
        # of a threadgroup array) is blanked, not read as the kernel's own.
        for text in masked:
            self.text = self.text.replace(text, " " * len(text))

    def locate(self, offset):
        i = bisect.bisect_right(self.starts, offset) - 1
        _, path, line, _ = self.origins[i]
        return path, line, offset - self.starts[i] + 1


def _tokens(text):
    return [(m.group(), m.start()) for m in _TOKEN.finditer(text)]


def _close(tokens, i):
    """The index past the bracket that closes tokens[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth = 0
    for j in range(i, len(tokens)):
        t = tokens[j][0]
        if t in pairs:
            depth += 1
        elif t in pairs.values():
            depth -= 1
            if depth == 0:
                return j + 1
    return len(tokens)


def _items(tokens, text):
    """Attributes in tokens (the inside of [[...]] or __attribute__((...)))."""
    items, start, depth = [], 0, 0
    for j, (t, _) in enumerate(tokens + [(",", None)]):
        depth += t == "("
        depth -= t == ")"
        if t == "," and depth == 0:
            item = tokens[start:j]
            start = j + 1
            if not item:
                continue
            name_end = 0
            while name_end < len(item) and item[name_end][0] != "(":
                name_end += 1
            name = "".join(t for t, _ in item[:name_end])
            args = ""
            if name_end < len(item):
                args = text[item[name_end][1] + 1 : item[-1][1]].strip()
            items.append(Attribute(name.strip("_"), args, item[0][1]))
    return items


def _groups(tokens, text):
    """(first token, past the last token, attributes) of every [[...]] and
    __attribute__((...)) group."""
    groups, i = [], 0
    while i < len(tokens):
        t, offset = tokens[i]
        adjacent = i + 1 < len(tokens) and tokens[i + 1][1] == offset + 1
        if t == "[" and adjacent and tokens[i + 1][0] == "[":
            end = _close(tokens, i)
            groups.append((i, end, _items(tokens[i + 2 : end - 2], text)))
            i = end
        elif t == "__attribute__" and i + 1 < len(tokens) and tokens[i + 1][0] == "(":
            end = _close(tokens, i + 1)
            groups.append((i, end, _items(tokens[i + 3 : end - 2], text)))
            i = end
        else:
            i += 1
    return groups


def _parameters(tokens, open_paren):
    """(first, past the last) token index of each parameter of the list that
    opens at tokens[open_paren]."""
    params, start, depth = [], open_paren + 1, 0
    end = _close(tokens, open_paren) - 1
    for j in range(open_paren + 1, end + 1):
        t = tokens[j][0]
        if j == end or (t == "," and depth == 0):
            if j > start:
                params.append((start, j))
            start = j + 1
        elif t in "([<{":
            depth += 1
        elif t in ")]>}":
            depth -= 1
    return params


def check(kernel_text):
    """The Issues of one unit's kernel text."""
    text = kernel_text.text
    tokens = _tokens(text)
    groups = _groups(tokens, text)
    issues = []
    in_parameters = set()  # group start indexes read as kernel arguments
    constants = {}  # function-constant index -> offset of its first use
    for g, (start, end, attrs) in enumerate(groups):
        if not any(a.name == "kernel" for a in attrs):
            continue
        # An explicit instantiation (`template [[host_name]] [[kernel]]
        # decltype(f<...>) f<...>;`) has no parameter list of its own.
        first = start
        while g > 0 and groups[g - 1][1] == first:
            g -= 1
            first = groups[g][0]
        if first > 0 and tokens[first - 1][0] == "template":
            continue
        paren = end
        while paren < len(tokens) and tokens[paren][0] not in ("(", ";", "{"):
            paren += 1
        if paren == len(tokens) or tokens[paren][0] != "(":
            continue
        name = tokens[paren - 1][0]
        issues += _check_arguments(name, tokens, paren, groups, in_parameters)
    for start, _, attrs in groups:
        if start in in_parameters:
            continue
        for a in attrs:
            if a.name not in _ANYWHERE:
                issues.append(Issue(a.offset, "attribute", f"[[{a.name}]]"))
            elif a.name == "function_constant":
                if not _INDEX.fullmatch(a.args):
                    issues.append(Issue(a.offset, "function-constant",
                                        f"function_constant({a.args}): the index must be an "
                                        "integer literal"))
                elif a.args in constants:
                    issues.append(Issue(a.offset, "function-constant",
                                        f"function_constant({a.args}) is used twice in the "
                                        "translation unit"))
                else:
                    constants[a.args] = a.offset
    return issues


def _check_arguments(kernel, tokens, paren, groups, in_parameters):
    issues, indexes = [], {}
    by_start = {start: (end, attrs) for start, end, attrs in groups}
    for first, last in _parameters(tokens, paren):
        attrs = []
        for j in range(first, last):
            if j in by_start:
                in_parameters.add(j)
                attrs += by_start[j][1]
        where = f"kernel '{kernel}', argument"
        for a in attrs:
            if a.name not in _LOCATORS and a.name != "function_constant":
                issues.append(Issue(a.offset, "kernel-argument",
                                    f"{where} [[{a.name}]] is not a kernel argument attribute"))
        locators = [a for a in attrs if a.name in _LOCATORS]
        if len(locators) > 1:
            issues.append(Issue(tokens[first][1], "kernel-argument",
                                f"{where} has more than one [[buffer(n)]], "
                                "[[threadgroup(n)]] or builtin attribute"))
        if len(locators) != 1:
            continue
        a = locators[0]
        if a.name not in metal_vocabulary.ARGUMENT_INDEXES:
            continue
        if not _INDEX.fullmatch(a.args):
            issues.append(Issue(a.offset, "argument-index",
                                f"{where} [[{a.name}({a.args})]]: the index must be an "
                                "integer literal"))
        elif (a.name, a.args) in indexes:
            issues.append(Issue(a.offset, "argument-index",
                                f"{where} [[{a.name}({a.args})]] is used twice in the kernel"))
        else:
            indexes[(a.name, a.args)] = a.offset
    return issues
