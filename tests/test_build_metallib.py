"""cmake/build_metallib.py on Linux, against a fake `xcrun` first on PATH
that records its arguments and makes its -o file, or fails with a message:
the commands and flags (MLX's), a metallib a family, and a family that does
not compile leaving its compiler's message in a .log (exit 0) instead of
failing the build, unless strict. Then cmake/metal.cmake itself (where
cmake is installed): one metallib or log a family, built and installed, and
MLX_FUSED_ATTN_METAL_STRICT=ON failing the build."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "cmake" / "build_metallib.py"
SOURCE = REPO / "mlx_fused_attn" / "families" / "attention" / "attention.metal"
MESSAGE = "attention.metal:12:3: error: use of undeclared identifier 'simdgroup_oops'"

# A stand-in for xcrun: records the arguments of each metal and metallib
# call in $FAKE_XCRUN_RECORD and writes its -o file; FAKE_XCRUN_FAIL=TOOL or
# TOOL:WORD makes the calls of TOOL whose arguments hold WORD fail with
# $FAKE_XCRUN_MESSAGE. Other calls (CMake's own, on a Mac) go to the real one.
FAKE_XCRUN = textwrap.dedent(
    """\
    #!{python}
    import json, os, pathlib, shutil, sys
    args = sys.argv[1:]
    tool = args[2] if args[:2] == ["-sdk", "macosx"] and len(args) > 2 else None
    if tool == "--find":  # cmake/metal.cmake asking whether metal exists
        sys.exit(0)
    if tool not in ("metal", "metallib"):
        # CMake's own questions on a Mac (the SDK): the real xcrun answers.
        here = os.path.dirname(os.path.abspath(__file__))
        rest = [p for p in os.environ["PATH"].split(os.pathsep) if os.path.abspath(p) != here]
        real = shutil.which("xcrun", path=os.pathsep.join(rest))
        if real is None:
            sys.exit(f"fake xcrun: unexpected call {{args}}")
        os.execv(real, [real, *args])
    with open(os.environ["FAKE_XCRUN_RECORD"], "a") as f:
        f.write(json.dumps(args) + "\\n")
    failing = os.environ.get("FAKE_XCRUN_FAIL", "").split(":")
    if tool == failing[0] and failing[-1] in " ".join(args):
        sys.stderr.write(os.environ["FAKE_XCRUN_MESSAGE"] + "\\n")
        sys.exit(1)
    pathlib.Path(args[args.index("-o") + 1]).write_text(tool)
    """
)


@pytest.fixture
def fake_xcrun(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    xcrun = bin_dir / "xcrun"
    xcrun.write_text(FAKE_XCRUN.format(python=sys.executable))
    xcrun.chmod(0o755)
    return bin_dir


def build(tmp_path, bin_dir, on_error="warn", fail=None, extra=()):
    """Runs the script; returns (result, [xcrun argument lists], out dir)."""
    record = tmp_path / "record.jsonl"
    record.unlink(missing_ok=True)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env.update(FAKE_XCRUN_RECORD=str(record), FAKE_XCRUN_MESSAGE=MESSAGE)
    if fail:
        env["FAKE_XCRUN_FAIL"] = fail
    out = tmp_path / "lib"
    cmd = [
        sys.executable, str(SCRIPT), "--family", "attention", "--source", str(SOURCE),
        "-I", str(REPO), "--deployment-target", "14.0", "--output-dir", str(out),
        "--work-dir", str(tmp_path / "air"), "--on-error", on_error, *extra,
    ]  # fmt: skip
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = record.read_text().splitlines() if record.exists() else []
    calls = [json.loads(line) for line in lines]
    return r, calls, out


def test_compiles_and_links_with_mlx_flags(tmp_path, fake_xcrun):
    r, calls, out = build(tmp_path, fake_xcrun)
    assert r.returncode == 0, r.stderr
    compile_args, link_args = calls
    air = str(tmp_path / "air" / "attention.air")
    assert compile_args[:3] == ["-sdk", "macosx", "metal"]
    assert compile_args[-4:] == ["-c", str(SOURCE), "-o", air]
    for flag in (
        f"-I{REPO}",
        "-Wall",
        "-Wextra",
        "-fno-fast-math",
        "-Wno-c++17-extensions",
        "-Wno-c++20-extensions",
        "-Wmetal-addr-spaces",
        "-mmacosx-version-min=14.0",
    ):
        assert flag in compile_args, (flag, compile_args)
    # Debug flags only when asked.
    assert "-gline-tables-only" not in compile_args
    metallib = out / "mlx_fused_attn_attention.metallib"
    assert link_args == ["-sdk", "macosx", "metallib", air, "-o", str(metallib)]
    assert metallib.is_file()
    assert not (out / "mlx_fused_attn_attention.metallib.log").exists()


def test_debug_adds_line_tables(tmp_path, fake_xcrun):
    r, calls, _ = build(tmp_path, fake_xcrun, extra=["--debug"])
    assert r.returncode == 0, r.stderr
    assert {"-gline-tables-only", "-frecord-sources"} <= set(calls[0])


@pytest.mark.parametrize("tool", ["metal", "metallib"])
def test_failure_writes_the_log_and_does_not_fail_the_build(tmp_path, fake_xcrun, tool):
    out = tmp_path / "lib"
    out.mkdir()
    metallib = out / "mlx_fused_attn_attention.metallib"
    metallib.write_text("stale, from an earlier build")
    r, calls, _ = build(tmp_path, fake_xcrun, fail=tool)
    assert r.returncode == 0, r.stderr
    assert calls[-1][2] == tool
    assert not metallib.exists()
    log = (out / "mlx_fused_attn_attention.metallib.log").read_text()
    assert MESSAGE in log and f"xcrun -sdk macosx {tool}" in log, log
    # The build output says so, with the compiler's message.
    assert "warning: mlx_fused_attn: the attention kernels do not compile" in r.stderr
    assert MESSAGE in r.stderr


def test_success_removes_an_earlier_failure_log(tmp_path, fake_xcrun):
    build(tmp_path, fake_xcrun, fail="metal")
    r, _, out = build(tmp_path, fake_xcrun)
    assert r.returncode == 0, r.stderr
    assert (out / "mlx_fused_attn_attention.metallib").is_file()
    assert not (out / "mlx_fused_attn_attention.metallib.log").exists()


@pytest.mark.parametrize("tool", ["metal", "metallib"])
def test_strict_failure_fails_the_build(tmp_path, fake_xcrun, tool):
    r, _, out = build(tmp_path, fake_xcrun, on_error="fail", fail=tool)
    assert r.returncode != 0
    assert "MLX_FUSED_ATTN_METAL_STRICT=ON" in r.stderr and MESSAGE in r.stderr
    assert not (out / "mlx_fused_attn_attention.metallib").exists()


def test_missing_xcrun_is_a_family_failure(tmp_path):
    """No xcrun at all (PATH without it) is reported like a compile error."""
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "lib"
    cmd = [
        sys.executable, str(SCRIPT), "--family", "attention", "--source", str(SOURCE),
        "--deployment-target", "14.0", "--output-dir", str(out),
        "--work-dir", str(tmp_path / "air"), "--on-error", "warn",
    ]  # fmt: skip
    r = subprocess.run(cmd, env={"PATH": str(empty)}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "cannot run xcrun" in (out / "mlx_fused_attn_attention.metallib.log").read_text()


# ---- cmake/metal.cmake -------------------------------------------------------

# A project standing in for CMakeLists.txt on a Mac: the Metal build file
# included against a placeholder library (only the metallibs are built).
CMAKE_PROJECT = """\
cmake_minimum_required(VERSION 3.27)
project(mlx_fused_attn LANGUAGES CXX)
add_library(mlx_fused_attn SHARED placeholder.cpp)
include({repo}/cmake/metal.cmake)
"""
FAMILIES = sorted(p.stem for p in (REPO / "mlx_fused_attn" / "families").glob("*/*.metal"))


def cmake_build(tmp_path, bin_dir, strict):
    """Configures, builds the metallibs and installs; returns (build result,
    installed package directory)."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("cmake", "mlx_fused_attn"):
        (src / name).symlink_to(REPO / name)
    (src / "placeholder.cpp").write_text("int placeholder;\n")
    (src / "CMakeLists.txt").write_text(CMAKE_PROJECT.format(repo=REPO))
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    # The short_attention family fails to compile.
    env.update(
        FAKE_XCRUN_RECORD=str(tmp_path / "record.jsonl"),
        FAKE_XCRUN_MESSAGE=MESSAGE,
        FAKE_XCRUN_FAIL="metal:short_attention.metal",
    )
    build, prefix = tmp_path / "build", tmp_path / "prefix"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = subprocess.run(
        [cmake, "-S", src, "-B", build, *generator, f"-DPython_EXECUTABLE={sys.executable}",
         f"-DCMAKE_INSTALL_PREFIX={prefix}", f"-DMLX_FUSED_ATTN_METAL_STRICT={strict}"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert configure.returncode == 0, configure.stdout + configure.stderr
    r = subprocess.run(
        [cmake, "--build", build, "--target", "mlx_fused_attn_metallibs", "-j", "2"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    if r.returncode == 0:
        installed = subprocess.run(
            [cmake, "--install", build], env=env, capture_output=True, text=True
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
    return r, prefix / "mlx_fused_attn"


def test_cmake_builds_and_installs_a_metallib_a_family(tmp_path, fake_xcrun):
    assert "short_attention" in FAMILIES, FAMILIES
    r, package = cmake_build(tmp_path, fake_xcrun, "OFF")
    assert r.returncode == 0, r.stdout + r.stderr
    assert MESSAGE in r.stdout + r.stderr
    expected = [f"mlx_fused_attn_{f}.metallib" for f in FAMILIES if f != "short_attention"]
    expected.append("mlx_fused_attn_short_attention.metallib.log")
    assert sorted(p.name for p in package.iterdir()) == sorted(expected)
    assert MESSAGE in (package / "mlx_fused_attn_short_attention.metallib.log").read_text()


def test_cmake_strict_fails_the_build(tmp_path, fake_xcrun):
    r, _ = cmake_build(tmp_path, fake_xcrun, "ON")
    assert r.returncode != 0
    assert "MLX_FUSED_ATTN_METAL_STRICT=ON" in r.stdout + r.stderr
