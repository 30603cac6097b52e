#!/usr/bin/env bash
# Per-step compute of each demo model at its default (per-rank) batch, one
# process, one thread: the t_compute the scaling model starts from. Prints
# "model params step_ms" lines.   env: BUILD (build), STEPS (20), THREADS (1)
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then # the header above is the help
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export EMBER_PLUGIN_PATH=$BUILD/plugins EMBER_PLUGIN_PATH_ONLY=1 EMBER_PROGRESS_PLAIN=1
steps=${STEPS:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in langid fashion_vit addition kjv_lm sort_of_clevr; do
  "$BUILD/bin/ember" "scripts/$s.lua" --max_steps "$steps" --threads "${THREADS:-1}" --out "$tmp/$s" >"$tmp/$s.log" 2>&1 ||
    { echo "# $s failed"; tail -5 "$tmp/$s.log"; continue; }
  params=$(grep -m1 -oE "^[0-9]+ parameters" "$tmp/$s.log" | cut -d' ' -f1)
  line=$(grep -a "^RESULT" "$tmp/$s.log" | tail -1)
  train_s=$(echo "$line" | tr ' ' '\n' | grep "^train_s=" | cut -d= -f2)
  n=$(echo "$line" | tr ' ' '\n' | grep "^steps=" | cut -d= -f2)
  echo "$s $params $(awk -v t="$train_s" -v n="$n" 'BEGIN { printf "%.2f", 1000 * t / n }')"
done
