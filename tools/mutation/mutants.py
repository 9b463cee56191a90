"""The mutants of one C++ (or Metal) source: small, token-level changes of
the kind a slip of the keyboard makes, each on one line.

Comments, string and character literals and preprocessor directives other
than #define are never mutated. The sources are clang-formatted, which tells
binary operators from the same characters used otherwise: a binary operator
has a space on both sides (`a * b`, `i < n`), a pointer or reference
declarator or a template bracket does not (`T* q`, `Tile<T, 8>`), so only
operators with spaces around them are swapped.
"""

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the repository root, '/'-separated
    line: int  # 1-based
    start: int  # column span [start, end) of the replaced text in the line
    end: int
    replacement: str
    operator: str
    original_line: str
    occurrence: int  # 1 + earlier lines of the file with the same text


    @property
    def mutated_line(self):
        o = self.original_line
        return o[: self.start] + self.replacement + o[self.end :]

    def key(self):
        """What identifies the mutant across edits elsewhere in the file:
        the file, the line's text before and after, and which of the lines
        with that text it is (equivalents.json)."""
        return (self.path, self.original_line.strip(), self.mutated_line.strip(), self.occurrence)

    def apply(self, text):
        lines = text.split("\n")
        assert lines[self.line - 1] == self.original_line, (self.path, self.line)
        lines[self.line - 1] = self.mutated_line
        return "\n".join(lines)

    def describe(self):
        return f"{self.path}:{self.line} [{self.operator}]"


# Binary operators and what each becomes: arithmetic swaps, boundary
# changes, negated comparisons, swapped logic, compound assignments.
BINARY = {
    "+": ["-"],
    "-": ["+"],
    "*": ["/"],
    "/": ["*"],
    "%": ["/"],
    "<": ["<="],
    "<=": ["<"],
    ">": [">="],
    ">=": [">"],
    "==": ["!="],
    "!=": ["=="],
    "&&": ["||"],
    "||": ["&&"],
    "+=": ["-="],
    "-=": ["+="],
    "*=": ["/="],
    "<<": [">>"],
    ">>": ["<<"],
    "&": ["|"],
    "|": ["&"],
}
# Identifiers swapped for their counterpart.
SWAPS = {
    "min": "max",
    "max": "min",
    "fmin": "fmax",
    "fmax": "fmin",
    "simd_min": "simd_max",
    "simd_max": "simd_min",
    "true": "false",
    "false": "true",
}

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<comment>//[^\n]*|/\*.*?\*/)
      | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
      | (?P<number>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fFuUlL]*)
      | (?P<ident>[A-Za-z_]\w*)
      | (?P<op><<=|>>=|->|\+\+|--|&&|\|\||<=|>=|==|!=|\+=|-=|\*=|/=|%=|&=|\|=|\^=|<<|>>|::|[-+*/%<>=!&|^~?:;,.(){}\[\]\#\\])
    """,
    re.VERBOSE | re.DOTALL,
)
_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)")
# A whole one-line statement that only has an effect: an assignment (to a
# name, element or member) or a call. Declarations (two names before the
# `=`) and returns do not match.
_EFFECT_STATEMENT = re.compile(
    r"^\s*(?:[A-Za-z_][\w:]*(?:\s*(?:\[[^\]]*\]|\.\w+|->\w+))*\s*(?:[-+*/|&^]?=|\+\+|--)"
    r"|(?:\+\+|--)\w"
    r"|[A-Za-z_][\w:.]*(?:<[^;]*>)?\()[^;]*;\s*$"
)


def _tokens(text):
    """(kind, text, line, column) of every token, comments and strings
    included (as kinds to skip)."""
    line, line_start = 1, 0
    pos = 0
    out = []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # a stray character: skip it
            pos += 1
            continue
        kind = m.lastgroup
        out.append((kind, m.group(), line, pos - line_start))
        newlines = m.group().count("\n")
        if newlines:
            line += newlines
            line_start = m.start() + m.group().rfind("\n") + 1
        pos = m.end()
    return out


def _skipped_lines(lines):
    """Lines of preprocessor directives other than #define (with their
    continuations): includes, pragmas, conditionals."""
    skipped = set()
    continued = False
    for i, line in enumerate(lines, 1):
        m = _DIRECTIVE.match(line)
        if continued or (m and m.group(1) != "define"):
            skipped.add(i)
            continued = line.rstrip().endswith("\\")
        elif m:
            continued = False
    return skipped


def _balanced(s):
    return s.count("(") == s.count(")") and s.count("[") == s.count("]")


def mutants(path, text):
    """Every mutant of `text` (the file at `path`, repository-relative)."""
    lines = text.split("\n")
    skipped = _skipped_lines(lines)
    occurrence, seen = [], {}
    for line_text in lines:
        seen[line_text.strip()] = seen.get(line_text.strip(), 0) + 1
        occurrence.append(seen[line_text.strip()])
    out = []

    def add(line, col, old, new, operator):
        if line not in skipped:
            out.append(Mutant(path, line, col, col + len(old), new, operator, lines[line - 1],
                              occurrence[line - 1]))

    toks = [t for t in _tokens(text) if t[0] not in ("comment", "string")]
    for i, (kind, tok, line, col) in enumerate(toks):
        prev = toks[i - 1] if i > 0 else None
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if kind == "op" and tok in BINARY:
            spaced = (
                prev is not None and prev[0] == "space" and nxt is not None and nxt[0] == "space"
                and "\n" not in nxt[1]
            )
            if spaced:
                for new in BINARY[tok]:
                    add(line, col, tok, new, "operator")
        elif kind == "op" and tok == "!" and nxt is not None and nxt[0] in ("ident", "op"):
            add(line, col, tok, "", "negation")
        elif kind == "number" and re.fullmatch(r"\d+[uUlL]*", tok):
            digits = re.match(r"\d+", tok).group()
            suffix = tok[len(digits):]
            value = int(digits)
            add(line, col, tok, f"{value + 1}{suffix}", "constant")
            if value > 0:
                add(line, col, tok, f"{value - 1}{suffix}", "constant")
        elif kind == "ident" and tok in SWAPS:
            add(line, col, tok, SWAPS[tok], "swap")
    for i, line_text in enumerate(lines, 1):
        if _EFFECT_STATEMENT.match(line_text) and _balanced(line_text):
            stripped = line_text.lstrip()
            indent = len(line_text) - len(stripped)
            operator = "drop barrier" if "BARRIER" in stripped or "barrier" in stripped else "drop statement"
            add(i, indent, stripped, "", operator)
    return out
