"""A tile's fixed cost against a key block's, fused and mx.fast, on an
NVIDIA GPU.

Calls of one 128-query block a head (B=1, D=128, bf16, no mask) against n
key blocks of 128, with 2 and 4 tiles (heads) a multiprocessor. Four
query heads share a key/value head (as Llama's), whose tiles run side by
side and read K and V from L2 three times of four: the products, not
memory, set the pace. A line fitted through the kernel times over n,
T = K + t (X + n s) for t tiles a multiprocessor, gives a key block's cost
s (slope / t) and a tile's fixed cost X (about intercept / t): what the
first block's softmax, the last block's P V and the prologue and epilogue
cost beyond the loop's steps. Small grids of few key blocks (chunked
prefill, short prompts) pay X on every tile.

    python benchmarks/tile_cost.py
"""

import sys

import mlx.core as mx
import numpy as np

sys.path.insert(0, "benchmarks")
import gpu_bench  # noqa: E402

import mlx_fused_attn as fa  # noqa: E402

GQA = 4
BLOCKS = (1, 2, 4, 8, 16, 32)


def kernel_us(op, q, k, v):
    scale = q.shape[-1] ** -0.5
    return gpu_bench.kernel_time_us(lambda: mx.eval(op(q, k, v, scale=scale)), mx.synchronize, 50)


def main():
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ops = {"fused": fa.scaled_dot_product_attention, "mx_fast": mx.fast.scaled_dot_product_attention}
    print(f"GPU: {torch.cuda.get_device_name()}, {sms} multiprocessors; MLX {mx.__version__}\n")
    print("| tiles a multiprocessor | key blocks | fused us | mx_fast us |")
    print("|---:|---:|---:|---:|")
    fits = []
    for tiles in (2, 4):
        H = tiles * sms
        times = {name: [] for name in ops}
        for n in BLOCKS:
            q = mx.random.normal((1, H, 128, 128)).astype(mx.bfloat16)
            k, v = (mx.random.normal((1, H // GQA, 128 * n, 128)).astype(mx.bfloat16) for _ in range(2))
            mx.eval(q, k, v)
            for name, op in ops.items():
                times[name].append(kernel_us(op, q, k, v))
            print(f"| {tiles} | {n} | {times['fused'][-1]:.1f} | {times['mx_fast'][-1]:.1f} |", flush=True)
        for name in ops:
            slope, intercept = np.polyfit(BLOCKS, times[name], 1)
            fits.append((tiles, name, slope / tiles, intercept / tiles))
    print("\n| tiles a multiprocessor | provider | a key block us | a tile's fixed cost us |")
    print("|---:|---|---:|---:|")
    for tiles, name, block_us, tile_us in fits:
        print(f"| {tiles} | {name} | {block_us:.2f} | {tile_us:.1f} |")


if __name__ == "__main__":
    main()
