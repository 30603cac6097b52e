#!/usr/bin/env bash
# DDP overlap table: scripts/bench/ddp_overlap.lua for the langid model and
# an 8.4M-parameter MLP, at 2 and 4 ranks over shared memory, one thread
# per rank.   env: BUILD (build), NPS ("2 4"), STEPS (20)
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then # the header above is the help
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export EMBER_PLUGIN_PATH=$BUILD/plugins EMBER_PLUGIN_PATH_ONLY=1 OMP_NUM_THREADS=1
printf "%-7s %5s %9s %8s %12s %9s %10s %9s %7s %8s\n" model ranks params grad_MB compute_ms ddp_ms serial_ms comm_ms hidden ddp/comp
for np in ${NPS:-2 4}; do
  for model in langid mlp; do
    line=$(timeout 900 mpirun --oversubscribe --allow-run-as-root -np "$np" --mca btl self,vader \
      "$BUILD/bin/ember" scripts/bench/ddp_overlap.lua "$model" "${STEPS:-20}" 2>&1 | grep '^RESULT')
    get() { echo "$line" | tr ' ' '\n' | grep "^$1=" | cut -d= -f2; }
    printf "%-7s %5s %9s %8s %12s %9s %10s %9s %7s %8s\n" "$model" "$np" "$(get params)" "$(get grad_MB)" \
      "$(get compute_ms)" "$(get ddp_ms)" "$(get serial_ms)" "$(get comm_ms)" "$(get hidden)" "$(get ddp_over_compute)"
  done
done
echo "machine: $(nproc --all) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (other jobs share it); at 4 ranks the ranks outnumber the cores"
