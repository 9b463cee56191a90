"""The short-sequence kernel's cases of `python -m mlx_fused_attn.selftest`
(mlx_fused_attn/selftest_cases/__init__.py): many sequences of L_q = 33 and
L_k = 48, with masks, GQA and sinks."""

from mlx_fused_attn._selftest_calls import attention_case

SHORT = dict(lq=33, lk=48, b=4)


def cases(add, dtype, quick):
    for d in (64, 128) if quick else (32, 64, 128):
        for mask in (None, "causal"):
            add(attention_case, "short_attention", f"L=33:48 mask={mask or 'none'}",
                dtype=dtype, d=d, mask=mask, **SHORT)  # fmt: skip
    add(attention_case, "short_attention", "L=33:48 gqa 4:2 sinks bool", dtype=dtype, d=64,
        hkv=2, sinks=True, mask="bool", **SHORT)  # fmt: skip
