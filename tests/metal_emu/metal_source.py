"""Reading Metal source text the way the emulator and the strict pass need:
which lines of a preprocessed translation unit are kernel code, how Metal's
address-space qualifiers are rewritten there, and the threadgroup-array
declarations the emulator must know about.
"""

import re


class SourceError(Exception):
    """The source uses a form the emulator cannot run faithfully."""


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


_RAW_THREADGROUP_ARRAY = re.compile(
    r"(?<![\w])threadgroup\s+(?:const\s+)?[A-Za-z_][\w:<>, ]*?\s+([A-Za-z_]\w*)\s*\["
)
_SHARED_ARRAY = re.compile(r"FA_SHARED_ARRAY_DECL\s+[^;]*?\b([A-Za-z_]\w*)\s*\[")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def scan_source(text, path):
    """Returns the names of FA_SHARED_ARRAY_DECL arrays in one source file.

    Raises SourceError for a threadgroup array declared with a bare
    `threadgroup`: on the host that would give every thread its own copy.
    """
    text = _COMMENT.sub(" ", text)
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = _RAW_THREADGROUP_ARRAY.search(line)
        if m:
            raise SourceError(
                f"{path}: threadgroup array '{m.group(1)}' is declared with a bare "
                "`threadgroup`; declare it with FA_SHARED_ARRAY_DECL so the "
                "emulator can share it between the threads of a threadgroup"
            )
    return _SHARED_ARRAY.findall(text)
