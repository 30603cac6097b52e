#!/usr/bin/env bash
# test_scripts.sh EMBER: every training script's --smoke run under
# `mpirun -np 2`: it must succeed, print its RESULT line once (only rank 0
# prints) and leave its checkpoint and metrics (written by rank 0 alone).
# Exit 77 (skipped) without mpirun or ember's MPI module.
set -u
ember=$1
build=${EMBER_BUILD_DIR:-build}
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
[ -e "$build/lua/ember/distributed_mpi.so" ] || { echo "SKIP: ember built without MPI"; exit 77; }
export OMP_NUM_THREADS=1 EMBER_PROGRESS_PLAIN=1
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
for s in langid fashion_vit addition kjv_lm sort_of_clevr; do
  out="$tmp/$s"
  if timeout 600 mpirun --oversubscribe --allow-run-as-root -np 2 "$ember" "scripts/$s.lua" --smoke --out "$out" \
      >"$tmp/$s.log" 2>&1 &&
     [ "$(grep -c '^RESULT' "$tmp/$s.log")" = 1 ] && grep -q "global batch split" "$tmp/$s.log" &&
     [ -s "$out/metrics.csv" ] && ls "$out"/*.safetensors >/dev/null 2>&1; then
    echo "ok - $s under mpirun -np 2: $(grep '^RESULT' "$tmp/$s.log")"
    passed=$((passed + 1))
  else
    echo "not ok - $s under mpirun -np 2 (RESULT lines: $(grep -c '^RESULT' "$tmp/$s.log"))"
    tail -20 "$tmp/$s.log"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
