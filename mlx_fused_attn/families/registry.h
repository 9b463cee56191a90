// The kernel families: the one list of them written by hand. Each folder of
// mlx_fused_attn/families/ holds one family's kernels (its Metal library,
// its NVRTC source, its AOT tables, its host pieces) and has its line here;
// the build, tools/gen_instances.py, the Metal emulator, the conformance
// pass and the mutation tool find a family's files from its folder, and the
// planner's and backends' family lists come from these lines
// (tests/test_family_registry.py holds the two together).
//
//   X(enumerator, name, folder, cpu_kernel, cuda_source)
//
// - name: the stem of the family's .metal file in its folder, the key of
//   its JIT text and of its metallib (mlx_fused_attn_<name>.metallib).
// - folder: mlx_fused_attn/families/<folder>/. The backward's row dot is a
//   library of its own on Metal, so it has a line of its own, but it shares
//   the backward's folder and, on CUDA, its NVRTC source.
// - cpu_kernel: the family has a CPU kernel (backend/cpu/); on the CPU the
//   attention kernel also takes short sequences and its backward's row dot,
//   and reads any strides without a copy.
// - cuda_source: the folder's *_kernel.cuh entry points are the family's
//   own NVRTC text (keyed by name, which then equals the folder).
#pragma once

#define FA_KERNEL_FAMILIES(X)                                                  \
  X(Attention, attention, attention, true, true)                               \
  X(ShortAttention, short_attention, short_attention, false, true)             \
  X(AttentionBackward, attention_backward, attention_backward, true, true)     \
  X(AttentionBackwardRowDot,                                                   \
    attention_backward_row_dot,                                                \
    attention_backward,                                                        \
    false,                                                                     \
    false)                                                                     \
  X(Neighborhood, neighborhood, neighborhood, true, true)                      \
  X(Copy, strided_copy, strided_copy, false, true)                             \
  X(QuantizedAttention,                                                        \
    quantized_attention,                                                       \
    quantized_attention,                                                       \
    true,                                                                      \
    true)

// The families that run the attention op, in the planner's order of
// preference (the first that takes a call runs it, so the most general
// comes last): X(enumerator, name, tiles). Each has, in its folder, its
// planning part `plan_<name>`, with `note_<name>` and its tiles'
// `tile_fields` (families/<folder>/<name>_planning.cpp,
// plan/family_planning.h), and its launch on each GPU backend,
// `prepare_<name>` and `run_<name>` (families/<folder>/cuda/<name>_cuda.cpp,
// backend/cuda/attention_launch.h; families/<folder>/metal/<name>_metal.cpp,
// backend/metal/attention_dispatch.h); the backends find them from this
// line, and the planner its switch, MLX_FUSED_ATTN_<NAME>
// (plan/kernel_switches.h). `tiles`: the type (in namespace fa) of its
// tiles in the plan (AttentionPlan::tiles), one of its own;
// tools/gen_instances.py includes the header that defines it
// (plan/candidate_tiles.h).
#define FA_ATTENTION_CANDIDATES(X)                   \
  X(ShortAttention, short_attention, ShortAttnTiles) \
  X(Attention, attention, AttnTiles)
