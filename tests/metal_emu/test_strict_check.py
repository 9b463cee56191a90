"""The strict syntax pass (strict_check.py) over every Metal source in the
repository, and its negative self-test."""

import glob
import os
import re

import pytest

from . import strict_check

CLANG = strict_check.find_clang()
pytestmark = pytest.mark.skipif(
    CLANG is None, reason="clang++ is not installed (apt-get install -y clang); CI installs it"
)

SOURCES = sorted(
    glob.glob(os.path.join(strict_check.REPO_ROOT, "mlx_fused_attn", "families", "*", "*.metal"))
    + glob.glob(os.path.join(strict_check.EMU_DIR, "kernels", "*.metal"))
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: os.path.relpath(p, strict_check.REPO_ROOT))
def test_source_passes(path):
    ok, diagnostics = strict_check.check(path, CLANG)
    assert ok, diagnostics


def test_mixed_address_spaces_fail():
    path = os.path.join(strict_check.EMU_DIR, "kernels", "strict_fail", "address_space_mix.metal")
    ok, diagnostics = strict_check.check(path, CLANG)
    assert not ok
    with open(path) as fh:
        marked = {n for n, line in enumerate(fh, 1) if "// MIXES" in line}
    reported = {
        int(m) for m in re.findall(r"address_space_mix\.metal:(\d+):\d+: error", diagnostics)
    }
    assert len(marked) == 7 and reported == marked, diagnostics
