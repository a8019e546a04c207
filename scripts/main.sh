#!/usr/bin/env bash
# The main job. Installs what is missing and builds. Without a GPU: quantizes a synthetic KV cache
# on the CPU and reports the compression and the attention NMSE of turbo3 against f16 K/V.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_missing
find_cuda
log "configure"
cmake -S . -B build/main -DCMAKE_BUILD_TYPE=Release -DTURBO3_CUDA="$TURBO3_CUDA" -DTURBO3_AMD_CHECK=OFF \
  -DTURBO3_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES="${TURBO3_CUDA_ARCHS:-90}"
log "build"
cmake --build build/main -j "$JOBS"
if have_gpu; then
  log "GPU found: the benchmark table is not built yet (see the issues); running the CPU demonstration"
else
  log "no GPU found: running the CPU demonstration"
fi
./build/main/examples/turbo3_demo "$@"
