#!/usr/bin/env bash
# run_mpi.sh EMBER NP SCRIPT [ARGS...]: runs an ember script on NP MPI ranks
# (oversubscribed: CI has 2 cores). Exit 77 (ctest: skipped) when mpirun or
# ember's MPI module is missing; otherwise mpirun's status.
set -u
ember=$1 np=$2 script=$3
shift 3
build=${EMBER_BUILD_DIR:-build}
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: no mpirun (apt-get install openmpi-bin libopenmpi-dev)"
  exit 77
fi
if [ ! -e "$build/lua/ember/distributed_mpi.so" ]; then
  echo "SKIP: ember was built without MPI ($build/lua/ember/distributed_mpi.so is missing)"
  exit 77
fi
# One thread per rank: the ranks share the cores.
export OMP_NUM_THREADS=1
# Under ASan (scripts/test.sh sets ASAN_OPTIONS): the slow unwinder, so that
# leaks inside Open MPI keep the frames tests/lsan.supp matches them by.
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
exec timeout 300 mpirun --oversubscribe --allow-run-as-root -np "$np" ${EMBER_MPIRUN_ARGS:-} \
  "$ember" "$script" "$@"
