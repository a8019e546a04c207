#!/usr/bin/env bash
# Installs what is missing, builds everything this machine can build and runs every test:
# CPU tests, the install/find_package consumer, the nvcc build (GPU tests skip with code 77 without
# a GPU) and the AMD ISA compile checks for gfx1201, gfx1100 and gfx942.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_missing "${TURBO3_BUILD_PACKAGES[@]}" "${TURBO3_TEST_PACKAGES[@]}"
find_cuda
log "configure (CUDA: $TURBO3_CUDA, AMD check: ON)"
cmake -S . -B build/test -DCMAKE_BUILD_TYPE=Release -DTURBO3_CUDA="$TURBO3_CUDA" -DTURBO3_AMD_CHECK=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${TURBO3_CUDA_ARCHS:-90a}"
log "build"
cmake --build build/test -j "$JOBS"
log "test"
ctest --test-dir build/test --output-on-failure -j "$JOBS" --timeout 1500
