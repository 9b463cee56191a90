"""A Metal speed proxy, said to be one (issue 45, item 5): per threadgroup
and per key block, the simdgroup matrix operations, threadgroup-memory bytes
loaded and stored, device bytes loaded, barriers and simd shuffles and
reductions of our attention kernel (mlx_fused_attn/families/attention/attention.metal) and of MLX's steel
attention (mx.fast's Metal kernel, MLX 0.32.4's own source), counted in the
Metal emulator on any x86-64 Linux machine with g++: there is no Mac here.

Each kernel's threadgroup runs at two short key lengths and its counts are
fitted as fixed + per key block (tests/metal_emu/proxy.py; the fit is
checked on a third length by tests/metal_emu/test_proxy.py, and here on one
threadgroup of the L = 8192 call, 256 or 512 key blocks), then scaled to
a whole non-causal call of length L: ceil(L / bq) threadgroups a head,
ceil(L / bk) key blocks each. Counts are not a time: see RESULTS.md.

    python benchmarks/metal_proxy.py [--dtypes float16 bfloat16] [--dims 64 80 128]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tests.metal_emu import proxy  # noqa: E402

LENGTHS = (1024, 2048, 4096, 8192)
SHORT = {
    "simdgroup MMAs": "MMA",
    "simdgroup matrix loads": "mat load",
    "simdgroup matrix stores": "mat store",
    "threadgroup bytes loaded": "tg B ld",
    "threadgroup bytes stored": "tg B st",
    "device bytes loaded": "dev B ld",
    "threadgroup barriers": "tg barriers",
    "simdgroup barriers": "sg barriers",
    "simd shuffles and reductions": "shfl+red",
}


def ratio(a, b):
    if b == 0:
        return "-" if a == 0 else "inf"
    return f"{a / b:.2f}"


def count(a):
    return f"{a:,.0f}" if a == int(a) else f"{a:,.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"],
                    choices=sorted(proxy.MLX_TYPE_NAMES))
    ap.add_argument("--dims", nargs="+", type=int, default=[64, 80, 128], choices=[64, 80, 128])
    args = ap.parse_args()
    ours = proxy.program()
    fits = {}
    for dtype in args.dtypes:
        for D in args.dims:
            mlx = proxy.mlx_program(dtype, D)
            fits[dtype, D] = (proxy.fused_fit(ours, dtype, D), proxy.mlx_fit(mlx, dtype, D))
            # The fit, checked on one whole threadgroup of the longest call.
            for fit, run in zip(fits[dtype, D], (lambda n: proxy.fused_counts(ours, dtype, D, n),
                                                 lambda n: proxy.mlx_counts(mlx, dtype, D, n))):
                blocks = -(-LENGTHS[-1] // fit.tiles.bk)
                got = run(blocks)
                if got != fit.at(blocks):
                    sys.exit(f"{fit.tiles.name}: {blocks} key blocks count {got}, "
                             f"the fit predicts {fit.at(blocks)}")
    names = [n for n, _ in proxy.COUNTERS]

    print("Per threadgroup and key block (ours | MLX); tiles bq x bk, simdgroups\n")
    print("| dtype | D | tiles (ours; MLX) | " + " | ".join(SHORT[n] for n in names) + " |")
    print("|---|---:|---|" + "---:|" * len(names))
    for (dtype, D), (f, m) in fits.items():
        cells = [f"{count(f.per_block[n])} \\| {count(m.per_block[n])}" for n in names]
        tiles = f"{f.tiles.bq}x{f.tiles.bk}, {f.tiles.warps}; {m.tiles.bq}x{m.tiles.bk}, {m.tiles.warps}"
        print(f"| {dtype} | {D} | {tiles} | " + " | ".join(cells) + " |")

    print("\nOnce per threadgroup (ours | MLX)\n")
    print("| dtype | D | " + " | ".join(SHORT[n] for n in names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for (dtype, D), (f, m) in fits.items():
        cells = [f"{count(f.fixed[n])} \\| {count(m.fixed[n])}" for n in names]
        print(f"| {dtype} | {D} | " + " | ".join(cells) + " |")

    print("\nWhole non-causal call, ours / MLX\n")
    print("| dtype | D | L | " + " | ".join(SHORT[n] for n in names) + " |")
    print("|---|---:|---:|" + "---:|" * len(names))
    for (dtype, D), (f, m) in fits.items():
        for L in LENGTHS:
            a, b = f.total(L), m.total(L)
            print(f"| {dtype} | {D} | {L} | " + " | ".join(ratio(a[n], b[n]) for n in names) + " |")


if __name__ == "__main__":
    main()
