"""Wall-clock against kernel time for the op's outputs in MLX's allocator
(issue 16, item 3), on an NVIDIA GPU.

For each case: the op's own kernel time per call (CUPTI, one evaluation a
call), the time of the no-op kernel through which MLX allocates the output
(backend/cuda/device_buffer.h), wall-clock per call over a stream of
async_eval calls with one synchronisation, and wall / kernel (goal: <= 1.2).
The accounting itself is tested in tests/test_cuda_memory.py.

    python benchmarks/memory_bench.py [--iters N]
"""

import argparse

import mlx.core as mx
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

import mlx_fused_attn as fa
from gpu_bench import mlx_wall_us

NO_OP = "mlx_fused_attn_no_op"
DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16}


def kernel_times_us(make, iters):
    """(op kernels, no-op kernel) device time per call."""
    mx.eval(make())
    mx.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            mx.eval(make())
        mx.synchronize()
    op = no_op = 0.0
    for e in prof.key_averages():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            if NO_OP in e.key:
                no_op += e.self_device_time_total
            else:
                op += e.self_device_time_total
    return op / iters, no_op / iters


def attention_case(B, H, L, D, dtype):
    rng = np.random.default_rng(L + D)
    q, k, v = (mx.array(rng.standard_normal((B, H, L, D), dtype=np.float32)).astype(DTYPES[dtype])
               for _ in range(3))
    mx.eval(q, k, v)
    return lambda: fa.scaled_dot_product_attention(q, k, v, scale=D**-0.5, force_fused=True)


def neighborhood_case(spatial, H, D, kernel, dtype):
    rng = np.random.default_rng(D)
    q, k, v = (mx.array(rng.standard_normal((1, *spatial, H, D), dtype=np.float32)).astype(DTYPES[dtype])
               for _ in range(3))
    mx.eval(q, k, v)
    return lambda: fa.neighborhood_attention(q, k, v, list(kernel), scale=D**-0.5)


CASES = [
    ("attention B=1 H=32 L=1024 D=128 bf16", lambda: attention_case(1, 32, 1024, 128, "bfloat16")),
    ("attention B=1 H=32 L=1024 D=128 fp16", lambda: attention_case(1, 32, 1024, 128, "float16")),
    ("short B=1000 H=80 L=32 D=64 fp16", lambda: attention_case(1000, 80, 32, 64, "float16")),
    ("neighborhood 2d 128x128 7x7 H=16 D=64 fp16",
     lambda: neighborhood_case((128, 128), 16, 64, (7, 7), "float16")),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=200, help="calls per measurement")
    args = ap.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}; MLX {mx.__version__}")
    print("| case | kernel us | no-op us | wall us | wall / kernel |")
    print("|---|---:|---:|---:|---:|")
    for name, setup in CASES:
        make = setup()
        op_us, no_op_us = kernel_times_us(make, args.iters)
        wall = mlx_wall_us(make, args.iters)
        print(f"| {name} | {op_us:.1f} | {no_op_us:.1f} | {wall:.1f} | {wall / op_us:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
