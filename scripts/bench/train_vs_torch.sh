#!/usr/bin/env bash
# Trains each example model with ember and with its PyTorch 1.13 peer in the
# same config, one after the other, and prints a table of metric and
# training time (evaluation excluded on both sides).
#
#   bash scripts/bench/train_vs_torch.sh [task ...]
#     tasks: langid fashion_vit addition kjv_lm sort_of_clevr (default: all)
#   env: BUILD (build), THREADS (2), STEPS (stop both after N steps; default:
#        the scripts' full defaults), EXTRA (more options for both sides),
#        TORCH_TIME_LIMIT (stop the PyTorch peer after this many training
#        seconds, schedule unchanged: enough to see whether it reaches the
#        target in the time ember took), TORCH_BF16=1 (the PyTorch peer under
#        CPU autocast to bfloat16 instead of float32)
#
# Logs go to $OUT (runs/bench); the last lines of each are the RESULT lines.
# A second table gives the training time at which each side's test metric
# first reached the issue's target (scripts/bench/time_to_target.py).
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then # the header above is the help
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
OUT=${OUT:-runs/bench}
mkdir -p "$OUT"
TASKS=("$@")
[ ${#TASKS[@]} -eq 0 ] && TASKS=(langid fashion_vit addition kjv_lm sort_of_clevr)

result() { # file -> the RESULT line's fields after the name
  grep -a "^RESULT" "$1" | tail -1 | cut -d' ' -f3-
}

rows=()
ttt=()
for t in "${TASKS[@]}"; do
  lua_steps="" py_steps=""
  if [ -n "${STEPS:-}" ]; then lua_steps="--max_steps $STEPS"; py_steps="--max-steps $STEPS"; fi
  echo "== $t: ember"
  EMBER_PROGRESS_PLAIN=1 "$BUILD/bin/ember" "scripts/$t.lua" --threads "$THREADS" $lua_steps \
    --out "$OUT/$t" ${EXTRA:-} >"$OUT/$t.ember.log" 2>&1 || echo "ember run failed, see $OUT/$t.ember.log"
  tail -3 "$OUT/$t.ember.log"
  echo "== $t: torch"
  py_limit=""
  [ -n "${TORCH_TIME_LIMIT:-}" ] && py_limit="--time-limit $TORCH_TIME_LIMIT"
  [ -n "${TORCH_BF16:-}" ] && py_limit="$py_limit --bf16"
  (cd scripts/bench && /usr/bin/python3 "torch_$t.py" --threads "$THREADS" $py_steps $py_limit ${EXTRA:-}) \
    >"$OUT/$t.torch.log" 2>&1 || echo "torch run failed, see $OUT/$t.torch.log"
  tail -2 "$OUT/$t.torch.log"
  rows+=("$(printf '%-14s | %-44s | %s' "$t" "$(result "$OUT/$t.ember.log")" "$(result "$OUT/$t.torch.log")")")
  ttt+=("$(printf '%-14s | %-34s | %s' "$t" "$(/usr/bin/python3 scripts/bench/time_to_target.py "$t" "$OUT/$t.ember.log")" \
    "$(/usr/bin/python3 scripts/bench/time_to_target.py "$t" "$OUT/$t.torch.log")")")
done
echo
printf '%-14s | %-44s | %s\n' task "ember (metric, training s, steps)" "PyTorch 1.13"
for r in "${rows[@]}"; do echo "$r"; done
echo
printf '%-14s | %-34s | %s\n' task "ember: training time to target" "PyTorch 1.13: training time to target"
for r in "${ttt[@]}"; do echo "$r"; done
