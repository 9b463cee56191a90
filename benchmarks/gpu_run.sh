#!/usr/bin/env bash
# On the GPU machine (see /work/shared/device/README.md or DESIGN.md section
# 7): unpack MLX's CUDA build, build this package against it, run the tests
# (GPU ones included), compute-sanitizer, the tile sweep and the benchmarks,
# writing logs and result tables into OUTPUT_DIR.
#
#   benchmarks/gpu_run.sh OUTPUT_DIR
#
# Environment: STEPS (default "build test sanitize sweep bench") picks steps;
# "shortsweep" (the short-sequence kernel's tile sweep), "nasweep" (the
# neighborhood kernel's), "quantsweep" (decode against a 4-bit K/V cache:
# the quantized kernel as planned, its rivals and the bf16 decode,
# benchmarks/cuda_quant_decode_sweep.cu) and "memory" (wall
# against kernel time with outputs in MLX's allocator) are more;
# CUDA_ARCHS (default 90a, the GPU there with its warpgroup products) the AOT
# architectures; PYTEST_K the
# tests' -k expression (default "not cpu"); PYTEST_ARGS more pytest arguments
# (-n 8: the tests in 8 processes, pytest-xdist); BENCH_ARGS extra arguments for
# gpu_bench.py (--short: the short-sequence table; --workload: decode,
# chunked prefill, array masks, GQA); MODEL_BENCH_ARGS extra
# arguments for model_bench.py. Needs .device-cache/mlx-cuda-site.tar.xz.
# The step "ab" times the fused kernel on the grid and the workload table for
# a base build and this tree, alternating (benchmarks/ab_bench.py: the 2%
# rule of a refactor); it builds the base from .device-cache/base-src.tar,
# made before the run by `git archive -o .device-cache/base-src.tar BASE`
# ("abbuild" makes both builds alone; a warm machine keeps the base's).
# AB_ROUNDS (default 3) and AB_ARGS (grid flags, as --quick) shape it.
# The step "models" (issue 14: patch_mx_fast inside mlx-lm) is not in the
# default list; it also needs the mlx-lm wheel in .device-cache (here:
# pip download --no-deps mlx-lm==0.32.2 -d .device-cache; the machine's
# image has transformers and mlx-lm's other needs):
#
#   STEPS="build models" benchmarks/gpu_run.sh OUTPUT_DIR
#
# The step "verify" (issue 46) checks and times the opt-in paths
# (plan/kernel_switches.h: split keys merged by the last split,
# MLX_FUSED_ATTN_SPLIT_MERGE; the one-kernel backward,
# MLX_FUSED_ATTN_BWD_ONE_KERNEL; the persistent grid,
# MLX_FUSED_ATTN_PERSISTENT; the small-grid producer tiles,
# MLX_FUSED_ATTN_SMALL_GRID_PRODUCER; each on with "1" only): their GPU
# tests, which set each switch both ways, then the same GPU tests again with
# all four "1" (a test that sets a switch itself keeps its own), the
# sanitizers over both forms, and each form timed against the other and
# cuDNN.
# The step "tune" (issue 42) tunes routing for Llama 3 8B's config (timed:
# under 30 s is the aim) and runs gpu_bench.py --routing (ROUTING_ARGS: more
# arguments, e.g. --calls 'decode,prefill'). Every step keeps its tuned
# table in OUTPUT_DIR/tuned.json (MLX_FUSED_ATTN_TUNED_FILE), not in the
# machine's cache directory.
set -uo pipefail
OUT=${1:?usage: gpu_run.sh OUTPUT_DIR}
STEPS=${STEPS:-"build test sanitize sweep bench"}
CUDA_ARCHS=${CUDA_ARCHS:-90a}
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export MLX_FUSED_ATTN_TUNED_FILE=${MLX_FUSED_ATTN_TUNED_FILE:-$OUT/tuned.json}
PY=python3
# Build folders that outlive a call on a warm machine: a second build of the
# same tree compiles nothing.
BUILD_DIR=build/gpu-$CUDA_ARCHS
has() { [[ " $STEPS " == *" $1 "* ]]; }
log() { echo "== $(date +%T) $*"; }

# The A/B's two builds: the base (.device-cache/base-src.tar, built once per
# archive on a warm machine) into /tmp/fa_base, this tree into /tmp/fa_new.
# The step "abbuild" runs them alone, e.g. in the background of a test run.
ab_builds() {
  local stamp
  stamp=$(sha256sum .device-cache/base-src.tar | cut -c1-16) || return 1
  if [ "$(cat /tmp/fa_base/.stamp 2>/dev/null)" != "$stamp" ]; then
    rm -rf /tmp/fa_base_src /tmp/fa_base && mkdir -p /tmp/fa_base_src
    tar -xf .device-cache/base-src.tar -C /tmp/fa_base_src || return 1
    ab_build /tmp/fa_base_src /tmp/fa_base /tmp/fa_base_build || return 1
    echo "$stamp" > /tmp/fa_base/.stamp
  fi
  rm -rf /tmp/fa_new
  ab_build . /tmp/fa_new "$BUILD_DIR"
}
ab_build() {
  $PY -m pip install -v --no-build-isolation --no-deps --target "$2" "$1" -Cbuild-dir="$3" \
    --config-settings=cmake.define.MLX_FUSED_ATTN_CUDA_ARCHITECTURES="$CUDA_ARCHS" \
    >> "$OUT/ab_build.log" 2>&1 || { tail -40 "$OUT/ab_build.log"; return 1; }
}

SITE=$($PY -c 'import site; print(site.getsitepackages()[0])')
if ! $PY -c 'import mlx.core as mx; assert mx.cuda.is_available()' 2>/dev/null; then
  log "unpacking MLX into $SITE"
  tar -xJf .device-cache/mlx-cuda-site.tar.xz -C "$SITE" || exit 1
fi
# The machine has no PyPI: the wheels in .device-cache that its image lacks
# (platformdirs, the package's own dependency; mlx-lm for the model tests),
# from `pip download --no-deps platformdirs mlx-lm==0.32.2 -d .device-cache`.
for pair in platformdirs:platformdirs mlx_lm:mlx_lm; do
  module=${pair%%:*}; wheel=${pair##*:}
  if ! $PY -c "import $module" 2>/dev/null && compgen -G ".device-cache/$wheel-*.whl" > /dev/null; then
    $PY -m pip install -q --no-deps --no-index .device-cache/$wheel-*.whl || exit 1
  fi
done
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -2
  $PY -c 'import mlx.core as mx, torch; print("mlx", mx.__version__, mx.default_device(), "torch", torch.__version__)'
  git log -1 --format='commit %H %cd' 2>/dev/null
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if has build; then
  log "build (AOT for sm_$CUDA_ARCHS)"
  start=$SECONDS
  $PY -m pip install -v --no-build-isolation --no-deps . -Cbuild-dir="$BUILD_DIR" \
    --config-settings=cmake.define.MLX_FUSED_ATTN_CUDA_ARCHITECTURES="$CUDA_ARCHS" \
    > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
  log "built in $((SECONDS - start)) s"
  grep -E "GPU backend|CUDA AOT" "$OUT/build.log"
fi

if has abbuild; then
  log "A/B builds"
  start=$SECONDS
  ab_builds || exit 1
  log "A/B builds in $((SECONDS - start)) s"
fi

if has test; then
  log "pytest (GPU and device-independent tests)"
  # The compile and conformance tests need no GPU (CI runs them): left out
  # here, they would take most of the suite's time on the device. -v names
  # each result as it ends: a run cut short still says which test failed.
  $PY -m pytest -rfEs tests --ignore=tests/metal_emu --ignore=tests/metal_host \
    --ignore=tests/test_metal_host_compile.py --ignore=tests/test_cuda_compile.py \
    --ignore=tests/test_cuda_host_compile.py --ignore=tests/test_cuda_sweeps_compile.py \
    --ignore=tests/test_metal_conformance.py --ignore=tests/test_build_metallib.py \
    --ignore=tests/test_instance_lists_compile.py --ignore=tests/test_mlx_includes.py \
    -k "${PYTEST_K:-not cpu}" -p no:cacheprovider -v ${PYTEST_ARGS:-} > "$OUT/pytest.log" 2>&1
  tail -15 "$OUT/pytest.log"
fi

if has sanitize; then
  for tool in memcheck racecheck; do
    log "compute-sanitizer $tool"
    compute-sanitizer --tool $tool --error-exitcode 3 \
      $PY tests/cuda_sanitizer_cases.py >> "$OUT/sanitizer.log" 2>&1
    echo "exit $?" >> "$OUT/sanitizer.log"
    tail -4 "$OUT/sanitizer.log"
  done
fi

if has sweep; then
  log "tile sweep"
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. benchmarks/cuda_tile_sweep.cu -o /tmp/fa_sweep \
    > "$OUT/sweep.txt" 2>&1 && /tmp/fa_sweep >> "$OUT/sweep.txt" 2>&1
  cat "$OUT/sweep.txt"
fi

if has quantsweep; then
  log "quantized decode sweep"
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. benchmarks/cuda_quant_decode_sweep.cu \
    -o /tmp/fa_quant_sweep > "$OUT/quantsweep.txt" 2>&1 && /tmp/fa_quant_sweep >> "$OUT/quantsweep.txt" 2>&1
  cat "$OUT/quantsweep.txt"
fi

if has shortsweep; then
  log "short-sequence tile sweep"
  nvcc -std=c++17 -O3 -arch=sm_90 -I. benchmarks/cuda_short_sweep.cu -o /tmp/fa_short_sweep \
    > "$OUT/shortsweep.txt" 2>&1 && /tmp/fa_short_sweep >> "$OUT/shortsweep.txt" 2>&1
  cat "$OUT/shortsweep.txt"
fi

if has nasweep; then
  log "neighborhood tile sweep"
  nvcc -std=c++17 -O3 -arch=sm_90 -I. benchmarks/cuda_na_sweep.cu -o /tmp/fa_na_sweep \
    > "$OUT/nasweep.txt" 2>&1 && /tmp/fa_na_sweep >> "$OUT/nasweep.txt" 2>&1
  cat "$OUT/nasweep.txt"
fi

if has models; then
  log "mlx-lm models: tests and model_bench"
  $PY -c 'import mlx_lm' || exit 1
  $PY -m pytest -q -rs tests/test_mlx_lm.py tests/test_patching.py tests/test_mx_fast_parity.py \
    -p no:cacheprovider > "$OUT/models_pytest.log" 2>&1
  tail -15 "$OUT/models_pytest.log"
  # mx.fast, auto (after tuning the benchmark's calls) and fused, which
  # runs the package's kernels where routing keeps mx.fast.
  for dtype in bfloat16 float32; do
    $PY benchmarks/model_bench.py --layers 4 --prompt 4096 --gen 128 --train-len 1024 \
      --dtype $dtype --tune --repeats 3 --json "$OUT/model_bench_$dtype.json" \
      --plot "$OUT/model_bench_$dtype.png" ${MODEL_BENCH_ARGS:-} 2>&1 | tee "$OUT/model_bench_$dtype.md"
  done
fi

if has tune; then
  log "tune routing (issue 42): Llama 3 8B's calls, then auto against fused and mx.fast"
  start=$SECONDS
  $PY -m mlx_fused_attn.tune benchmarks/llama3_8b_config.json --json "$OUT/tune_llama.json" \
    2>&1 | tee "$OUT/tune_llama.txt"
  log "tuned in $((SECONDS - start)) s, the import of MLX included"
  $PY benchmarks/gpu_bench.py --routing --out "$OUT/routing.md" --json "$OUT/routing.json" \
    ${ROUTING_ARGS:-} > "$OUT/routing.log" 2>&1
  cat "$OUT/routing.md"
fi

if has verify; then
  log "issue 46's switched paths: tests, sanitizers, both forms timed"
  verify_tests="tests/test_split_merge.py tests/test_split_keys.py
    tests/test_backward_one_kernel.py tests/test_cuda_backward_gpu.py tests/test_cuda_memory.py
    tests/test_cuda_backend.py tests/test_quantized_attention.py tests/test_attention_merge.py"
  $PY -m pytest -q -rs -p no:cacheprovider $verify_tests -k "not cpu" ${PYTEST_ARGS:-} \
    > "$OUT/verify_pytest.log" 2>&1
  tail -5 "$OUT/verify_pytest.log"
  MLX_FUSED_ATTN_SPLIT_MERGE=1 MLX_FUSED_ATTN_BWD_ONE_KERNEL=1 MLX_FUSED_ATTN_PERSISTENT=1 \
    MLX_FUSED_ATTN_SMALL_GRID_PRODUCER=1 $PY -m pytest -q -rs -p no:cacheprovider $verify_tests \
    -k "not cpu" ${PYTEST_ARGS:-} > "$OUT/verify_pytest_opt_in.log" 2>&1
  tail -5 "$OUT/verify_pytest_opt_in.log"
  for tool in memcheck racecheck synccheck; do
    compute-sanitizer --tool $tool --error-exitcode 3 $PY tests/cuda_sanitizer_cases.py \
      >> "$OUT/verify_sanitizer.log" 2>&1
    echo "$tool exit $?" | tee -a "$OUT/verify_sanitizer.log"
  done
  {
    $PY benchmarks/gpu_bench.py --workload
    $PY benchmarks/gpu_bench.py --persistent
    $PY benchmarks/gpu_bench.py --small-grid
    for form in 0 1; do
      MLX_FUSED_ATTN_BWD_ONE_KERNEL=$form $PY benchmarks/bwd_bench.py \
        --case 1x32x1024x64-fp16 --case 1x32x4096x128-bf16 --case 1x32x4096x128-bf16-causal \
        --case 4x32x8192x128-bf16-causal --skip mlx_unfused --skip torch_flash --skip torch_eff
    done
    $PY benchmarks/memory_bench.py --host-read-only
  } > "$OUT/verify_bench.md" 2>&1
  cat "$OUT/verify_bench.md"
fi

if has memory; then
  log "wall against kernel time, outputs in MLX's allocator"
  $PY benchmarks/memory_bench.py 2>&1 | tee "$OUT/memory_bench.md"
fi

if has ab; then
  log "A/B: the base build and this tree, each into its own folder"
  ab_builds || exit 1
  $PY benchmarks/ab_bench.py --base /tmp/fa_base --new /tmp/fa_new --rounds "${AB_ROUNDS:-3}" \
    --out "$OUT/ab.md" --json "$OUT/ab.json" ${AB_ARGS:-} > "$OUT/ab.log" 2>&1
  tail -3 "$OUT/ab.md"
fi

if has bench; then
  log "benchmarks"
  $PY benchmarks/gpu_bench.py --out "$OUT/bench.md" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  cat "$OUT/bench.md"
fi
log done
