#!/usr/bin/env python3
"""Builds one kernel family's ahead-of-time Metal library.

    build_metallib.py --family NAME --source mlx_fused_attn/families/FOLDER/NAME.metal -I ROOT \\
        --deployment-target 14.0 --output-dir DIR --work-dir DIR \\
        --on-error warn|fail [--debug]

Compiles the source to AIR (`xcrun -sdk macosx metal -c`) and links it
(`xcrun -sdk macosx metallib`) into DIR/mlx_fused_attn_NAME.metallib, where
the host code loads it from (beside the package's shared library).

A family that does not compile must not fail `pip install` for users: with
--on-error warn the compiler's message is printed as a build warning and
written to DIR/mlx_fused_attn_NAME.metallib.log instead of the metallib, so
the runtime finds no metallib for the family, falls back with that message
as the reason, and the other families still run. --on-error fail
(MLX_FUSED_ATTN_METAL_STRICT=ON, the macOS CI) makes it a build error.

Exit status: 0 when the metallib or, with --on-error warn, its log was
written; 1 when the family failed with --on-error fail.
"""

import argparse
import pathlib
import shlex
import subprocess
import sys

# MLX's mlx_build_metallib (share/cmake/MLX/extension.cmake of MLX 0.32.4):
# the same warnings and strict IEEE math as MLX's own kernels.
COMPILE_FLAGS = [
    "-Wall",
    "-Wextra",
    "-fno-fast-math",
    "-Wno-c++17-extensions",
    "-Wno-c++20-extensions",
    "-Wmetal-addr-spaces",
]
DEBUG_FLAGS = ["-gline-tables-only", "-frecord-sources"]


def metallib_name(family):
    return f"mlx_fused_attn_{family}.metallib"


def compile_command(args, air):
    # The deployment target picks the Metal language version (14.0: Metal
    # 3.1, the first with bfloat); no -std, as in MLX's build.
    return [
        "xcrun", "-sdk", "macosx", "metal",
        *[f"-I{d}" for d in args.include_dirs],
        *COMPILE_FLAGS,
        *(DEBUG_FLAGS if args.debug else []),
        f"-mmacosx-version-min={args.deployment_target}",
        "-c", str(args.source), "-o", str(air),
    ]  # fmt: skip


def link_command(air, metallib):
    # `metallib` keeps the AIR's deployment target; the `metal` driver as a
    # linker stamps the SDK's own unless told again (MLX PR 3501).
    return ["xcrun", "-sdk", "macosx", "metallib", str(air), "-o", str(metallib)]


def run(cmd):
    """(exit status, what it printed); a missing xcrun is a failure too."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        return 127, f"cannot run {cmd[0]}: {e}\n"
    return r.returncode, r.stdout + r.stderr


def build(args):
    args.output_dir.mkdir(parents=True, exist_ok=True)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    metallib = args.output_dir / metallib_name(args.family)
    log = metallib.with_name(metallib.name + ".log")
    air = args.work_dir / f"{args.family}.air"
    # Whatever an earlier build left must not outlive this one's outcome.
    for stale in (metallib, log, air):
        stale.unlink(missing_ok=True)

    for cmd in (compile_command(args, air), link_command(air, metallib)):
        status, output = run(cmd)
        if status == 0:
            # Warnings of a successful compile belong in the build log.
            sys.stderr.write(output)
            continue
        metallib.unlink(missing_ok=True)
        message = f"`{shlex.join(cmd)}` failed (exit status {status}):\n{output}"
        if args.on_error == "fail":
            print(
                f"error: mlx_fused_attn: the {args.family} kernels do not compile "
                f"(MLX_FUSED_ATTN_METAL_STRICT=ON):\n{message}",
                file=sys.stderr,
            )
            return 1
        log.write_text(message)
        print(
            f"warning: mlx_fused_attn: the {args.family} kernels do not compile; "
            f"installing {log.name} instead of {metallib.name}, so their calls "
            f"run unfused with this reason:\n{message}",
            file=sys.stderr,
        )
        return 0
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", required=True, help="the kernel family (the source's stem)")
    parser.add_argument("--source", required=True, type=pathlib.Path)
    parser.add_argument("-I", dest="include_dirs", action="append", default=[])
    parser.add_argument("--deployment-target", required=True, help="macOS version, e.g. 14.0")
    parser.add_argument("--output-dir", required=True, type=pathlib.Path)
    parser.add_argument("--work-dir", required=True, type=pathlib.Path, help="for the .air")
    parser.add_argument("--on-error", required=True, choices=("warn", "fail"))
    parser.add_argument("--debug", action="store_true", help="line tables and sources")
    args = parser.parse_args(argv)
    return build(args)


if __name__ == "__main__":
    sys.exit(main())
