#!/usr/bin/env python3
"""Compiles the Metal host code of mlx_fused_attn on Linux, against MLX's
macOS headers, so that a mistake in it fails CI and not only a Mac build.

The Metal kernels are verified on Linux by the emulator (tests/metal_emu);
this checks the other half: the host sources that only a macOS build
compiles (mlx_fused_attn/backend/metal/*.cpp and the generated JIT-source
file). Each is compiled with `clang++ -fsyntax-only` against

- the headers of the `mlx-metal` wheel of the MLX version pyproject.toml pins
  (MLX's core headers, its Metal backend headers and metal-cpp), downloaded
  from PyPI with pip and cached under ~/.cache/mlx_fused_attn/;
- stubs of the Apple system headers that metal-cpp includes
  (tests/metal_host/stubs/: declarations only);
- the flags of the macOS CMake build, read from MLX's CMake config in the
  wheel, CMakeLists.txt and cmake/metal.cmake: the language standard, MLX's
  definitions (-D_METAL_, ...) and the package's definitions, in each
  configuration (JIT only; with the AOT metallib).

Usage: check_metal_host.py (prints each compile and its diagnostics)

Exit status: 0 everything compiles; 1 a source fails, or the build files say
something this check does not understand; 77 the check cannot run here (no
clang++, or PyPI unreachable), with the reason on stderr.
"""

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

REPO = pathlib.Path(__file__).resolve().parents[2]
STUBS = pathlib.Path(__file__).resolve().parent / "stubs"
METAL_CMAKE = REPO / "cmake" / "metal.cmake"
TOP_CMAKE = REPO / "CMakeLists.txt"
# The Metal host sources: the backend's own and each kernel family's.
HOST_ROOT = REPO
HOST_GLOBS = ("mlx_fused_attn/backend/metal/*.cpp", "mlx_fused_attn/families/*/metal/*.cpp")
# The library target that the Metal host sources are compiled into.
TARGET = "mlx_fused_attn"
# The runner of .github/workflows/macos.yml: macOS 14 on arm64.
WHEEL_PLATFORM = "macosx_14_0_arm64"
# Printed by `pip -vv` when it cannot reach an index (as opposed to a
# version or platform that does not exist, which is a real failure).
NETWORK_ERRORS = ("connection error", "Max retries exceeded", "ProxyError", "timed out")
EXIT_UNAVAILABLE = 77


class Unavailable(Exception):
    """The check cannot run on this machine (a skip, not a failure)."""


class SetupError(Exception):
    """The build files or the wheel are not what this check understands."""


@dataclasses.dataclass
class Config:
    name: str
    defines: list


@dataclasses.dataclass
class Toolchain:
    clang: str
    flags: list  # all but the configuration's definitions and the source
    configs: list  # of Config


# ---- MLX's macOS headers, from the mlx-metal wheel --------------------------


def pinned_mlx_version():
    text = (REPO / "pyproject.toml").read_text()
    versions = set(re.findall(r'"mlx(?:\[[\w,]+\])?==([0-9][0-9A-Za-z.]*)', text))
    if len(versions) != 1:
        pins = sorted(versions) or "nothing"
        raise SetupError(f"pyproject.toml pins MLX to {pins}; expected one version")
    return versions.pop()


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "mlx_fused_attn"


def download_wheel(version, dest):
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps",
        "--only-binary=:all:", "--platform", WHEEL_PLATFORM,
        # pip tells that an index was unreachable only in its debug log.
        "-vv", "--dest", str(dest), f"mlx-metal=={version}",
    ]  # fmt: skip
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"pip download mlx-metal=={version} ran over 10 minutes") from None
    if r.returncode != 0:
        lines = (r.stdout + r.stderr).splitlines()
        log = [s for s in lines if "ERROR" in s or "Could not fetch" in s] or lines[-20:]
        unreachable = [s for s in log if any(m in s for m in NETWORK_ERRORS)]
        if unreachable:
            raise Unavailable(f"PyPI is unreachable (mlx-metal=={version}): {unreachable[0]}")
        raise SetupError(f"`{' '.join(cmd)}` failed:\n" + "\n".join(log))
    (wheel,) = pathlib.Path(dest).glob("*.whl")
    return wheel


def mlx_metal_prefix(version):
    """The `mlx` directory of the mlx-metal wheel (include/, share/cmake/MLX/),
    downloaded and unpacked once."""
    prefix = cache_dir() / f"mlx-metal-{version}" / "mlx"
    if prefix.is_dir():
        return prefix
    cache_dir().mkdir(parents=True, exist_ok=True)
    # Unpacked beside the cache entry and renamed into place, so that an
    # interrupted or concurrent run never sees a partial copy.
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        wheel = download_wheel(version, pathlib.Path(tmp) / "wheel")
        unpacked = pathlib.Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheel) as z:
            wanted = ("mlx/include/", "mlx/share/cmake/MLX/")
            members = [m for m in z.namelist() if m.startswith(wanted) and ".." not in m.split("/")]
            z.extractall(unpacked, members)
        for needed in (
            "include/mlx/backend/metal/device.h",
            "include/metal_cpp/Metal/Metal.hpp",
            "share/cmake/MLX/MLXConfig.cmake",
            "share/cmake/MLX/MLXTargets.cmake",
        ):
            if not (unpacked / "mlx" / needed).is_file():
                raise SetupError(f"{wheel.name} has no mlx/{needed}")
        prefix.parent.mkdir(exist_ok=True)
        try:
            (unpacked / "mlx").rename(prefix)
        except OSError:
            if not prefix.is_dir():  # not merely another run that finished first
                raise
    return prefix


# ---- What CMake would pass to the compiler ----------------------------------


def cmake_commands(path):
    """(lower-case name, [arguments]) of each command in a CMake file: enough
    CMake for the flat commands these files use (arguments split at blanks,
    no parentheses inside them)."""
    text = re.sub(r"#[^\n]*", "", path.read_text())
    return [(n.lower(), args.split()) for n, args in re.findall(r"(\w+)\s*\(([^()]*)\)", text)]


def cmake_condition(words, path):
    """An if() over one literal constant, as configure_file leaves them in
    MLX's config (`if (ON)`); ["NOT", ...] stands for its else()."""
    if words[:1] == ["NOT"]:
        return not cmake_condition(words[1:], path)
    if len(words) == 1 and words[0].upper() in ("ON", "TRUE", "1", "OFF", "FALSE", "0"):
        return words[0].upper() in ("ON", "TRUE", "1")
    raise SetupError(f"{path}: cannot evaluate if({' '.join(words)}) around MLX_CXX_FLAGS")


def mlx_usage_requirements(prefix):
    """(C++ standard level, include flags, compile options) that the imported
    `mlx` target passes to its users: MLXTargets.cmake and MLXConfig.cmake."""
    targets = prefix / "share" / "cmake" / "MLX" / "MLXTargets.cmake"
    text = targets.read_text()
    std = re.search(r'INTERFACE_COMPILE_FEATURES "cxx_std_(\d+)"', text)
    dirs = re.search(r'INTERFACE_INCLUDE_DIRECTORIES "([^"]*)"', text)
    if not std or not dirs:
        raise SetupError(f"{targets}: no cxx_std_NN compile feature or include directories")
    includes = []
    for d in dirs.group(1).split(";"):
        d = d.replace("${_IMPORT_PREFIX}", str(prefix))
        if "$" in d:
            raise SetupError(f"{targets}: include directory {d} names an unknown variable")
        # An imported target's include directories are system directories.
        if d not in includes:
            includes += ["-isystem", d]

    config = prefix / "share" / "cmake" / "MLX" / "MLXConfig.cmake"
    if not re.search(r'INTERFACE_COMPILE_OPTIONS "\$\{MLX_CXX_FLAGS\}"', config.read_text()):
        raise SetupError(f"{config}: the mlx target's compile options are not MLX_CXX_FLAGS")
    options, conditions = [], []
    for name, args in cmake_commands(config):
        if name == "if":
            conditions.append(args)
        elif name == "else":
            conditions.append(["NOT", *conditions.pop()])
        elif name == "elseif":
            raise SetupError(f"{config}: this check does not evaluate elseif()")
        elif name == "endif":
            conditions.pop()
        elif name == "set" and args[:1] == ["MLX_CXX_FLAGS"]:
            if all(cmake_condition(c, config) for c in conditions):
                options += [a for a in args[1:] if a != "${MLX_CXX_FLAGS}"]
    if "-D_METAL_" not in options:
        raise SetupError(f"{config}: MLX_CXX_FLAGS has no -D_METAL_; not a Metal build of MLX")
    return int(std.group(1)), includes, options


def package_standard():
    """(CMAKE_CXX_STANDARD, whether GNU extensions are on) of CMakeLists.txt."""
    level, extensions = None, True
    for name, args in cmake_commands(TOP_CMAKE):
        if name == "set" and args[:1] == ["CMAKE_CXX_STANDARD"]:
            level = int(args[1])
        elif name == "set" and args[:1] == ["CMAKE_CXX_EXTENSIONS"]:
            extensions = args[1].upper() in ("ON", "TRUE", "1")
    if level is None:
        raise SetupError(f"{TOP_CMAKE}: no CMAKE_CXX_STANDARD")
    return level, extensions


def package_configs():
    """metal.cmake's definitions come with the AOT metallib; a build without
    `xcrun metal` has none of them. Both configurations are compiled."""
    defines = []
    for name, args in cmake_commands(METAL_CMAKE):
        if name == "target_compile_definitions" and args[:1] == [TARGET]:
            defines += ["-D" + a for a in args[1:] if a not in ("PRIVATE", "PUBLIC", "INTERFACE")]
    return [Config("jit-only", [])] + ([Config("metallib", defines)] if defines else [])


def prepare():
    """Finds clang++, fetches MLX's macOS headers and works out the flags.
    Raises Unavailable or SetupError."""
    clang = shutil.which("clang++")
    if clang is None:
        raise Unavailable("clang++ is not installed (apt-get install clang)")
    prefix = mlx_metal_prefix(pinned_mlx_version())
    mlx_level, mlx_includes, mlx_options = mlx_usage_requirements(prefix)
    level, extensions = package_standard()
    # CMake raises CMAKE_CXX_STANDARD to what a linked target requires (MLX
    # asks for cxx_std_20), so the macOS build compiles as gnu++20.
    std = f"-std={'gnu' if extensions else 'c'}++{max(level, mlx_level)}"
    flags = [
        "-fsyntax-only",
        std,
        # Apple's clang enables blocks on Darwin; metal-cpp declares block
        # types (NSNotification.hpp, NSProcessInfo.hpp).
        "-fblocks",
        # Not a flag of the macOS build: a definition that matches no earlier
        # declaration (a typo in the name or a parameter of a function that
        # backend/gpu.h declares) would otherwise compile here and fail only
        # when the library is linked on a Mac.
        "-Werror=missing-prototypes",
        # CMake defines this for every source of a SHARED library.
        f"-D{TARGET}_EXPORTS",
        *mlx_options,
        # The package's one include root.
        "-I", str(REPO),
        # Before MLX's, so that no Linux header of the same name is found.
        "-isystem", str(STUBS),
        *mlx_includes,
    ]  # fmt: skip
    return Toolchain(clang, flags, package_configs())


# ---- The sources -------------------------------------------------------------


def expand(word, variables, path):
    """The words that `word` stands for; `variables` maps a name to the
    argument lists of its set() commands, expanded here, where used."""

    def value(m):
        sets = variables.get(m.group(1), [])
        if len(sets) != 1:
            # Unknown, or set in branches this check does not evaluate.
            raise SetupError(f"{path}: cannot expand ${{{m.group(1)}}} (set {len(sets)} times)")
        return " ".join(w for v in sets[0] for w in expand(v, variables, path))

    return re.sub(r"\$\{(\w+)\}", value, word.strip('"')).split()


def glob_paths(pattern):
    """The files an absolute CMake file(GLOB) pattern matches."""
    path = pathlib.Path(pattern)
    return pathlib.Path(path.anchor).glob(str(path.relative_to(path.anchor)))


def host_sources(build_dir):
    """Each source that cmake/metal.cmake adds to the library (a generated one
    made in `build_dir` by its custom command, as CMake would), and each .cpp
    under mlx_fused_attn/backend/metal/ and mlx_fused_attn/families/*/metal/.
    Returns (sources, problems)."""
    variables = {
        "PROJECT_SOURCE_DIR": [[str(REPO)]],
        "CMAKE_CURRENT_SOURCE_DIR": [[str(REPO)]],
        "CMAKE_CURRENT_BINARY_DIR": [[str(build_dir)]],
        "Python_EXECUTABLE": [[sys.executable]],
    }
    listed, generators = [], []
    for name, args in cmake_commands(METAL_CMAKE):
        if name == "set" and args:
            variables.setdefault(args[0], []).append(args[1:])
        elif name == "file" and args[:1] == ["GLOB"]:
            patterns = [a for a in args[2:] if a not in ("CONFIGURE_DEPENDS", "LIST_DIRECTORIES", "true", "false")]
            found = sorted(str(p) for a in patterns for w in expand(a, variables, METAL_CMAKE) for p in glob_paths(w))
            variables.setdefault(args[1], []).append(found)
        elif name == "add_custom_command" and args[:1] == ["OUTPUT"]:
            command = args[args.index("COMMAND") + 1 :]
            keywords = ("DEPENDS", "COMMENT", "WORKING_DIRECTORY", "VERBATIM", "BYPRODUCTS")
            ends = [i for i, word in enumerate(command) if word in keywords]
            generators.append((args[1], command[: ends[0]] if ends else command))
        elif name == "target_sources" and args[:1] == [TARGET]:
            listed += [a for a in args[1:] if a not in ("PRIVATE", "PUBLIC", "INTERFACE")]

    made_by = {}
    for output, command in generators:
        # Only the commands that make a host source: the others (the
        # metallibs, made in a foreach() this reader does not evaluate) are
        # no business of this check.
        if output not in listed:
            continue
        for out in expand(output, variables, METAL_CMAKE):
            made_by[out] = [w for a in command for w in expand(a, variables, METAL_CMAKE)]
    sources, problems = [], []
    for word in listed:
        for src in expand(word, variables, METAL_CMAKE):
            if src in made_by:
                cmd = made_by[src]
                r = subprocess.run(cmd, capture_output=True, text=True, cwd=build_dir)
                if r.returncode != 0 or not pathlib.Path(src).is_file():
                    problems.append(f"`{' '.join(cmd)}` did not make {src}:\n{r.stdout}{r.stderr}")
                    continue
            elif not pathlib.Path(src).is_file():
                problems.append(f"{METAL_CMAKE} compiles {src}, which does not exist")
                continue
            sources.append(pathlib.Path(src).resolve())
    for cpp in sorted(p for pattern in HOST_GLOBS for p in HOST_ROOT.glob(pattern)):
        if cpp.resolve() not in sources:
            problems.append(f"{METAL_CMAKE} does not compile {cpp}")
            sources.append(cpp.resolve())
    return sources, problems


def compile_source(tc, source, config, quote_dir=None):
    """Compiles one source in one configuration. `quote_dir`: the directory
    that a copy of a source stands in for, so that its "..." includes resolve
    as they do there."""
    cmd = [tc.clang, *tc.flags, *config.defines]
    if quote_dir is not None:
        cmd += ["-iquote", str(quote_dir)]
    return subprocess.run(cmd + [str(source)], capture_output=True, text=True)


def main():
    try:
        tc = prepare()
    except Unavailable as e:
        print(f"check_metal_host: cannot run here: {e}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except SetupError as e:
        print(f"check_metal_host: {e}", file=sys.stderr)
        return 1
    failed = 0
    with tempfile.TemporaryDirectory() as build_dir:
        try:
            sources, problems = host_sources(pathlib.Path(build_dir))
        except SetupError as e:
            print(f"check_metal_host: {e}", file=sys.stderr)
            return 1
        for source in sources:
            shown = source.relative_to(REPO) if source.is_relative_to(REPO) else source.name
            for config in tc.configs:
                r = compile_source(tc, source, config)
                print(f"{'ok  ' if r.returncode == 0 else 'FAIL'} {shown} [{config.name}]")
                sys.stdout.write(r.stderr)  # warnings too
                sys.stdout.flush()
                failed += r.returncode != 0
    for problem in problems:
        print(f"check_metal_host: {problem}", file=sys.stderr)
    if failed or problems:
        print(
            f"check_metal_host: {failed} compile(s) failed, {len(problems)} problem(s); "
            f"flags: {' '.join(tc.flags)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
