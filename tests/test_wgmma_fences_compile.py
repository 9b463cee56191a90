"""Hopper's warpgroup products read their accumulators asynchronously from
the wgmma.fence before them: the PTX ISA leaves a write to those registers
between the fence and the products undefined. The tile ops pin every
accumulator before the fence (swizzled_block.h); this checks the PTX nvcc
makes of the forward kernels (the producer warpgroup's too) and the
backward kernels (dK/dV in both forms): between each wgmma.fence and its commit, no instruction
but the products writes a float register. And the products' shapes: a
Q K^T step covers 128 keys, a P V step both 64-column panels of D = 128.
Skips without nvcc."""

import re

import pytest

from test_cuda_compile import nvcc_output

KERNELS = r"""
#include "mlx_fused_attn/families/attention_backward/attention_backward_kernel.cuh"
#include "mlx_fused_attn/families/attention/attention_kernel.cuh"
const void* kernels[] = {
    (const void*)fa::attention_kernel<fa::half_t, 128, 128, fa::AttnTilesOf<64, 128, 4, 1, 2, true, true>, true, true>,
    (const void*)fa::attention_kernel<fa::half_t, 64, 64, fa::AttnTilesOf<64, 128, 4, 2, 3, true, false>, false, true>,
    (const void*)fa::attention_producer_kernel<fa::bfloat_t, 128, 128, fa::AttnTilesOf<128, 128, 8, 3, 1, true, true, true>, true, true>,
    (const void*)fa::attention_bwd_dkdv_kernel<fa::bfloat_t, 128, fa::AttnTilesOf<64, 64, 4, 2, 1, true, true>, true, false>,
    (const void*)fa::attention_bwd_dkdv_kernel<fa::half_t, 128, fa::AttnTilesOf<64, 64, 4, 2, 1, true, true>, false, true, true>,
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


@pytest.fixture(scope="module")
def ptx(tmp_path_factory):
    return nvcc_output(tmp_path_factory.mktemp("wgmma"), KERNELS, "ptx", "compute_90a").read_text()


def entry(ptx, name):
    """The PTX of the one kernel whose mangled name holds `name`."""
    bodies = [b for b in ptx.split(".entry ")[1:] if name in b.split("(", 1)[0]]
    assert len(bodies) == 1, f"{len(bodies)} entries named {name}"
    return bodies[0]


def test_no_accumulator_write_between_fence_and_products(ptx):
    assert ptx.count("wgmma.fence.sync.aligned") >= 8
    assert unfenced_writes(ptx) == []


def test_products_cover_128_keys_and_two_panels(ptx):
    """The producer kernel at D = 128 (128-key blocks): S's products and P
    V's are all m64n128k16, where 64-wide ones took twice the instructions
    (RESULTS.md, "Kernels alone")."""
    body = entry(ptx, "attention_producer_kernel")
    shapes = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)", body)
    assert shapes and set(shapes) == {"m64n128k16"}, sorted(set(shapes))


def test_one_kernel_dkdv_adds_dq_with_a_warpgroup_product_and_pair_reductions(ptx):
    """The one-kernel form's dK/dV kernel (half, D = 128): its five
    products are warpgroup products, dS K (m64n128k16, dS from registers)
    among them, and dQ's sums leave as 8-byte reductions (red.v2), never
    as atomics that return a value."""
    (body,) = [b for b in ptx.split(".entry ")[1:]
               if "attention_bwd_dkdv_kernel" in b.split("(", 1)[0]
               and "6__half" in b.split("(", 1)[0]]
    shapes = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)", body)
    assert shapes.count("m64n128k16") >= 3 and "m64n64k16" in shapes, sorted(set(shapes))
    assert "red.global.add.v2.f32" in body
    assert "atom.global" not in body
