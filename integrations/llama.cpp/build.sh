#!/usr/bin/env bash
# Builds the TurboQuant llama.cpp fork with its turbo3 flash attention running through this
# library: applies fork.patch to FORK_DIR (once), then builds test-backend-ops, llama-bench and
# llama-perplexity.
#
#   integrations/llama.cpp/build.sh FORK_DIR [--baseline] [--hip] [--jobs N]
#
#   FORK_DIR    a checkout of AtomicBot-ai/atomic-llama-cpp-turboquant at the pinned commit
#               (other commits may need the patch refreshed; the script says so)
#   --baseline  first build the same tree with GGML_CUDA_TURBO3=OFF, where every hook of the
#               patch compiles away (the unpatched fork), and keep it as FORK_DIR/build/bin-baseline;
#               the turbo3 build then recompiles only the four files the option touches
#   --hip       build the HIP backend (-DGGML_HIP=ON; needs a ROCm SDK) instead of CUDA
#
# Output: FORK_DIR/build/bin (and bin-baseline); each binary finds the ggml libraries beside it.
# CUDA architectures come from CUDA_ARCHS (default 90a-real: the library's warpgroup prefill
# kernels need sm_90a), HIP ones from AMDGPU_TARGETS (default gfx1201). ccache is used when
# installed.
set -euo pipefail

PINNED_COMMIT=a6f3d363e4c6a672803d0e6e036f8a75cf43d0ae
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TURBO3_DIR="$(cd "$HERE/../.." && pwd)"

usage() { sed -n '2,20p' "$0"; exit 2; }
[ $# -ge 1 ] || usage
FORK_DIR="$(cd "$1" && pwd)"; shift
BASELINE=0; BACKEND=cuda; JOBS="$(nproc)"
while [ $# -gt 0 ]; do
  case "$1" in
    --baseline) BASELINE=1 ;;
    --hip) BACKEND=hip ;;
    --jobs) JOBS="$2"; shift ;;
    *) usage ;;
  esac
  shift
done

log() { printf '\n== %s\n' "$*"; }

if git -C "$FORK_DIR" rev-parse HEAD >/dev/null 2>&1; then
  head="$(git -C "$FORK_DIR" rev-parse HEAD)"
  [ "$head" = "$PINNED_COMMIT" ] || echo "note: $FORK_DIR is at $head, the patch is made for $PINNED_COMMIT"
fi
[ -f "$FORK_DIR/TURBOQUANT_VERSION" ] || { echo "error: $FORK_DIR is not the TurboQuant fork (no TURBOQUANT_VERSION)"; exit 1; }

log "patch"
if patch -d "$FORK_DIR" -p1 --dry-run --reverse --force -s < "$HERE/fork.patch" >/dev/null 2>&1; then
  echo "already applied"
else
  patch -d "$FORK_DIR" -p1 --forward -s < "$HERE/fork.patch"
  echo "applied $HERE/fork.patch"
fi

common=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF
        -DLLAMA_OPENSSL=OFF -DGGML_CUDA_TURBO3_DIR="$TURBO3_DIR" -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON)
if [ "$BACKEND" = cuda ]; then
  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  common+=(-DGGML_CUDA=ON -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_FA_ALL_QUANTS=OFF
           -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a-real}")
else
  common+=(-DGGML_HIP=ON -DAMDGPU_TARGETS="${AMDGPU_TARGETS:-gfx1201}")
fi
# A build host without the NVIDIA driver (CI, a container) has no libcuda.so.1 for the linker to
# check ggml-cuda's driver calls against; the driver resolves them where the binaries run.
if [ "$BACKEND" = cuda ] && ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1 "; then
  common+=(-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined)
fi
targets=(test-backend-ops llama-bench llama-perplexity)

build() {  # build <turbo3 ON|OFF>
  log "configure $FORK_DIR/build (GGML_CUDA_TURBO3=$1, $BACKEND)"
  cmake -S "$FORK_DIR" -B "$FORK_DIR/build" "${common[@]}" -DGGML_CUDA_TURBO3="$1" > "$FORK_DIR/build.configure.log" 2>&1 ||
    { cat "$FORK_DIR/build.configure.log"; exit 1; }
  grep -E "turbo3:|CMAKE_CUDA_ARCHITECTURES=" "$FORK_DIR/build.configure.log" || true
  log "build (${targets[*]}, $JOBS jobs)"
  cmake --build "$FORK_DIR/build" --target "${targets[@]}" -j "$JOBS"
}

if [ "$BASELINE" = 1 ]; then
  build OFF
  rm -rf "$FORK_DIR/build/bin-baseline"
  cp -a "$FORK_DIR/build/bin" "$FORK_DIR/build/bin-baseline"
fi
build ON
# The profile step's kernel timer, for machines without Nsight Systems (run_engine.sh profile).
cupti_dir="$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")/.."
if [ "$BACKEND" = cuda ] && [ -f "$cupti_dir/include/cupti.h" ]; then
  g++ -std=c++17 -O2 -shared -fPIC -I"$cupti_dir/include" "$HERE/kernel_times.cpp" -L"$cupti_dir/lib64" \
    -L"$cupti_dir/lib" -lcupti -o "$FORK_DIR/build/bin/libkernel_times.so" && log "kernel timer: libkernel_times.so"
fi
log "done: $FORK_DIR/build/bin$([ "$BASELINE" = 1 ] && echo " and $FORK_DIR/build/bin-baseline")"
