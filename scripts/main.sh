#!/usr/bin/env bash
# The main job. Installs what is missing and builds. With an NVIDIA GPU: runs the benchmark (prefill
# and decode, f16 against turbo3), PyTorch's scaled_dot_product_attention on the same shapes when
# torch is installed, and prints the table (bench/results/latest.{json,md,png}). Without a GPU:
# quantizes a synthetic KV cache on the CPU and reports the compression and the attention NMSE of
# turbo3 against f16 K/V. Arguments go to turbo3_bench (GPU) or to the demo (no GPU).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
if have_gpu; then install_missing "${TURBO3_BUILD_PACKAGES[@]}" python3-matplotlib  # the plot needs matplotlib
else install_missing "${TURBO3_BUILD_PACKAGES[@]}"; fi
find_cuda
log "configure"
cmake -S . -B build/main -DCMAKE_BUILD_TYPE=Release -DTURBO3_CUDA="$TURBO3_CUDA" -DTURBO3_AMD_CHECK=OFF \
  -DTURBO3_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES="${TURBO3_CUDA_ARCHS:-90a}"
log "build"
cmake --build build/main -j "$JOBS"

# An interpreter that can import module $1 (the one on PATH first, then Debian's), or nothing.
python_with() {
  local py
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null && "$py" -c "import $1" 2>/dev/null; then echo "$py"; return; fi
  done
}

bench=build/main/bench/turbo3_bench
if have_gpu && [[ -x $bench ]]; then
  log "GPU found: $(nvidia-smi -L | head -1)"
  mkdir -p bench/results
  json=bench/results/latest.json torch_json=bench/results/latest_torch.json
  cases=$("$bench" --mask --benchmark_list_tests "$@" | grep -c / || true)
  log "benchmark: $cases cases (prefill with causal flag and with a full mask, decode; f16 and turbo3), a few minutes; one line per case as it finishes"
  "$bench" --mask --benchmark_out="$json" --benchmark_out_format=json "$@"
  rm -f "$torch_json"
  torch_py=$(python_with torch)
  if [[ -n $torch_py ]]; then
    log "PyTorch found: scaled_dot_product_attention on the same shapes (flash, cuDNN and memory-efficient backends)"
    "$torch_py" bench/compare_torch.py --mask --out "$torch_json" || log "compare_torch.py failed: the table has no PyTorch rows"
  else
    log "PyTorch not found: no PyTorch comparison (install a CUDA build of torch to get one)"
  fi
  log "table"
  report_py=$(python_with matplotlib)
  inputs=("$json")
  [[ -s $torch_json ]] && inputs+=("$torch_json")
  "${report_py:-python3}" bench/report.py "${inputs[@]}" --out bench/results/latest
  log "to add this table to bench/RESULTS.md: python3 bench/report.py ${inputs[*]} --append"
elif have_gpu; then
  why="no CUDA compiler (nvcc)"
  [[ $TURBO3_CUDA == ON ]] && why="no Google Benchmark (libbenchmark-dev)"
  log "a GPU was found but the benchmark was not built ($why): running the CPU demonstration"
  ./build/main/examples/turbo3_demo "$@"
else
  log "no GPU found: running the CPU demonstration instead of the benchmark (quantize a KV cache, report compression and NMSE)"
  ./build/main/examples/turbo3_demo "$@"
fi
