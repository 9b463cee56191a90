"""Each kernel family's cases of `python -m mlx_fused_attn.selftest`, one
module a family folder: the build installs each
mlx_fused_attn/families/<folder>/<folder>_selftest.py here as <folder>.py
(CMakeLists.txt), so that a family's cases live in its folder. Each module
defines

    cases(add, dtype, quick)

which calls add(builder, *names, **arguments) once a case, a builder of
mlx_fused_attn._selftest_calls, for the dtype name `dtype`; `quick`: the
smaller grid (CI)."""
