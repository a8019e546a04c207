#!/usr/bin/env bash
# The integration's measurements on one GPU, in one run: the fork's own FLASH_ATTN_EXT tests,
# llama-bench on both synthetic models (f16 cache and turbo3 on the unpatched fork, turbo3
# through the library) and llama-perplexity's KL divergence against the f16 cache.
#
#   integrations/llama.cpp/run_engine.sh BASELINE_BIN TURBO3_BIN FORK_DIR OUT_DIR [steps...]
#
#   BASELINE_BIN  bin/ of the unpatched fork (build.sh --baseline: FORK_DIR/build/bin-baseline)
#   TURBO3_BIN    bin/ of the patched fork (build.sh: FORK_DIR/build/bin)
#   FORK_DIR      the fork's tree; only gguf-py/ and models/ggml-vocab-llama-spm.gguf are read
#   OUT_DIR       where the logs go: test-backend-ops.txt, llama-bench.txt, perplexity.txt
#   steps         any of: tests bench deep perplexity setrows profile (default: tests bench perplexity);
#                 setrows: the library build with the fork's TURBO_WHT and SET_ROWS, with TURBO_WHT on the
#                 library, with both on it (its default), and with the rotations folded into attention
#
# The models and the text are written first (make_model.py, seeded) under $WORK_DIR (default
# /tmp/turbo3-engine). Environment: DEPTHS (llama-bench depths, default 0,8192,32768), REPS
# (default 2), BENCH_PP (prompt sizes, default 512,2048), MODELS (default "gemma llama"), TEST_BASELINE=0 (the tests step skips the unpatched
# build's FLASH_ATTN_EXT run).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 4 ] || { sed -n '2,17p' "$0"; exit 2; }
BASE="$(cd "$1" && pwd)"; LIB="$(cd "$2" && pwd)"; FORK="$(cd "$3" && pwd)"; OUT="$4"; shift 4
STEPS="${*:-tests bench perplexity}"
WORK="${WORK_DIR:-/tmp/turbo3-engine}"
DEPTHS="${DEPTHS:-0,8192,32768}"
REPS="${REPS:-2}"
MODELS="${MODELS:-gemma llama}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT" "$WORK"

has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
stamp() { printf '\n### %s  (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
base() { LD_LIBRARY_PATH="$BASE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BASE/$@"; }
lib() { LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$LIB/$@"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"

# ---- models and text (seeded; written here because they are too large to carry) --------------
for m in $MODELS; do
  [ -f "$WORK/$m.gguf" ] || "$PYTHON" "$HERE/make_model.py" model --fork "$FORK" --shape "$m" --out "$WORK/$m.gguf" &
done
[ -f "$WORK/text.txt" ] || "$PYTHON" "$HERE/make_model.py" text --out "$WORK/text.txt" --words 60000
wait

# ---- the fork's own tests --------------------------------------------------------------------
if has tests; then
  {
    if [ "${TEST_BASELINE:-1}" = 1 ]; then
      stamp "unpatched fork: test-backend-ops -o FLASH_ATTN_EXT"
      base test-backend-ops -b CUDA0 -o FLASH_ATTN_EXT 2>&1 | grep -vE "^\s*$"
    fi
    stamp "through turbo3: test-backend-ops -o FLASH_ATTN_EXT"
    lib test-backend-ops -b CUDA0 -o FLASH_ATTN_EXT 2>&1 | grep -vE "^\s*$"
  } > "$OUT/test-backend-ops.txt" 2>&1
  {  # the rotations the fork applies around attention, which the library also serves
    stamp "unpatched fork: test-backend-ops -o TURBO_WHT"
    base test-backend-ops -b CUDA0 -o TURBO_WHT 2>&1 | grep -E "TURBO_WHT|tests passed|turbo3:"
    stamp "through turbo3: test-backend-ops -o TURBO_WHT"
    lib test-backend-ops -b CUDA0 -o TURBO_WHT 2>&1 | grep -E "TURBO_WHT|tests passed|turbo3:"
  } > "$OUT/test-backend-ops-wht.txt" 2>&1
  cat "$OUT/test-backend-ops-wht.txt"
  # per build: cases passed, failed and not supported, overall and with a turbo3 K/V
  sed 's/\x1b\[[0-9;]*m//g' "$OUT/test-backend-ops.txt" | awk '
    /^### unpatched/ { s = "unpatched" } /^### through turbo3/ { s = "turbo3 " }
    /FLASH_ATTN_EXT\(/ { st = /: OK/ ? "passed" : /not supported/ ? "not supported" : /FAIL/ ? "failed" : "other";
                         n[s " all    " st]++; if (/type_K=turbo3/) n[s " turbo3 " st]++ }
    /tests passed|turbo3: FLASH_ATTN_EXT [0-9]+ served/ { print s ": " $0 }
    END { for (k in n) print k ": " n[k] }' | sort
fi

# ---- end to end ------------------------------------------------------------------------------
bench() {  # bench <label> <runner> <model> <cache type> [extra llama-bench args]
  local label="$1" runner="$2" model="$3" cache="$4"; shift 4
  stamp "$label: $model, cache $cache"
  "$runner" llama-bench -m "$WORK/$model.gguf" -ngl 99 -fa 1 -ctk "$cache" -ctv "$cache" -r "$REPS" "$@" -o md 2>&1 |
    grep -vE "^(llama_|load|print_info|ggml_cuda_init|  Device|main:|\s*$)"
}
if has bench; then
  {
    for m in $MODELS; do
      bench "unpatched fork" base "$m" f16 -p "${BENCH_PP:-512,2048}" -n 128 -d "$DEPTHS"
      bench "unpatched fork" base "$m" turbo3 -p "${BENCH_PP:-512,2048}" -n 128 -d "$DEPTHS"
      bench "through turbo3" lib "$m" turbo3 -p "${BENCH_PP:-512,2048}" -n 128 -d "$DEPTHS"
    done
  } > "$OUT/llama-bench.txt" 2>&1
  cat "$OUT/llama-bench.txt"
fi
if has deep; then
  {
    for m in $MODELS; do
      bench "unpatched fork" base "$m" f16 -p 0 -n 128 -d 131072 -r 1
      bench "unpatched fork" base "$m" turbo3 -p 0 -n 128 -d 131072 -r 1
      bench "through turbo3" lib "$m" turbo3 -p 0 -n 128 -d 131072 -r 1
    done
  } >> "$OUT/llama-bench.txt" 2>&1
  tail -40 "$OUT/llama-bench.txt"
fi
if has setrows; then
  {
    for m in $MODELS; do
      GGML_TURBO3_WHT=0 GGML_TURBO3_SET_ROWS=0 bench "through turbo3, the fork's TURBO_WHT and SET_ROWS" lib "$m" \
        turbo3 -p "${BENCH_PP:-512,2048}" -n 128 -d "$DEPTHS"
      GGML_TURBO3_SET_ROWS=0 bench "through turbo3, TURBO_WHT through rotate_groups" lib "$m" turbo3 \
        -p "${BENCH_PP:-512,2048}" -n 128 -d "$DEPTHS"
      bench "through turbo3, TURBO_WHT and SET_ROWS too" lib "$m" turbo3 -p "${BENCH_PP:-512,2048}" -n 128 -d "$DEPTHS"
      GGML_TURBO3_FUSE_WHT=1 bench "through turbo3, rotations folded into attention" lib "$m" turbo3 \
        -p "${BENCH_PP:-512,2048}" -n 128 -d "$DEPTHS"
    done
  } >> "$OUT/llama-bench.txt" 2>&1
  tail -30 "$OUT/llama-bench.txt"
fi

if has profile; then  # where prompt processing spends its time: GPU kernels of one pp2048, per build and cache
  # runs: <runner> <cache> <label>; "plain" leaves TURBO_WHT and SET_ROWS to the fork's kernels,
  # "routes" (the library build's default) runs them on the library too, "fused" folds the
  # rotations into the attention call (GGML_TURBO3_FUSE_WHT=1)
  runs=("base f16 plain" "base turbo3 plain" "lib turbo3 plain" "lib turbo3 routes" "lib turbo3 fused")
  profile_one() {  # profile_one <model> <runner> <cache> <label>
    local m="$1" runner="$2" cache="$3" label="$4" name="profile-$1-$2-$3-$4"
    local bin; bin="$([ "$runner" = base ] && echo "$BASE" || echo "$LIB")"
    local flags=(GGML_TURBO3_WHT=0 GGML_TURBO3_SET_ROWS=0)
    [ "$label" = routes ] && flags=(GGML_TURBO3_LOG=0)
    [ "$label" = fused ] && flags=(GGML_TURBO3_FUSE_WHT=1)
    echo "== $m, $runner, cache $cache, $label: top kernels"
    if command -v nsys > /dev/null; then
      env "${flags[@]}" LD_LIBRARY_PATH="$bin" nsys profile --force-overwrite true -o "$WORK/$name" "$bin/llama-bench" \
        -m "$WORK/$m.gguf" -ngl 99 -fa 1 -ctk "$cache" -ctv "$cache" -p 2048 -n 0 -r 1 > /dev/null 2>&1
      nsys stats --report cuda_gpu_kern_sum --format csv -o "$OUT/$name" "$WORK/$name.nsys-rep" > /dev/null 2>&1
      sed -n '2,16p' "$OUT/${name}_cuda_gpu_kern_sum.csv" 2>/dev/null | cut -d, -f1-3,9 | cut -c1-160
    else  # CUPTI, through kernel_times.cpp: total ns, count, average ns, name
      env "${flags[@]}" KERNEL_TIMES_OUT="$OUT/$name.csv" LD_PRELOAD="$KERNEL_TIMES_LIB" LD_LIBRARY_PATH="$bin" \
        "$bin/llama-bench" -m "$WORK/$m.gguf" -ngl 99 -fa 1 -ctk "$cache" -ctv "$cache" -p 2048 -n 0 -r 1 > /dev/null 2>&1
      sed -n '2,16p' "$OUT/$name.csv" 2>/dev/null | cut -c1-180
    fi
  }
  if command -v nsys > /dev/null || [ -f "${KERNEL_TIMES_LIB:=$LIB/libkernel_times.so}" ]; then
    for m in $MODELS; do
      for run in "${runs[@]}"; do profile_one "$m" $run; done
    done | tee "$OUT/profile.txt"
  else
    echo "profile: neither nsys nor $KERNEL_TIMES_LIB found" | tee "$OUT/profile.txt"
  fi
fi

# ---- same answers ----------------------------------------------------------------------------
ppl() {  # ppl <label> <runner> <model> <cache> [args]
  local label="$1" runner="$2" model="$3" cache="$4"; shift 4
  stamp "$label: $model, cache $cache"
  "$runner" llama-perplexity -m "$WORK/$model.gguf" -f "$WORK/text.txt" -ngl 99 -fa on -c 2048 -b 2048 --chunks 12 \
    -ctk "$cache" -ctv "$cache" "$@" 2>&1 |
    grep -E "Final estimate|Mean    KLD|Maximum KLD|99.0%   KLD|Median  KLD|Same top p|RMS Δp|Mean PPL|turbo3:|error|failed"
}
if has perplexity; then
  {
    for m in $MODELS; do
      ppl "unpatched fork (base logits)" base "$m" f16 --kl-divergence-base "$WORK/$m.kld"
      ppl "unpatched fork" base "$m" turbo3 --kl-divergence-base "$WORK/$m.kld" --kl-divergence
      GGML_TURBO3_WHT=0 GGML_TURBO3_SET_ROWS=0 ppl "through turbo3, the fork's TURBO_WHT and SET_ROWS" lib "$m" \
        turbo3 --kl-divergence-base "$WORK/$m.kld" --kl-divergence
      ppl "through turbo3, TURBO_WHT and SET_ROWS too" lib "$m" turbo3 --kl-divergence-base "$WORK/$m.kld" \
        --kl-divergence
      GGML_TURBO3_FUSE_WHT=1 ppl "through turbo3, rotations folded into attention" lib "$m" turbo3 \
        --kl-divergence-base "$WORK/$m.kld" --kl-divergence
      # the arithmetic alone: the library's f16 kernels against the fork's, on the same f16 cache
      GGML_TURBO3=all ppl "through turbo3 (f16 nodes too)" lib "$m" f16 --kl-divergence-base "$WORK/$m.kld" --kl-divergence
    done
  } > "$OUT/perplexity.txt" 2>&1
  cat "$OUT/perplexity.txt"
fi
