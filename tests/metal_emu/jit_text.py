"""The JIT texts of the kernel families as the build embeds them: the
sources cmake/metal.cmake lists, each flattened on its own by
cmake/flatten_source.py; and the one-kernel texts the JIT compiles at run
time (a family's text without its instantiations, plus the one line that
defines the kernel a call needs)."""

import glob
import os
import re
import sys

from . import emu

sys.path.insert(0, os.path.join(emu.REPO_ROOT, "cmake"))
import flatten_source  # noqa: E402


def metal_sources():
    """The .metal files cmake/metal.cmake embeds (its file(GLOB) of the
    family folders), by family name."""
    with open(os.path.join(emu.REPO_ROOT, "cmake", "metal.cmake")) as fh:
        listed = re.search(r"file\(GLOB FA_METAL_SOURCES CONFIGURE_DEPENDS(.*?)\)", fh.read(), re.S).group(1).split()
    patterns = [s.replace("${PROJECT_SOURCE_DIR}", emu.REPO_ROOT) for s in listed]
    paths = sorted(p for pattern in patterns for p in glob.glob(pattern))
    return {os.path.splitext(os.path.basename(p))[0]: p for p in paths}


def family_text(family):
    """The ASCII text the JIT compiles for `family`."""
    ((_, _, text),) = flatten_source.family_texts([metal_sources()[family]], [emu.REPO_ROOT])
    text.encode("ascii")
    return text


def kernel_text(family, kernel):
    """The one-kernel text the JIT compiles for `kernel` of `family`."""
    return flatten_source.instance_text(family_text(family), kernel)


def instances(family):
    """[(kernel names, instantiation line)] of `family`'s text, in order."""
    return flatten_source.split_instances(family_text(family))[1]


def _write(name, text):
    """`text` as a .metal file at a stable path under the emulator's build
    directory, so that tests share its build."""
    directory = os.path.join(emu.BUILD_DIR, "jit")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}.metal")
    if not os.path.exists(path) or open(path).read() != text:
        # Published by rename: tests in other processes may read it.
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    return path


def write_family(family, suffix="", tag=""):
    """`family`'s JIT text (plus `suffix`) as a .metal file."""
    return _write(f"{family}{tag}_jit", family_text(family) + suffix)


def write_kernel(family, kernel):
    """The one-kernel JIT text of `kernel` of `family` as a .metal file."""
    return _write(f"{family}_jit_{kernel}", kernel_text(family, kernel))
