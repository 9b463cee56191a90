"""The general kernel's cases of `python -m mlx_fused_attn.selftest`
(mlx_fused_attn/selftest_cases/__init__.py): its head dims, masks, GQA,
sinks, and a strided view it reads in place."""

from mlx_fused_attn._selftest_calls import attention_case, general_lengths


def cases(add, dtype, quick):
    general = general_lengths(quick)
    for d in (64, 128) if quick else (32, 64, 80, 96, 128):
        masks = (None, "causal", "bool", "additive") if d in (64, 128) else (None, "causal")
        for mask in masks:
            add(attention_case, "attention", f"mask={mask or 'none'}", dtype=dtype, d=d,
                mask=mask, **general)  # fmt: skip
    for d in (64,) if quick else (64, 128):
        add(attention_case, "attention", "gqa 8:2 causal", dtype=dtype, d=d,
            hq=8, hkv=2, mask="causal", **general)  # fmt: skip
        add(attention_case, "attention", "sinks", dtype=dtype, d=d, sinks=True, **general)
        add(attention_case, "attention", "strided [B,L,H,D] view", dtype=dtype, d=d,
            layout="blhd", mask="causal", **general)  # fmt: skip
