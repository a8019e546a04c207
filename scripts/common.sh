# Shared by scripts/main.sh and scripts/test.sh: install what is missing, find the toolchains.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '\n==> %s\n' "$*"; }

# Debian packages the build and the checks use (CUDA comes from the machine, not from Debian).
TURBO3_PACKAGES=(cmake g++ make python3 catch2 libbenchmark-dev clang-19 libamdhip64-dev rocm-device-libs)

install_missing() {
  local missing=()
  for p in "${TURBO3_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "installing: ${missing[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

find_cuda() {
  if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export PATH=/usr/local/cuda/bin:$PATH
  fi
  if command -v nvcc >/dev/null; then
    TURBO3_CUDA=ON
  else
    TURBO3_CUDA=OFF
    log "nvcc not found: the NVIDIA build and GPU tests are not built"
  fi
}

have_gpu() {
  command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU
}

JOBS=$(nproc 2>/dev/null || echo 2)
