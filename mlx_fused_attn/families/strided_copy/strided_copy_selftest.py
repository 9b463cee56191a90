"""The strided copy's cases of `python -m mlx_fused_attn.selftest`
(mlx_fused_attn/selftest_cases/__init__.py): general-kernel calls whose head
dim is strided, which the copy makes row-contiguous first where a kernel
cannot read it in place."""

from mlx_fused_attn._selftest_calls import attention_case, general_lengths


def cases(add, dtype, quick):
    for d in (64,) if quick else (64, 128):
        add(attention_case, "strided_copy", "head dim strided", dtype=dtype, d=d,
            layout="d-strided", **general_lengths(quick))  # fmt: skip
