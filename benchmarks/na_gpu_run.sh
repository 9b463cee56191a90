#!/usr/bin/env bash
# On the GPU machine (DESIGN.md section 7): build the package with
# benchmarks/gpu_run.sh's build step, then check and time neighborhood
# attention, each step only while the time allows (a device run is short):
# the neighborhood tests on the GPU, benchmarks/na_gpu_bench.py (the
# targets' table) and compute-sanitizer memcheck over
# tests/cuda_na_sanitizer_cases.py. Logs and the table go to OUTPUT_DIR.
#
#   benchmarks/na_gpu_run.sh OUTPUT_DIR [SECONDS]    # default 420 s in all
set -uo pipefail
OUT=${1:?usage: na_gpu_run.sh OUTPUT_DIR [SECONDS]}
END=$((SECONDS + ${2:-420}))
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log() { echo "== $(date +%T) +${SECONDS}s $*"; }
# step NAME MAX_SECONDS RESERVE_SECONDS COMMAND...: runs COMMAND for at most
# MAX_SECONDS, and not into the last RESERVE_SECONDS of the run.
step() {
  local name=$1 max=$2 reserve=$3
  shift 3
  local left=$((END - SECONDS - reserve))
  ((left < max)) && max=$left
  if ((max < 20)); then
    log "$name: skipped (time)"
    return 1
  fi
  log "$name (at most ${max}s)"
  timeout "$max" "$@"
  local rc=$?
  log "$name: exit $rc"
  return $rc
}

step build 300 150 env STEPS=build benchmarks/gpu_run.sh "$OUT/build" || exit 1
step pytest 120 150 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/test_neighborhood.py tests/test_neighborhood_kernels.py -k "not cpu" \
  > "$OUT/pytest.log" 2>&1
tail -15 "$OUT/pytest.log"
step bench 240 20 python3 benchmarks/na_gpu_bench.py --out "$OUT/na_bench.md" \
  --budget-s $((END - SECONDS - 90)) > "$OUT/bench.log" 2>&1
cat "$OUT/bench.log"
step memcheck 90 0 compute-sanitizer --tool memcheck --error-exitcode 3 \
  python3 tests/cuda_na_sanitizer_cases.py > "$OUT/memcheck.log" 2>&1
tail -12 "$OUT/memcheck.log"
log done
