#!/usr/bin/env bash
# Runs prebuilt binaries from .devrun/ on a GPU machine: GPU tests, the benchmark, then
# compute-sanitizer memcheck and racecheck on the GPU test binary. Logs go to $OUT when set.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-/tmp/turbo3_out}
mkdir -p "$out"
nvidia-smi -L
echo "== gpu tests"; ./.devrun/turbo3_gpu_tests 2>&1 | tee "$out/gpu_tests.log" | tail -40
echo "== benchmark"; ./.devrun/turbo3_bench --benchmark_out="$out/bench.json" --benchmark_out_format=json \
  --benchmark_repetitions=${BENCH_REPS:-1} ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log" | tail -30
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [[ -x $san ]]; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool"
    "$san" --tool $tool --error-exitcode 9 ./.devrun/turbo3_gpu_tests ${SANITIZE_FILTER:-"[write],[capture],[vec-san],[tile-san],[mma-san]"} 2>&1 \
      | tee "$out/sanitizer_$tool.log" | tail -6
    echo "sanitizer $tool exit: ${PIPESTATUS[0]}"
  done
else
  echo "compute-sanitizer not found"
fi
