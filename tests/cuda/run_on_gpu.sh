#!/usr/bin/env bash
# Runs a Lua test on the CUDA device, or skips (exit 77, never a pass) when
# there is none. usage: run_on_gpu.sh EMBER_BIN FILE [busted]
set -u
EMBER=$1
FILE=$2
n=$("$EMBER" -e 'local ok, n = pcall(ember.device_count, "cuda"); print(ok and n or 0)' 2>/dev/null)
if [ "${n:-0}" -lt 1 ]; then
  echo "SKIP: no CUDA device (ember.device_count('cuda') = ${n:-0}); $FILE not run"
  exit 77
fi
export EMBER_TEST_DEVICE=cuda
if [ "${3:-}" = busted ]; then
  exec "$EMBER" "$(command -v busted)" -o plainTerminal "$FILE"
fi
exec "$EMBER" "$FILE"
