#!/usr/bin/env bash
# test_fault.sh EMBER NP: a rank that dies, raises an error or stops
# answering mid-training makes the others exit non-zero with a clear message
# within 60 s. Exit 77 (skipped) without mpirun or ember's MPI module.
set -u
ember=$1 np=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
build=${EMBER_BUILD_DIR:-build}
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
[ -e "$build/lua/ember/distributed_mpi.so" ] || { echo "SKIP: ember built without MPI"; exit 77; }
export OMP_NUM_THREADS=1
# Under ASan (scripts/test.sh sets ASAN_OPTIONS): the slow unwinder, so that
# leaks inside Open MPI keep the frames tests/lsan.supp matches them by.
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# run_case NAME MODE PATTERN: starts the job, kills rank 1 for MODE kill,
# then checks the exit status, the message and the time.
run_case() {
  local name=$1 mode=$2 pattern=$3 dir="$tmp/$1"
  mkdir -p "$dir"
  local t0=$SECONDS
  timeout 120 mpirun --oversubscribe --allow-run-as-root -np "$np" "$ember" "$here/fault_train.lua" "$dir" "$mode" \
    >"$dir/out" 2>&1 &
  local job=$!
  if [ "$mode" = kill ]; then
    for _ in $(seq 600); do [ -e "$dir/step5" ] && break; sleep 0.1; done
    [ -e "$dir/step5" ] || echo "note: step 5 was never reached"
    local t_kill=$SECONDS
    kill -9 "$(cat "$dir/pid.1")"
    t0=$t_kill
  fi
  wait $job
  local rc=$? took=$((SECONDS - t0))
  if [ $rc -ne 0 ] && [ $took -le 60 ] && grep -qE "$pattern" "$dir/out"; then
    echo "ok - $name: exit $rc after ${took} s, message: $(grep -m1 -E "$pattern" "$dir/out")"
  else
    echo "not ok - $name: exit $rc after ${took} s (want non-zero within 60 s and /$pattern/); output:"
    tail -30 "$dir/out"
    failures=$((failures + 1))
  fi
}

# A survivor's message: rank 0's or, with 3 ranks, rank 2's (when mpirun tears the
# job down, the output of one survivor is sometimes cut before it is forwarded).
survivor="ember.distributed: rank [02] \(of [0-9]+ ranks\).*(SIGTERM|timed out|MPI error)"
run_case "rank 1 killed (SIGKILL) mid-training" kill "$survivor"
run_case "rank 1 raises an error mid-training" error "$survivor"
FAULT_TIMEOUT=3 run_case "rank 1 stops answering: the collective times out" slow "ember.distributed: rank 0 .*timed out after 3 s"
FAULT_TIMEOUT=3 run_case "rank 1 stops answering a small synchronous all_reduce: it times out" slow_sync \
  "fault_train.lua:[0-9]+: ember.distributed: rank 0 .*all_reduce timed out after 3 s"
[ $failures -eq 0 ] && echo "4 passed, 0 failed" || echo "$((4 - failures)) passed, $failures failed"
[ $failures -eq 0 ]
