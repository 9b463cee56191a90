"""The neighborhood kernel's cases of `python -m mlx_fused_attn.selftest`
(mlx_fused_attn/selftest_cases/__init__.py): 1-D and 2-D windows, with
dilation and causal axes on the full grid."""

from mlx_fused_attn._selftest_calls import neighborhood_case


def cases(add, dtype, quick):
    for d in (64,) if quick else (32, 64, 128):
        add(neighborhood_case, "1-D L=100 k=7", dtype=dtype, d=d, spatial=(100,), kernel=7)
        add(neighborhood_case, "2-D 12x14 k=5", dtype=dtype, d=d, spatial=(12, 14), kernel=5)
        if not quick:
            add(neighborhood_case, "1-D L=200 k=9 dil=2 causal", dtype=dtype, d=d,
                spatial=(200,), kernel=9, dilation=2, causal=True)  # fmt: skip
            add(neighborhood_case, "2-D 16x16 k=3 dil=2", dtype=dtype, d=d,
                spatial=(16, 16), kernel=3, dilation=2)  # fmt: skip
