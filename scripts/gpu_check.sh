#!/usr/bin/env bash
# scripts/gpu_check.sh -- the one GPU script: build, test and benchmark the
# CUDA backend in one run, well inside 8 minutes on an H200.
#
#   scripts/gpu_check.sh [BUILD_DIR]        (default: build-gpu)
#
# 1. Builds ember with the CUDA backend for sm_90 only (Release).
# 2. Runs the GPU test subset:
#    - test_cuda_load: the loader loads the plugin and finds a device;
#    - gpu_vs_cpu: every kernel of the CUDA backend against the CPU backend
#      on fresh random inputs, with relative-error bounds;
#    - every ctest test labelled "cuda" (the core's and Lua's GPU tests).
# 3. Prints the benchmark table: matmul TFLOP/s of the plugin's gemm
#    against the same cuBLAS call made directly, and fused attention
#    forward/backward time in float32 and bfloat16 at L = 1K, 4K, 16K
#    against PyTorch's scaled_dot_product_attention on the same GPU; and
#    the declared variants (local window and blocks, relpos alibi/t5/shaw)
#    at L = 1K, 4K, float32 and bfloat16, as ratios to standard attention
#    in the same run: the kernels (gpu_bench) and, float32, the whole
#    ember.Attention call with its route (scripts/bench/attention_variants_cuda.lua,
#    which also times two variants written in Lua: softcap and a document
#    mask of 8 equal documents, their programs run by the fused kernel).
#
# Built for a scarce GPU session (one call, a hard wall-clock limit):
# * a time budget for the whole run, GPU_CHECK_BUDGET seconds (default 540,
#   inside a 600 s call): every step's timeout is cut to what is left, and a
#   step that no longer fits is SKIPPED (named in the summary), never half-run;
# * cheapest and most telling first: the CUDA plugin and the two test
#   programs are built before the rest, so the loader test and gpu_vs_cpu
#   run even when the full build would not fit; then ctest -L cuda (without
#   the two tests already run), then the benchmarks; then, if
#   compute-sanitizer is installed and time is left, racecheck/synccheck/
#   memcheck on the row, reduce and attention kernels (what no emulator sees);
# * loud: each failure prints FAILED at once, and the summary (always
#   printed, also after an early exit) lists every failed and skipped step;
# * the logs and the summary are copied to GPU_CHECK_OUT (default $OUT, the
#   folder a device call brings back), so nothing is lost with the machine.
# Exit status: 0 when every step passed, 1 otherwise; 77 when no GPU.
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then # the header above is the help
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${1:-$ROOT/build-gpu}
T0=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-540}
SAVE=${GPU_CHECK_OUT:-${OUT:-}}
JOBS=$(nproc 2>/dev/null || echo 4)
FAILED=()
SKIPPED=()
LOG=$B/gpu_check.log
EXIT_CODE=1

step() { printf '\n== %s  [%ds of %ds]\n' "$*" $(( $(date +%s) - T0 )) "$BUDGET"; }
fail() { FAILED+=("$1"); printf 'FAILED: %s\n' "$1"; }
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
# limit WANT MIN: WANT seconds, or what is left of the budget (keeping 10 s
# for the summary); prints nothing (and the step is skipped) under MIN.
limit() {
  local l=$(( $(left) - 10 )) t=$1
  [ "$l" -lt "$t" ] && t=$l
  [ "$t" -lt "$2" ] && return 1
  echo "$t"
}
skip() { SKIPPED+=("$1"); printf 'SKIPPED (out of time, %ds left): %s\n' "$(left)" "$1"; }

summary() {
  local rc=$?
  [ "$EXIT_CODE" = 77 ] && rc=77
  {
    printf '\n== summary  [%ds]\n' $(( $(date +%s) - T0 ))
    if [ "$rc" = 77 ]; then
      echo "gpu_check: SKIP, no usable CUDA device"
    elif [ ${#FAILED[@]} -eq 0 ] && [ "$rc" = 0 ]; then
      echo "gpu_check: all steps passed${SKIPPED[0]:+ (but some were skipped)}"
    else
      printf 'gpu_check: %d step(s) FAILED:\n' "${#FAILED[@]}"
      [ ${#FAILED[@]} -gt 0 ] && printf '  %s\n' "${FAILED[@]}"
    fi
    if [ ${#SKIPPED[@]} -gt 0 ]; then
      printf 'skipped for lack of time (raise GPU_CHECK_BUDGET, or rerun with the build kept):\n'
      printf '  %s\n' "${SKIPPED[@]}"
    fi
  } | tee "$B/gpu_check_summary.txt"
  if [ -n "$SAVE" ] && mkdir -p "$SAVE" 2>/dev/null; then
    cp -f "$B"/gpu_check*.txt "$B"/gpu_check.log "$B"/test_cuda_load.txt "$B"/gpu_vs_cpu.txt \
      "$B"/ctest_cuda.txt "$B"/bench_*.txt "$B"/sanitizer_*.txt "$SAVE"/ 2>/dev/null
  fi
  exit "$rc"
}

mkdir -p "$B"
: > "$LOG"
trap summary EXIT
trap 'fail "interrupted (SIGTERM/SIGINT: the caller'"'"'s time limit?)"; exit 1' TERM INT
step "machine"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader ||
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  if ! nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
    echo "SKIP: nvidia-smi lists no GPU; not building"
    EXIT_CODE=77
    exit 77
  fi
else
  echo "nvidia-smi not found"
fi
/usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1 || echo "nvcc not at /usr/local/cuda/bin"
command -v compute-sanitizer >/dev/null || [ -x /usr/local/cuda/bin/compute-sanitizer ] ||
  echo "compute-sanitizer not found: the sanitizer step will be skipped"

# ---- 1. build -------------------------------------------------------------
step "1. build (CUDA for sm_90, Release): the plugin and its test programs first"
if ! timeout -k 10 "$(limit 120 30 || echo 1)" cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release \
       -DEMBER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real >>"$LOG" 2>&1; then
  tail -30 "$LOG"
  fail "cmake configure (log: $LOG)"
  exit 1
fi
grep -E "ember: CUDA" "$LOG" | tail -2
if ! t=$(limit 300 60); then skip "build"; exit 1; fi
if ! timeout -k 10 "$t" cmake --build "$B" -j"$JOBS" --target ember_backend_cuda ember_backend_cpu \
       test_cuda_load gpu_vs_cpu >>"$LOG" 2>&1; then
  grep -E "error|Error" "$LOG" | head -30
  fail "build of the CUDA plugin (timeout ${t}s; log: $LOG)"
  exit 1
fi
PLUGIN=$B/plugins/ember_backend_cuda.so
CUDA_BIN=$B/backends/cuda
if [ ! -f "$PLUGIN" ]; then
  fail "the build made no $PLUGIN (was the CUDA toolkit found?)"
  exit 1
fi
echo "built $PLUGIN  [$(( $(date +%s) - T0 ))s]"

# ---- 2. tests -------------------------------------------------------------
step "2a. the loader loads the CUDA plugin"
if timeout -k 5 60 "$CUDA_BIN/test_cuda_load" "$PLUGIN" reject > "$B/test_cuda_load.txt" 2>&1; then
  grep -m1 "rejected" "$B/test_cuda_load.txt"
  echo "SKIP: no usable CUDA device on this machine; nothing GPU-side can be checked"
  EXIT_CODE=77
  exit 77
fi
timeout -k 5 60 "$CUDA_BIN/test_cuda_load" "$PLUGIN" load || fail "test_cuda_load"

step "2b. every CUDA kernel against the CPU backend (gpu_vs_cpu)"
SEED=${GPU_CHECK_SEED:-$(date +%s)}
echo "seed $SEED (rerun with GPU_CHECK_SEED=$SEED)"
if t=$(limit 240 20); then
  timeout -k 10 "$t" "$CUDA_BIN/gpu_vs_cpu" --cuda "$PLUGIN" --cpu "$B/plugins/ember_backend_cpu.so" \
    --seed "$SEED" > "$B/gpu_vs_cpu.txt" 2>&1
  rc=$?
  grep -E "^(FAIL|SKIP|note)|emulator|launch|illegal|misaligned|resources" "$B/gpu_vs_cpu.txt" | head -40
  head -1 "$B/gpu_vs_cpu.txt"
  tail -1 "$B/gpu_vs_cpu.txt"
  case $rc in
    0) ;;
    124|137) fail "gpu_vs_cpu timed out after ${t}s (a hung kernel? full output in $B/gpu_vs_cpu.txt)" ;;
    *) fail "gpu_vs_cpu (exit $rc; full output in $B/gpu_vs_cpu.txt)" ;;
  esac
else
  skip "gpu_vs_cpu"
fi

step "1b. build the rest (the ember binary, plugins and benchmarks, for ctest and step 3)"
FULL_BUILT=0
if t=$(limit 300 30); then
  if timeout -k 10 "$t" cmake --build "$B" -j"$JOBS" >>"$LOG" 2>&1; then
    FULL_BUILT=1
  else
    grep -E "error|Error" "$LOG" | tail -30
    fail "full build (timeout ${t}s; log: $LOG)"
  fi
else
  skip "full build, so ctest -L cuda and the benchmarks"
fi

step "2c. ctest -L cuda (gradients, attention variants, training on the GPU)"
# cuda.load and cuda.gpu_vs_cpu are steps 2a and 2b: not twice.
CTEST_SKIP='^cuda\.(load|gpu_vs_cpu)$'
if [ "$FULL_BUILT" != 1 ]; then
  echo "not run: the full build did not complete"
elif (cd "$B" && ctest -N -L cuda -E "$CTEST_SKIP" 2>/dev/null | grep -q "Total Tests: [1-9]"); then
  if t=$(limit 200 30); then
    (cd "$B" && timeout -k 10 "$t" ctest -L cuda -E "$CTEST_SKIP" --timeout "$t" --output-on-failure \
       -j2 > "$B/ctest_cuda.txt" 2>&1)
    rc=$?
    tail -25 "$B/ctest_cuda.txt"
    [ $rc -eq 0 ] || fail "ctest -L cuda (exit $rc; full output in $B/ctest_cuda.txt)"
  else
    skip "ctest -L cuda"
  fi
else
  echo "no ctest test is labelled cuda in this build"
fi

# ---- 3. benchmarks ----------------------------------------------------------
step "3. benchmarks"
: > "$B/bench_ember.txt"
: > "$B/bench_torch.txt"
if [ "$FULL_BUILT" != 1 ]; then
  echo "not run: the full build did not complete"
elif t=$(limit 200 30); then
  timeout -k 10 "$t" "$CUDA_BIN/gpu_bench" "$PLUGIN" > "$B/bench_ember.txt" 2>&1 ||
    fail "gpu_bench (exit $?, timeout ${t}s; output in $B/bench_ember.txt)"
else
  skip "gpu_bench"
fi
grep "^#" "$B/bench_ember.txt"
if [ "$FULL_BUILT" = 1 ] && t=$(limit 150 30); then
timeout -k 10 "$t" python3 - > "$B/bench_torch.txt" 2>&1 <<'PY' || echo "PyTorch SDPA benchmark failed: $(tail -1 "$B/bench_torch.txt")"
import time, torch
import torch.nn.functional as F
assert torch.cuda.is_available(), "torch sees no GPU"
sdpa = getattr(F, "scaled_dot_product_attention", None)
if sdpa is None:  # torch < 2.0: time plain softmax(QK^T/sqrt(d))V instead, and say so
    print("# this torch has no scaled_dot_product_attention: the sdpa columns are math attention")
    def sdpa(q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5, dim=-1) @ v
B, H, D = 1, 16, 64
for name, dt in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
    for L in (1024, 4096, 16384):
        q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=dt, requires_grad=True) for _ in range(3))
        do = torch.randn(B, H, L, D, device="cuda", dtype=dt)
        iters = 10 if L <= 4096 else 3
        for _ in range(2):
            sdpa(q, k, v).backward(do)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            o = sdpa(q, k, v)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        for _ in range(iters):
            sdpa(q, k, v).backward(do)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        fwd = 1e3 * (t1 - t0) / iters
        both = 1e3 * (t2 - t1) / iters
        print(f"sdpa {name} {L} {fwd:.3f} {both - fwd:.3f}", flush=True)
print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}")
PY
else
  skip "PyTorch SDPA benchmark"
fi
grep "^#" "$B/bench_torch.txt"

echo
echo "matmul, square N x N x N (TFLOP/s; ember's gemm vs the same cuBLAS call made directly)"
printf '%-9s %6s %10s %10s %7s\n' dtype N ember cuBLAS ratio
awk '$1 == "matmul" { printf "%-9s %6d %10.2f %10.2f %6.0f%%\n", $2, $3, $4, $5, ($5 > 0 ? 100 * $4 / $5 : 0) }' "$B/bench_ember.txt"
echo
echo "fused attention, B=1 H=16 d=64 non-causal (ms per call; PyTorch scaled_dot_product_attention)"
printf '%-9s %6s %10s %10s %10s %10s %10s %10s\n' dtype L ember-fwd ember-bwd ember-f+b sdpa-fwd sdpa-bwd sdpa-f+b
awk 'FNR == NR && $1 == "sdpa" { f[$2 " " $3] = $4; b[$2 " " $3] = $5; next }
     $1 == "attention" {
       k = $2 " " $3
       sf = (k in f) ? sprintf("%10.2f", f[k]) : sprintf("%10s", "n/a")
       sb = (k in b) ? sprintf("%10.2f", b[k]) : sprintf("%10s", "n/a")
       st = (k in f) ? sprintf("%10.2f", f[k] + b[k]) : sprintf("%10s", "n/a")
       printf "%-9s %6d %10.2f %10.2f %10.2f %s %s %s\n", $2, $3, $4, $5, $4 + $5, sf, sb, st
     }' "$B/bench_torch.txt" "$B/bench_ember.txt"

echo
echo "declared variants, fused kernels, B=1 H=16 d=64 non-causal (ms per call; ratio of fwd+bwd to standard)"
echo "  window = 256+256 sliding, blocks = 64 with 1 neighbour + 64 global tokens, t5 = 32 buckets,"
echo "  shaw = key and value tables clipped at 16 (table gradients included in bwd);"
echo "  traced programs (variants written in Lua): softcap = 50 tanh(s/50) with its gradient,"
echo "  document = 8 equal documents (doc[b][q] == doc[b][k]) with its block map"
printf '%-9s %6s %-9s %10s %10s %10s %8s\n' dtype L variant fwd bwd f+b ratio
awk '$1 == "variant" && $4 == "standard" { std[$2 " " $3] = $5 + $6 }
     $1 == "variant" { line[++n] = $0 }
     END {
       for (i = 1; i <= n; i++) {
         split(line[i], f, " ")
         k = f[2] " " f[3]; t = f[5] + f[6]
         r = (k in std && std[k] > 0) ? sprintf("%8.2f", t / std[k]) : sprintf("%8s", "n/a")
         printf "%-9s %6d %-9s %10.2f %10.2f %10.2f %s\n", f[2], f[3], f[4], f[5], f[6], t, r
       }
     }' "$B/bench_ember.txt"
echo
echo "the same through ember.Attention, with the Lua variants softcap and document mask (float32; routes from ember.attention_routes())"
if [ "$FULL_BUILT" = 1 ] && t=$(limit 120 30); then
  (cd "$ROOT" && EMBER_PLUGIN_PATH="$B/plugins" EMBER_PLUGIN_PATH_ONLY=1 timeout -k 10 "$t" "$B/bin/ember" \
     scripts/bench/attention_variants_cuda.lua --lengths 1024,4096 2>&1 | tee "$B/bench_variants_lua.txt")
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "attention_variants_cuda.lua (a variant left the fused route, or it failed)"
else
  skip "attention_variants_cuda.lua"
fi

# ---- 4. compute-sanitizer (last: slow, and only what time is left) ----------
step "4. compute-sanitizer on gpu_vs_cpu: races and barriers in shared memory, memory errors"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ ! -x "$SAN" ]; then
  echo "not run: compute-sanitizer is not installed"
else
  for run in "racecheck rows" "racecheck reduce" "synccheck rows" "memcheck index" "racecheck attention" \
             "memcheck attention"; do
    set -- $run
    if ! t=$(limit 120 30); then skip "compute-sanitizer --tool $1 (gpu_vs_cpu --only $2)"; continue; fi
    timeout -k 10 "$t" "$SAN" --tool "$1" --error-exitcode 3 "$CUDA_BIN/gpu_vs_cpu" --cuda "$PLUGIN" \
      --cpu "$B/plugins/ember_backend_cpu.so" --seed "$SEED" --only "$2" > "$B/sanitizer_$1_$2.txt" 2>&1
    rc=$?
    case $rc in
      0) echo "ok   $1 on $2" ;;
      124|137) echo "note $1 on $2: not finished in ${t}s (inconclusive, not a failure)" ;;
      *) grep -m5 -E "ERROR|Error|error" "$B/sanitizer_$1_$2.txt"
         fail "compute-sanitizer --tool $1 on gpu_vs_cpu --only $2 (exit $rc; $B/sanitizer_$1_$2.txt)" ;;
    esac
  done
fi

[ ${#FAILED[@]} -eq 0 ] && exit 0
exit 1
