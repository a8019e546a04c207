#!/usr/bin/env bash
# The main job. Installs what is missing and builds. Without a GPU: quantizes a synthetic KV cache
# on the CPU and reports the compression and the attention NMSE of turbo3 against f16 K/V.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
if have_gpu; then install_missing python3-matplotlib; else install_missing; fi  # the plot needs matplotlib
find_cuda
log "configure"
cmake -S . -B build/main -DCMAKE_BUILD_TYPE=Release -DTURBO3_CUDA="$TURBO3_CUDA" -DTURBO3_AMD_CHECK=OFF \
  -DTURBO3_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES="${TURBO3_CUDA_ARCHS:-90}"
log "build"
cmake --build build/main -j "$JOBS"
if have_gpu && [[ -x build/main/bench/turbo3_bench ]]; then
  log "GPU found: decode benchmark (turbo3 against f16), about a minute"
  mkdir -p bench/results
  json=bench/results/latest.json
  ./build/main/bench/turbo3_bench --benchmark_out="$json" --benchmark_out_format=json "$@"
  log "table"
  py=python3; [[ -x /usr/bin/python3 ]] && py=/usr/bin/python3  # the system one has Debian's matplotlib
  "$py" bench/report.py "$json" --plot bench/results/latest.png --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
else
  log "no GPU found: running the CPU demonstration (quantize a KV cache, report compression and NMSE)"
  ./build/main/examples/turbo3_demo "$@"
fi
