"""Does the installed MLX match the one this package was built against?

MLX keeps no binary compatibility between releases, not even patch releases:
an ``_ext`` built against one MLX fails to load against another with only
``undefined symbol: ...``, and ``mlx`` and its backend package (mlx-cpu,
mlx-cuda-13, mlx-metal) of different versions cannot load each other. So
the package compares versions from package metadata, before anything loads
a library, and says which versions differ and the pip command that fixes it.
"""

from __future__ import annotations

import importlib.metadata as md

# Messages of a dynamic loader that failed to bind a symbol (glibc, macOS).
_SYMBOL_ERRORS = ("undefined symbol", "Symbol not found")


def _installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _built(build) -> list[tuple[str, str]]:
    """(package, version) pairs this build recorded, those it could."""
    pairs = [("mlx", build.MLX_VERSION), (build.MLX_BACKEND, build.MLX_BACKEND_VERSION)]
    return [(name, version) for name, version in pairs if name and version]


def _fix(build) -> str:
    rebuild = "rebuild mlx_fused_attn from source against the MLX you want"
    pairs = _built(build)
    if not pairs:
        return rebuild
    pins = " ".join(f'"{name}=={version}"' for name, version in pairs)
    return f"pip install {pins}  (or {rebuild})"


def _describe(pairs) -> str:
    return ", ".join(f"{name} {version or '(not installed)'}" for name, version in pairs)


def built_against(build) -> str:
    """The recorded packages as "mlx 0.32.4, mlx-cpu 0.32.4"."""
    return _describe(_built(build))


def check_installed_mlx(build) -> None:
    """Raises ImportError naming both sets of versions and the pip command
    that restores the built-against ones, when any recorded package is
    missing or at another version. Packages without metadata (an MLX built
    from source) are not compared."""
    built = _built(build)
    installed = [(name, _installed(name)) for name, _ in built]
    if all(have == want for (_, want), (_, have) in zip(built, installed)):
        return
    raise ImportError(
        f"mlx_fused_attn was built against {_describe(built)}, but this environment "
        f"has {_describe(installed)}. MLX's libraries only load against the exact "
        f"version they were built with. Fix: {_fix(build)}."
    )


def explain_load_error(error: ImportError, build) -> ImportError:
    """The ImportError to raise when ``_ext`` failed to load: a symbol the
    loader could not bind means an MLX other than the built-against one was
    found (say, through LD_LIBRARY_PATH), which the message says with the
    fix; any other failure is returned unchanged."""
    if not any(marker in str(error) for marker in _SYMBOL_ERRORS):
        return error
    installed = [(name, _installed(name)) for name, _ in _built(build)]
    return ImportError(
        f"mlx_fused_attn's extension does not match the MLX library that was "
        f"loaded ({error}). It was built against "
        f"{built_against(build) or 'an MLX without package metadata'}; "
        f"installed: {_describe(installed)}. Make sure no other libmlx comes first "
        f"on LD_LIBRARY_PATH / DYLD_LIBRARY_PATH. Fix: {_fix(build)}."
    )
