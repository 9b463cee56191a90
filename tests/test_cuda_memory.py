"""The CUDA backend's outputs and copies live in MLX's allocator (issue 16):
mx.get_active_memory() rises by exactly the outputs' bytes, as the allocator
rounds them, while they live and falls back when they die; peak memory sees
them and the copies the backend makes of unaligned inputs; clear_cache()
and set_memory_limit() treat them as MLX's own arrays. An output stays in
device memory after the host read the previous one (issue 46), unless
MLX_FUSED_ATTN_DEVICE_OUTPUTS=0."""

import gc

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import assert_close, rand
from test_cuda_backend import cuda_gpu

pytestmark = pytest.mark.skipif(not cuda_gpu(), reason="no CUDA GPU in MLX")

GiB = 1024**3


def rounded(nbytes):
    """The bytes MLX's CUDA allocator takes for a request of nbytes
    (mlx/backend/cuda/allocator.cpp: 8-byte blocks, powers of two under a
    16 KiB page, whole pages above)."""
    page = 16384
    if nbytes <= 8:
        return 8
    if nbytes < page:
        return 1 << (nbytes - 1).bit_length()
    return page * -(-nbytes // page)


def settled_active():
    """Active memory once every evaluation has run and dead arrays are freed."""
    gc.collect()
    mx.synchronize()
    return mx.get_active_memory()


def empty_cache_active():
    """settled_active() with MLX's buffer cache emptied: the cache may hand a
    request a larger buffer, whose whole size then counts as active, so exact
    counts need every allocation to be fresh."""
    before = settled_active()
    mx.clear_cache()
    return before


def attention(shape, seed):
    q, k, v = (rand(shape, mx.float16, seed + i) for i in range(3))
    mx.eval(q, k, v)
    return lambda: fa.scaled_dot_product_attention(
        q, k, v, scale=shape[-1] ** -0.5, force_fused=True, stream=mx.gpu)


def neighborhood(shape, seed):
    q, k, v = (rand(shape, mx.float16, seed + i) for i in range(3))
    mx.eval(q, k, v)
    ok, reason = fa.neighborhood_can_use_fused(q, k, v, [5, 5], stream=mx.gpu)
    assert ok, reason
    return lambda: fa.neighborhood_attention(q, k, v, [5, 5], scale=0.125, stream=mx.gpu)


CALLS = {
    # sizes under a page, of whole pages, and of a page and a part
    "general": lambda: attention((1, 2, 33, 64), 1),
    "general-pages": lambda: attention((1, 4, 256, 64), 2),
    "short": lambda: attention((37, 8, 32, 64), 3),
    "neighborhood": lambda: neighborhood((1, 24, 20, 2, 64), 4),
}


@pytest.mark.parametrize("name", CALLS)
def test_active_memory_counts_the_output_while_it_lives(name):
    make = CALLS[name]()
    before = empty_cache_active()
    mx.reset_peak_memory()
    out = make()
    mx.eval(out)
    expected = rounded(out.nbytes)
    assert settled_active() - before == expected
    assert mx.get_peak_memory() >= before + expected
    assert not mx.any(mx.isnan(out)).item()
    del out
    assert settled_active() == before


def test_row_copies_are_counted_while_the_graph_runs():
    # Rows that start 2 bytes into a 16-byte unit: the kernel reads a copy.
    base = rand((1, 4, 128, 72), mx.float16, 5)
    k, v = rand((1, 4, 128, 64), mx.float16, 6), rand((1, 4, 128, 64), mx.float16, 7)
    mx.eval(base, k, v)
    q = base[..., 1:65]
    before = empty_cache_active()
    mx.reset_peak_memory()
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.125, force_fused=True, stream=mx.gpu)
    mx.eval(out)
    assert mx.get_peak_memory() >= before + rounded(out.nbytes) + rounded(q.nbytes)
    assert settled_active() - before == rounded(out.nbytes)
    assert_close(out, q, k, v, 0.125, what="from a row copy")


def test_strided_neighborhood_copies_are_counted_while_the_graph_runs():
    # Six axes that do not merge and a head-dim stride of 2: q is copied
    # in parts (strided_copy_parts.h), into one buffer.
    base = rand((2, 3, 4, 5, 6, 128), mx.float16, 9)
    q = base.transpose(0, 4, 3, 2, 1, 5)[..., ::2]
    k, v = rand(q.shape, mx.float16, 10), rand(q.shape, mx.float16, 11)
    mx.eval(base, k, v)
    ok, reason = fa.neighborhood_can_use_fused(q, k, v, [3, 3, 3], stream=mx.gpu)
    assert ok, reason
    before = empty_cache_active()
    mx.reset_peak_memory()
    out = fa.neighborhood_attention(q, k, v, [3, 3, 3], scale=0.125, stream=mx.gpu)
    mx.eval(out)
    assert mx.get_peak_memory() >= before + rounded(out.nbytes) + rounded(q.nbytes)
    assert settled_active() - before == rounded(out.nbytes)
    dense = fa.neighborhood_attention(mx.contiguous(q), k, v, [3, 3, 3], scale=0.125, stream=mx.gpu)
    assert mx.array_equal(out, dense).item()


def test_memory_limit_and_cache_see_the_outputs():
    """The issue's case: 40 outputs of 256 MiB under set_memory_limit(2 GiB).
    MLX's limit is soft: past it, eval waits for work in flight and the
    allocator empties its cache, but arrays the caller keeps are still
    allocated. So all 40 are made, and active memory says so; dropped, they
    go to MLX's cache, which clear_cache() empties; a stream of calls whose
    outputs die reuses that memory instead of growing."""
    make = attention((128, 32, 256, 128), 8)  # o: 256 MiB of float16
    size = rounded(128 * 32 * 256 * 128 * 2)
    mx.clear_cache()
    old_limit = mx.set_memory_limit(2 * GiB)
    try:
        before = settled_active()
        outs = []
        for _ in range(40):
            outs.append(make())
            mx.eval(outs[-1])
        assert settled_active() - before == 40 * size
        assert mx.get_active_memory() > mx.get_memory_limit()
        del outs
        assert settled_active() == before
        assert mx.get_cache_memory() >= size
        mx.clear_cache()
        assert mx.get_cache_memory() == 0

        mx.reset_peak_memory()
        for _ in range(40):
            mx.eval(make())
        assert mx.get_peak_memory() - before <= 2 * size
        assert settled_active() == before
    finally:
        mx.set_memory_limit(old_limit)
        mx.clear_cache()


@pytest.mark.parametrize("switch", ["1", None, "0"], ids=["device-1", "device-unset", "unified-0"])
@pytest.mark.parametrize("name", CALLS)
def test_an_output_after_a_host_read_of_the_last(name, switch, monkeypatch):
    """np.array(out) moves out's buffer to managed memory for good (MLX's
    Buffer::raw_ptr); freed, MLX's cache gives it to the next output of its
    size, its pages on the host. The backend gives that output device memory
    (device_buffer.h); MLX_FUSED_ATTN_DEVICE_OUTPUTS=0 keeps what the cache
    gives, which shows that the cache did give the host's buffer."""
    if switch is None:
        monkeypatch.delenv("MLX_FUSED_ATTN_DEVICE_OUTPUTS", raising=False)
    else:
        monkeypatch.setenv("MLX_FUSED_ATTN_DEVICE_OUTPUTS", switch)
    keep_unified = switch == "0"
    make = CALLS[name]()
    mx.clear_cache()
    out = make()
    mx.eval(out)
    assert fa._ext._memory_kind(out) == "device"
    first = np.array(out)
    assert fa._ext._memory_kind(out) == "managed"
    del out
    settled_active()
    out = make()
    mx.eval(out)
    assert fa._ext._memory_kind(out) == ("managed" if keep_unified else "device")
    np.testing.assert_array_equal(np.array(out), first)
    # Again, with the second host read's buffer and its swap's free behind.
    del out
    settled_active()
    out = make()
    mx.eval(out)
    assert fa._ext._memory_kind(out) == ("managed" if keep_unified else "device")
    np.testing.assert_array_equal(np.array(out), first)
