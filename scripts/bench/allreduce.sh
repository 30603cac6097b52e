#!/usr/bin/env bash
# all_reduce bandwidth: ember.distributed.all_reduce (float32, sum, in
# place, synchronous) against a plain C MPI_Allreduce loop (allreduce_peer.c)
# in the same run, at 2 and 4 ranks, over shared memory (--mca btl
# self,vader) and over TCP loopback (--mca btl self,tcp).
#   bash scripts/bench/allreduce.sh            env: BUILD (build), MAX_BYTES (64 MiB), NPS ("2 4")
# Bandwidth is the algorithm bandwidth, bytes / time per call; "bus" is
# 2(p-1)/p times it, what each rank's link carries in a ring all-reduce.
# Ranks beyond the machine's cores share them: the table says so. Each side
# runs REPS times (default 2), alternating with the other, and keeps its
# best time per size, so that a busy moment of a shared machine does not
# land on one side only.
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then # the header above is the help
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MAX=${MAX_BYTES:-$((64 << 20))}
NPS=${NPS:-"2 4"}
peer=$BUILD/bin/ember_allreduce_peer
[ -x "$peer" ] || { echo "no $peer (build with MPI)"; exit 1; }
export EMBER_PLUGIN_PATH=$BUILD/plugins EMBER_PLUGIN_PATH_ONLY=1 OMP_NUM_THREADS=1
# The same MPI settings on both sides: ember.distributed turns on
# mpi_yield_when_idle (its communication thread shares a core with compute);
# the peer gets it too, so the table compares the calls, not the settings.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
cores=$(nproc --all)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # np btl what out
  timeout 900 mpirun --oversubscribe --allow-run-as-root -np "$1" --mca btl "$2" "${@:4}" >"$3" 2>"$3.err" ||
    { echo "failed: mpirun -np $1 --mca btl $2 ${*:4}"; cat "$3.err"; }
}
printf "%-5s %-6s %-10s %12s %12s %12s %12s %7s\n" ranks btl size "MPI us" "ember us" "MPI GB/s" "ember GB/s" ratio
for np in $NPS; do
  for btl in self,vader self,tcp; do
    : >"$tmp/peer.all"
    : >"$tmp/ember.all"
    for _ in $(seq "${REPS:-2}"); do
      run "$np" "$btl" "$tmp/peer" "$peer" "$MAX"
      cat "$tmp/peer" >>"$tmp/peer.all"
      run "$np" "$btl" "$tmp/ember" "$BUILD/bin/ember" scripts/bench/allreduce.lua "$MAX"
      cat "$tmp/ember" >>"$tmp/ember.all"
    done
    best() { awk '!($1 in m) || $2 < m[$1] { m[$1] = $2 } END { for (b in m) print b, m[b] }' "$1" | sort -n; }
    join <(best "$tmp/peer.all") <(best "$tmp/ember.all") | awk -v np="$np" -v btl="${btl#self,}" '{
      b = $1; tp = $2; te = $3
      unit = b >= 1048576 ? sprintf("%d MiB", b / 1048576) : sprintf("%d KiB", b / 1024)
      printf "%-5s %-6s %-10s %12.1f %12.1f %12.3f %12.3f %6.0f%%\n", np, btl, unit, tp * 1e6, te * 1e6, b / tp / 1e9, b / te / 1e9, 100 * tp / te
    }'
  done
done
echo "machine: $cores cores, load average $(cut -d" " -f1-3 /proc/loadavg) (other jobs share it); at 4 ranks the ranks outnumber the cores (oversubscribed), so the 4-rank rows measure a time-shared machine"
