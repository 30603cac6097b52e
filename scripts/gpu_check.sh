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
# Exit status: 0 when every step passed, 1 otherwise; 77 when no GPU.
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then # the header above is the help
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${1:-$ROOT/build-gpu}
T0=$(date +%s)
JOBS=$(nproc 2>/dev/null || echo 4)
FAILED=()
LOG=$B/gpu_check.log

step() { printf '\n== %s  [%ds]\n' "$*" $(( $(date +%s) - T0 )); }
fail() { FAILED+=("$1"); printf 'FAILED: %s\n' "$1"; }

mkdir -p "$B"
: > "$LOG"
step "machine"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
else
  echo "nvidia-smi not found"
fi
/usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1 || echo "nvcc not at /usr/local/cuda/bin"

# ---- 1. build -------------------------------------------------------------
step "1. build (CUDA for sm_90, Release)"
if ! timeout 330 cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
       -DCMAKE_CUDA_ARCHITECTURES=90-real >>"$LOG" 2>&1; then
  tail -30 "$LOG"
  fail "cmake configure"
  exit 1
fi
grep -E "ember: CUDA" "$LOG" | tail -2
if ! timeout 330 cmake --build "$B" -j"$JOBS" >>"$LOG" 2>&1; then
  grep -E "error|Error" "$LOG" | head -30
  fail "build"
  exit 1
fi
PLUGIN=$B/plugins/ember_backend_cuda.so
CUDA_BIN=$B/backends/cuda
if [ ! -f "$PLUGIN" ]; then
  fail "the build made no $PLUGIN (was the CUDA toolkit found?)"
  exit 1
fi
echo "built $PLUGIN"

# ---- 2. tests -------------------------------------------------------------
step "2a. the loader loads the CUDA plugin"
if timeout 60 "$CUDA_BIN/test_cuda_load" "$PLUGIN" reject > "$B/test_cuda_load.txt" 2>&1; then
  grep -m1 "rejected" "$B/test_cuda_load.txt"
  echo "SKIP: no usable CUDA device on this machine; nothing GPU-side can be checked"
  exit 77
fi
timeout 60 "$CUDA_BIN/test_cuda_load" "$PLUGIN" load || fail "test_cuda_load"

step "2b. every CUDA kernel against the CPU backend (gpu_vs_cpu)"
timeout 240 "$CUDA_BIN/gpu_vs_cpu" --cuda "$PLUGIN" --cpu "$B/plugins/ember_backend_cpu.so" \
  --seed "$(date +%s)" > "$B/gpu_vs_cpu.txt" 2>&1
rc=$?
grep -E "^(FAIL|SKIP|note)" "$B/gpu_vs_cpu.txt" | head -40
head -1 "$B/gpu_vs_cpu.txt"
tail -1 "$B/gpu_vs_cpu.txt"
[ $rc -eq 0 ] || fail "gpu_vs_cpu (exit $rc; full output in $B/gpu_vs_cpu.txt)"

step "2c. ctest -L cuda (gradients, attention variants, training on the GPU)"
if (cd "$B" && ctest -N -L cuda 2>/dev/null | grep -q "Total Tests: [1-9]"); then
  (cd "$B" && timeout 200 ctest -L cuda --output-on-failure -j2 2>&1 | tail -25)
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "ctest -L cuda"
else
  echo "no ctest test is labelled cuda in this build"
fi

# ---- 3. benchmarks ----------------------------------------------------------
step "3. benchmarks"
timeout 200 "$CUDA_BIN/gpu_bench" "$PLUGIN" > "$B/bench_ember.txt" 2>&1 || fail "gpu_bench"
grep "^#" "$B/bench_ember.txt"
timeout 150 python3 - > "$B/bench_torch.txt" 2>&1 <<'PY' || echo "PyTorch SDPA benchmark failed: $(tail -1 "$B/bench_torch.txt")"
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
(cd "$ROOT" && EMBER_PLUGIN_PATH="$B/plugins" EMBER_PLUGIN_PATH_ONLY=1 timeout 120 "$B/bin/ember" \
   scripts/bench/attention_variants_cuda.lua --lengths 1024,4096 2>&1 | tee "$B/bench_variants_lua.txt")
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "attention_variants_cuda.lua (a variant left the fused route, or it failed)"

step "done"
if [ ${#FAILED[@]} -eq 0 ]; then
  echo "gpu_check: all steps passed"
  exit 0
fi
printf 'gpu_check: %d step(s) failed:\n' "${#FAILED[@]}"
printf '  %s\n' "${FAILED[@]}"
exit 1
