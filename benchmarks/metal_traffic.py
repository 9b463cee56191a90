"""Memory traffic of the Metal attention kernel against mx.fast's on the
masked calls models make (issue 16, item 2, "in the emulator's counts of
loads"), on any x86-64 Linux machine with g++: there is no Mac here.

The fused kernel runs in the Metal emulator's load-counting build
(tests/metal_emu/traffic.py): every device-memory byte a threadgroup reads
is counted once per threadgroup, and its output is checked against a
float64 reference. mx.fast's Metal kernel cannot be built here; its bytes
follow from its loop (MLX 0.32 steel attention: the Q tile, then K, V and
the whole mask tile of every key block up to the causal limit), with the
same tiles as ours at head dim 64. Bytes are what the kernels move, not
time: both do the same matrix products per visited block, and the select of
a masked score costs each the same.

Rows are gpu_bench.py's workload masks at B=1, fp16, head dim 64, scaled
down from its L=2048 H=32 so that the emulator runs them in minutes: the
ratios depend on the mask's pattern by block, not on L.

    python benchmarks/metal_traffic.py [--L 256] [--heads 2]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tests.metal_emu import traffic  # noqa: E402

# (label, mask_pattern kind, mask heads: 1 or all)
ROWS = [
    ("random add [1,1,L,L]", "random add", 1),
    ("random add [1,H,L,L]", "random add", None),
    ("random bool [1,1,L,L]", "random bool", 1),
    ("causal as an array, bool", "causal", 1),
    ("window 64, bool", "window 64", 1),
    ("ALiBi causal, add", "alibi", 1),
    ("causal + left padding L/3, bool", "padding", 1),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--L", type=int, default=256, help="query and key length")
    ap.add_argument("--heads", type=int, default=2)
    args = ap.parse_args()
    L, H = args.L, args.heads
    prog = traffic.program()
    base = traffic.fused_traffic(prog, H_q=H, L_q=L, L_k=L)
    print(f"B=1 H={H} L={L} D=64 float16; bytes read (distinct per threadgroup) plus written\n")
    print("| mask | fused | vs no mask | of which mask and classes | mx.fast (from its loop) | fused / mx.fast |")
    print("|---|---:|---:|---:|---:|---:|")
    none_mx = traffic.mx_fast_traffic(H_q=H, L_q=L, L_k=L)
    print(f"| none | {base.total:,} | 1.00x | 0 | {none_mx.total:,} | {base.total / none_mx.total:.2f}x |")
    for label, kind, heads in ROWS:
        mask = traffic.mask_pattern(kind, L, L, heads or H)
        got = traffic.fused_traffic(prog, H_q=H, L_q=L, L_k=L, mask=mask)
        mx_fast = traffic.mx_fast_traffic(H_q=H, L_q=L, L_k=L, mask=mask)
        masks = got.read.get("mask", 0) + got.read.get("classes", 0)
        print(f"| {label} | {got.total:,} | {got.total / base.total:.2f}x | {masks:,} | "
              f"{mx_fast.total:,} | {got.total / mx_fast.total:.2f}x |")
    print("\nThe classes by block are built once per mask (MLX ops reading it once) and cached:")
    print("mlx-lm passes one mask to every layer, so a call pays 1/layers of that pass.")


if __name__ == "__main__":
    main()
