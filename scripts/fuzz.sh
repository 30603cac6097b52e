#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz/ (clang, ASan+UBSan, in
# build-fuzz/) and runs each for SECONDS, starting from its committed seed
# corpus (copied: the seeds in the tree are never changed).
#   usage: scripts/fuzz.sh [SECONDS] [HARNESS...]
#   default: 15 seconds each, all four harnesses (what scripts/test.sh runs);
#   longer by hand, e.g.  scripts/fuzz.sh 3600 fuzz_safetensors
#   (FUZZ_COVERAGE=1 adds the line coverage, see below)
# Prints one line per harness, "fuzz ok - NAME (E execs, cov C, ft F)" or
# "fuzz FAILED - NAME", and exits 1 when any failed (a crash, a sanitizer
# report, a leak or a timeout; the reproducer is saved in build-fuzz/crashes/),
# 77 when clang or libFuzzer is missing. FUZZ_JOBS=N runs N workers each.
# FUZZ_COVERAGE=1 then replays each corpus through a source-coverage build
# (build-fuzzcov/) and prints the line coverage of the files it targets.
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then # the header above is the help
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
set -u
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-15}
case "$SECONDS_EACH" in
  ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$SECONDS_EACH' (see --help)" >&2; exit 2 ;;
esac
shift 2>/dev/null || true
ALL=(fuzz_safetensors fuzz_plugin_check fuzz_tensor_table fuzz_attn_options)
HARNESSES=("$@")
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=("${ALL[@]}")
BUILD=build-fuzz

CC=""
for c in clang-14 clang; do
  if command -v "$c" >/dev/null 2>&1; then CC=$(command -v "$c"); break; fi
done
if [ -z "$CC" ] || ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
    "$CC" -x c -fsanitize=fuzzer - -o /tmp/ember-fuzz-probe.$$ >/dev/null 2>&1; then
  rm -f /tmp/ember-fuzz-probe.$$ 2>/dev/null
  echo "fuzz: skipped: clang with libFuzzer not found (install clang-14 libclang-rt-14-dev libomp-14-dev: scripts/install_deps.sh)"
  exit 77
fi
rm -f /tmp/ember-fuzz-probe.$$ 2>/dev/null

mkdir -p "$BUILD"
if ! CC="$CC" cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_FUZZ=ON -DEMBER_CUDA=OFF \
    >"$BUILD/configure.log" 2>&1 ||
   ! cmake --build "$BUILD" -j"$(nproc 2>/dev/null || echo 2)" --target "${HARNESSES[@]}" \
    ember_backend_cpu ember_attn_standard ember_attn_local ember_attn_linear ember_attn_relpos \
    >"$BUILD/build.log" 2>&1; then
  tail -40 "$BUILD/configure.log" "$BUILD/build.log"
  for h in "${HARNESSES[@]}"; do echo "fuzz FAILED - $h (build failed)"; done
  exit 1
fi

export EMBER_PLUGIN_PATH=$PWD/$BUILD/plugins EMBER_PLUGIN_PATH_ONLY=1 OMP_NUM_THREADS=1
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:intercept_tls_get_addr=0"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
mkdir -p "$BUILD/crashes"
for h in "${HARNESSES[@]}"; do
  seeds=tests/fuzz/${h#fuzz_}
  corpus=$BUILD/corpus/${h#fuzz_}
  mkdir -p "$corpus"
  cp -n "$seeds"/* "$corpus"/ 2>/dev/null
  log=$BUILD/$h.log
  jobs=()
  [ "${FUZZ_JOBS:-1}" -gt 1 ] && jobs=(-fork="$FUZZ_JOBS")
  if "$BUILD/fuzz/$h" "$corpus" -max_total_time="$SECONDS_EACH" -max_len=8192 -timeout=20 \
      -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$h-" "${jobs[@]}" \
      >"$log" 2>&1; then
    execs=$(grep -E "stat::number_of_executed_units" "$log" | tail -1 | awk '{print $2}')
    cov=$(grep -oE "cov: [0-9]+" "$log" | tail -1 | awk '{print $2}')
    ft=$(grep -oE "ft: [0-9]+" "$log" | tail -1 | awk '{print $2}')
    echo "fuzz ok - $h (${execs:-?} execs, cov ${cov:-?}, ft ${ft:-?}, $SECONDS_EACH s)"
  else
    echo "fuzz FAILED - $h (see $log; reproducers in $BUILD/crashes/)"
    grep -E "ERROR|SUMMARY|runtime error|check failed|Test unit written" "$log" | head -10
    status=1
  fi
done

# Line coverage of the code each harness targets, from its corpus.
if [ "${FUZZ_COVERAGE:-0}" = 1 ] && [ $status -eq 0 ]; then
  COV=build-fuzzcov
  PROF=$COV/profiles
  mkdir -p "$COV"
  cflags="-fprofile-instr-generate -fcoverage-mapping"
  if CC="$CC" cmake -S . -B "$COV" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_FUZZ=ON -DEMBER_CUDA=OFF \
      -DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS=-fprofile-instr-generate \
      -DCMAKE_SHARED_LINKER_FLAGS=-fprofile-instr-generate -DCMAKE_MODULE_LINKER_FLAGS=-fprofile-instr-generate \
      >"$COV/configure.log" 2>&1 &&
     cmake --build "$COV" -j"$(nproc 2>/dev/null || echo 2)" --target "${HARNESSES[@]}" ember_backend_cpu \
      ember_attn_standard ember_attn_local ember_attn_linear ember_attn_relpos >"$COV/build.log" 2>&1; then
    export EMBER_PLUGIN_PATH=$PWD/$COV/plugins
    rm -rf "$PROF"
    mkdir -p "$PROF"
    for h in "${HARNESSES[@]}"; do
      case $h in
        fuzz_safetensors) files=core/src/safetensors.c ;;
        fuzz_plugin_check) files=core/src/plugin_check.c ;;
        fuzz_tensor_table) files=core/lua/l_convert.c ;;
        fuzz_attn_options) files=core/src/attention.c ;;
      esac
      LLVM_PROFILE_FILE="$PROF/$h-%p.profraw" ASAN_OPTIONS=detect_leaks=0:intercept_tls_get_addr=0 \
        "$COV/fuzz/$h" "$BUILD/corpus/${h#fuzz_}" -runs=0 >"$PROF/$h.log" 2>&1
      llvm-profdata-14 merge -o "$PROF/$h.profdata" "$PROF/$h"-*.profraw 2>/dev/null ||
        llvm-profdata merge -o "$PROF/$h.profdata" "$PROF/$h"-*.profraw
      cov=$(command -v llvm-cov-14 || command -v llvm-cov)
      "$cov" report "$COV/fuzz/$h" -object "$COV/lib/libember.so" -instr-profile="$PROF/$h.profdata" $files |
        awk -v h="$h" -v f="$files" '/^TOTAL/ {printf "coverage - %s: %s lines of %s, %s covered (whole file)\n", h, $8, f, $10}'
    done
  else
    echo "coverage: the coverage build failed (see $COV.build.log)"
  fi
fi
exit $status
