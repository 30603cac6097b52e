#!/usr/bin/env bash
# all_reduce speed: ember.distributed.all_reduce (float32, sum, in place,
# synchronous) against Open MPI's own MPI_Allreduce, at 2 and 4 ranks, over
# shared memory (--mca btl self,vader) and over TCP loopback (--mca btl
# self,tcp).
#   bash scripts/bench/allreduce.sh     env: BUILD (build), MAX_BYTES (64 MiB), NPS ("2 4"),
#                                            REPS (2 runs), ROUNDS (5 per run)
# Two peers. allreduce.lua times ember's calls and plain MPI_Allreduce calls
# in the same process on the same tensor, in alternating rounds (REPS runs
# of ROUNDS rounds each); "MPI us" and "ember us" are the medians of all
# rounds, "ratio" is MPI's median time over ember's (above 100%: ember is
# faster), "best" the same for the best rounds. The standalone peer
# (allreduce_peer.c, a C program of nothing but an MPI_Allreduce loop) runs
# REPS times between them; "peer us" is its best, and "vs peer" its best
# over ember's best. Ranks beyond the machine's cores share them: the last
# line says so.
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
printf "%-5s %-6s %-8s %10s %10s %10s %6s %6s %10s %7s\n" ranks btl size "MPI us" "ember us" "ember GB/s" ratio best "peer us" "vs peer"
for np in $NPS; do
  for btl in self,vader self,tcp; do
    : >"$tmp/peer.all"
    : >"$tmp/ember.all"
    for _ in $(seq "${REPS:-2}"); do
      run "$np" "$btl" "$tmp/peer" "$peer" "$MAX"
      cat "$tmp/peer" >>"$tmp/peer.all"
      run "$np" "$btl" "$tmp/ember" "$BUILD/bin/ember" scripts/bench/allreduce.lua "$MAX" "${ROUNDS:-5}"
      cat "$tmp/ember" >>"$tmp/ember.all"
    done
    # per size: median and best of each side's rounds, and the peer's best
    sort -s -n -k1,1 "$tmp/ember.all" | awk -v np="$np" -v btl="${btl#self,}" -v peerfile="$tmp/peer.all" '
      function median(a, n,   i, j, x) { # a[1..n], sorted here
        for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
      }
      function row(   mm, me, bm, be, unit) {
        mm = median(m, n); me = median(e, n); bm = m[1]; be = e[1] # sorted by median()
        unit = b >= 1048576 ? sprintf("%d MiB", b / 1048576) : sprintf("%d KiB", b / 1024)
        printf "%-5s %-6s %-8s %10.1f %10.1f %10.3f %5.0f%% %5.0f%% %10.1f %6.0f%%\n", np, btl, unit, mm * 1e6, me * 1e6,
               b / me / 1e9, 100 * mm / me, 100 * bm / be, peer[b] * 1e6, 100 * peer[b] / be
      }
      BEGIN { while ((getline line < peerfile) > 0) { split(line, f, " "); if (!(f[1] in peer) || f[2] < peer[f[1]]) peer[f[1]] = f[2] } }
      $1 != b { if (n) row(); b = $1; n = 0 }
      { n++; m[n] = $2; e[n] = $3 }
      END { if (n) row() }'
  done
done
echo "machine: $cores cores, load average $(cut -d" " -f1-3 /proc/loadavg) (other jobs share it); at 4 ranks the ranks outnumber the cores (oversubscribed), so the 4-rank rows measure a time-shared machine"
