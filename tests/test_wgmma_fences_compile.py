"""Hopper's warpgroup products read their accumulators asynchronously from
the wgmma.fence before them: the PTX ISA leaves a write to those registers
between the fence and the products undefined. The tile ops pin every
accumulator before the fence (swizzled_block.h); this checks the PTX nvcc
makes of the forward kernels (the producer warpgroup's too) and both
backward kernels: between each wgmma.fence and its commit, no instruction
but the products writes a float register.
Skips without nvcc."""

import re

from test_cuda_compile import nvcc_output

KERNELS = r"""
#include "mlx_fused_attn/backend/cuda/attention_backward_kernel.cuh"
#include "mlx_fused_attn/backend/cuda/attention_kernel.cuh"
const void* kernels[] = {
    (const void*)fa::attention_kernel<fa::half_t, 128, 128, fa::AttnTilesOf<64, 128, 4, 1, 2, true, true>, true, true>,
    (const void*)fa::attention_kernel<fa::half_t, 64, 64, fa::AttnTilesOf<64, 128, 4, 2, 3, true, false>, false, true>,
    (const void*)fa::attention_producer_kernel<fa::bfloat_t, 128, 128, fa::AttnTilesOf<128, 128, 8, 3, 1, true, true, true>, true, true>,
    (const void*)fa::attention_bwd_dkdv_kernel<fa::bfloat_t, 128, fa::AttnTilesOf<64, 64, 4, 2, 1, true, true>, true, false>,
    (const void*)fa::attention_bwd_dq_kernel<fa::bfloat_t, 128, fa::AttnTilesOf<64, 64, 4, 2, 1, true, false>, false, true>,
    (const void*)fa::attention_bwd_dq_kernel<fa::half_t, 64, fa::AttnTilesOf<64, 128, 4, 2, 1, true, true>, true, false>,
};
"""

# A write to a float register: the destination is the first operand.
FLOAT_WRITE = re.compile(r"^\s*[a-z][\w.]*\s+%f\d+\s*,")


def unfenced_writes(ptx):
    """Lines between a wgmma.fence and the next commit_group that write a
    float register (the products themselves name theirs in braces)."""
    found, inside = [], False
    for line in ptx.splitlines():
        if "wgmma.fence.sync.aligned" in line:
            inside = True
        elif "wgmma.commit_group" in line:
            inside = False
        elif inside and FLOAT_WRITE.match(line):
            found.append(line.strip())
    return found


def test_no_accumulator_write_between_fence_and_products(tmp_path):
    text = nvcc_output(tmp_path, KERNELS, "ptx", "compute_90a").read_text()
    assert text.count("wgmma.fence.sync.aligned") >= 8
    assert unfenced_writes(text) == []
