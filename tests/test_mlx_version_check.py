"""An install whose MLX differs from the one the package was built against
fails at import with both versions and the pip command that fixes it, not
with an undefined symbol.

The mismatch is faked without touching the installed package: a copy of it
gets a _build_info.py recording other versions, and a fresh interpreter
imports the copy first."""

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import pytest

import mlx_fused_attn
from mlx_fused_attn import _build_info, _mlx_match

PACKAGE = Path(mlx_fused_attn.__file__).parent


def has_metadata(name):
    try:
        return bool(importlib.metadata.version(name))
    except importlib.metadata.PackageNotFoundError:
        return False


# An MLX built from source has no package metadata, and nothing is compared.
pytestmark = pytest.mark.skipif(
    not has_metadata("mlx"), reason="mlx has no package metadata (built from source)"
)


def import_with_build_info(tmp_path, **recorded):
    """Imports a copy of the package whose _build_info.py records `recorded`
    in place of this build's values; returns the finished process."""
    copy = tmp_path / "mlx_fused_attn"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    # The copy's libraries find libmlx through their rpath, ../mlx/lib.
    (tmp_path / "mlx").symlink_to(Path(mx.__file__).parent, target_is_directory=True)
    values = {
        "MLX_VERSION": _build_info.MLX_VERSION,
        "MLX_BACKEND": _build_info.MLX_BACKEND,
        "MLX_BACKEND_VERSION": _build_info.MLX_BACKEND_VERSION,
        **recorded,
    }
    (copy / "_build_info.py").write_text(
        "".join(f"{name} = {value!r}\n" for name, value in values.items())
    )
    code = "import mlx_fused_attn, sys; sys.stdout.write(mlx_fused_attn.__file__)"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
    )


def test_the_build_recorded_the_installed_mlx():
    assert _build_info.MLX_VERSION, "CMake did not record the mlx version"
    assert _build_info.MLX_BACKEND, "CMake did not find MLX's backend package"
    assert _build_info.MLX_BACKEND_VERSION == _build_info.MLX_VERSION
    assert mlx_fused_attn.build_info()["built_against"] == (
        f"mlx {_build_info.MLX_VERSION}, {_build_info.MLX_BACKEND} "
        f"{_build_info.MLX_BACKEND_VERSION}"
    )


def test_the_copy_imports_when_nothing_differs(tmp_path):
    result = import_with_build_info(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(str(tmp_path)), "the copy was not the one imported"


@pytest.mark.parametrize(
    "recorded",
    [
        {"MLX_VERSION": "0.31.9", "MLX_BACKEND_VERSION": "0.31.9"},
        {"MLX_BACKEND_VERSION": "0.31.9"},
    ],
    ids=["both", "backend-only"],
)
def test_another_mlx_version_fails_with_the_fix(tmp_path, recorded):
    result = import_with_build_info(tmp_path, **recorded)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: mlx_fused_attn was built against"), result.stderr
    built_mlx = recorded.get("MLX_VERSION", _build_info.MLX_VERSION)
    backend = _build_info.MLX_BACKEND
    assert f"mlx {built_mlx}, {backend} 0.31.9" in last
    assert f"has mlx {_build_info.MLX_VERSION}, {backend} {_build_info.MLX_BACKEND_VERSION}" in last
    assert f'pip install "mlx=={built_mlx}" "{backend}==0.31.9"' in last
    assert "undefined symbol" not in result.stderr


def test_a_missing_backend_package_is_named(tmp_path):
    result = import_with_build_info(
        tmp_path, MLX_BACKEND="mlx-not-installed", MLX_BACKEND_VERSION=_build_info.MLX_VERSION
    )
    assert result.returncode != 0
    assert "mlx-not-installed (not installed)" in result.stderr
    assert f'"mlx-not-installed=={_build_info.MLX_VERSION}"' in result.stderr


def test_an_undefined_symbol_becomes_the_readable_error():
    loader = ImportError(
        "/x/mlx_fused_attn/libmlx_fused_attn.so: undefined symbol: _ZN3mlx4core5arrayD1Ev"
    )
    error = _mlx_match.explain_load_error(loader, _build_info)
    assert "does not match the MLX library that was loaded" in str(error)
    assert "undefined symbol: _ZN3mlx4core5arrayD1Ev" in str(error)
    assert f'"mlx=={_build_info.MLX_VERSION}"' in str(error)


def test_other_load_errors_pass_through():
    loader = ImportError("libmlx.so: cannot open shared object file")
    assert _mlx_match.explain_load_error(loader, _build_info) is loader
