#!/bin/bash
# The CPU backend's default thread count follows the process's CPU
# affinity (and the cgroup quota, which this test cannot change), and
# OMP_NUM_THREADS still wins when set.
#   usage: test_threads.sh EMBER_BIN BUILD_DIR   (from the source root)
set -u
EMBER=$1
T=$(mktemp -d /tmp/ember-threads-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; fail=1; }
command -v taskset >/dev/null || { echo "skip: no taskset"; exit 77; }
echo 'print(require("ember").get_num_threads())' > "$T/n.lua"

got=$(env -u OMP_NUM_THREADS taskset -c 0 "$EMBER" "$T/n.lua" 2>&1)
[ "$got" = "1" ] && ok "one CPU in the affinity mask: 1 thread" || notok "affinity 0: got '$got'"
if [ "$(nproc --all)" -ge 2 ]; then
  got=$(env -u OMP_NUM_THREADS taskset -c 0,1 "$EMBER" "$T/n.lua" 2>&1)
  [ "$got" = "2" ] && ok "two CPUs: 2 threads" || notok "affinity 0,1: got '$got'"
fi
got=$(OMP_NUM_THREADS=3 taskset -c 0 "$EMBER" "$T/n.lua" 2>&1)
[ "$got" = "3" ] && ok "OMP_NUM_THREADS wins" || notok "OMP_NUM_THREADS=3: got '$got'"
exit $fail
