"""The quantized K/V family's cases of `python -m mlx_fused_attn.selftest`
(mlx_fused_attn/selftest_cases/__init__.py): decode and prefill over 4- and
8-bit caches of several group sizes and head dims (32: one group a row)."""

from mlx_fused_attn._selftest_calls import quantized_case


def cases(add, dtype, quick):
    add(quantized_case, "decode 4-bit g64 gqa 8:2", dtype=dtype, d=128, lq=1, lk=1000,
        bits=4, group=64)  # fmt: skip
    add(quantized_case, "8-bit g32 causal", dtype=dtype, d=64, lq=100, lk=130, bits=8,
        group=32, mask="causal")  # fmt: skip
    add(quantized_case, "decode 4-bit g32 gqa 8:2", dtype=dtype, d=32, lq=1, lk=1000,
        bits=4, group=32)  # fmt: skip
    if not quick:
        add(quantized_case, "decode 8-bit g128 gqa 8:2", dtype=dtype, d=256, lq=1,
            lk=1000, bits=8, group=128)  # fmt: skip
        add(quantized_case, "4-bit g64 causal", dtype=dtype, d=128, lq=257, lk=1000,
            bits=4, group=64, mask="causal")  # fmt: skip
        add(quantized_case, "8-bit g32 causal", dtype=dtype, d=32, lq=70, lk=300, bits=8,
            group=32, mask="causal")  # fmt: skip
