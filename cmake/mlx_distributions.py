"""Prints "mlx_version;backend_package;backend_version" for the MLX that
CMake is about to build against, for the generated _build_info.py.

On Linux the `mlx` wheel holds only the Python module and libmlx comes from
one backend wheel (mlx-cpu, mlx-cuda-12, mlx-cuda-13); on macOS from
mlx-metal. The backend package is the installed distribution that ships
MLX's CMake config, so this names the library the build links. A field is
empty where no distribution metadata exists (an MLX built from source)."""

import importlib.metadata as md

CONFIG = "mlx/share/cmake/MLX/MLXConfig.cmake"


def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return ""


def backend_distribution():
    for dist in md.distributions():
        if any(str(f).replace("\\", "/") == CONFIG for f in dist.files or ()):
            return dist.metadata["Name"], dist.version
    return "", ""


if __name__ == "__main__":
    print(";".join([version("mlx"), *backend_distribution()]))
