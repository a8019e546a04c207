# Shared by scripts/main.sh and scripts/test.sh: install what is missing, find the toolchains.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '\n==> %s\n' "$*"; }

# Debian packages (CUDA comes from the machine, not from Debian): what the main job builds with,
# and what the tests add (Catch2, the AMD compile check's clang, HIP headers and device libraries).
TURBO3_BUILD_PACKAGES=(cmake g++ make python3 libbenchmark-dev)
TURBO3_TEST_PACKAGES=(catch2 clang-19 libamdhip64-dev rocm-device-libs)

# install_missing PACKAGE...: apt-get installs those not installed yet.
install_missing() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [[ -n ${TURBO3_NO_INSTALL:-} ]] || ! command -v apt-get >/dev/null; then
    local why="no apt-get"
    [[ -n ${TURBO3_NO_INSTALL:-} ]] && why="TURBO3_NO_INSTALL is set"
    log "not installing ($why): ${missing[*]}; building with what is here"
    return 0
  fi
  log "installing: ${missing[*]}"
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  # A machine without a package mirror (an offline GPU host) builds with what it already has; the
  # configure step then says plainly what is missing.
  if ! { $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
      --no-install-recommends "${missing[@]}"; }; then
    log "could not install ${missing[*]} (no package access?): building with what is here"
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
