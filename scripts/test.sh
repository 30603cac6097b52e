#!/usr/bin/env bash
# Builds ember and runs the whole test suite:
#   1. the normal build (with CUDA when the toolkit is found), all of ctest;
#   2. an ASan+UBSan build, all of ctest again;
#   3. valgrind memcheck over the C test programs (definite leaks fail);
#   4. the libFuzzer harnesses, ~15 s each (scripts/fuzz.sh; skipped without clang).
# The last line is "N passed, M failed, K skipped", counting ctest tests,
# valgrind runs and fuzz harnesses; skipped tests (GPU tests without a GPU,
# fuzzers without clang) never count as passed.
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then # the header above is the help
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
set -u
cd "$(dirname "$0")/.."
JOBS=$(nproc 2>/dev/null || echo 2)
PASSED=0
FAILED=0
SKIPPED=0

# Adds one ctest run's counts from its summary line.
count_ctest() {
  local log=$1 line total failed
  line=$(grep -E "tests passed, [0-9]+ tests? failed out of [0-9]+" "$log" | tail -1)
  if [ -z "$line" ]; then
    echo "test.sh: no ctest summary in $log"
    FAILED=$((FAILED + 1))
    return
  fi
  failed=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
  total=$(echo "$line" | sed -E 's/.* failed out of ([0-9]+).*/\1/')
  # ctest counts a skipped test (exit 77: no GPU, say) as passed; we do not.
  skipped=$(grep -cE "^\s*[0-9]+ - .*\(Skipped\)" "$log")
  PASSED=$((PASSED + total - failed - skipped))
  FAILED=$((FAILED + failed))
  SKIPPED=$((SKIPPED + skipped))
}

build() { # dir, extra cmake args...
  local dir=$1
  shift
  cmake -S . -B "$dir" "$@" >"$dir.configure.log" 2>&1 &&
    cmake --build "$dir" -j"$JOBS" >"$dir.build.log" 2>&1
}

mkdir -p build
echo "== build (release) =="
if build build -DCMAKE_BUILD_TYPE=RelWithDebInfo; then
  echo "== ctest (release) =="
  ctest --test-dir build -j2 --output-on-failure --timeout 900 2>&1 | tee build/ctest.log | grep -vE "^\s+(Start|[0-9]+/[0-9]+ Test)" || true
  grep -E "^\s*[0-9]+/[0-9]+ Test" build/ctest.log | sed 's/^ *//'
  count_ctest build/ctest.log
else
  cat build.configure.log build.build.log 2>/dev/null | tail -40
  echo "build failed"
  FAILED=$((FAILED + 1))
fi

if [ "${EMBER_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== build (ASan+UBSan) =="
  mkdir -p build-asan
  if build build-asan -DCMAKE_BUILD_TYPE=Debug -DEMBER_SANITIZE=ON -DEMBER_CUDA=OFF; then
    echo "== ctest (ASan+UBSan) =="
    # Leak checks stay on; the suppressions cover only libraries we do not own.
    # intercept_tls_get_addr=0: GCC 12's __tls_get_addr interceptor takes a
    # dynamic TLS block (our dlopen'd plugins, libgomp, OpenBLAS) whose address
    # is 16 mod 4096 for a pre-2.25 glibc header and reads garbage as its
    # bounds; LeakSanitizer's tracer then segfaults at exit ("Tracer caught
    # signal 11") at random, after a test has passed. Fixed in GCC 14.
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:allocator_may_return_null=1:intercept_tls_get_addr=0"
    export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    ctest --test-dir build-asan -j2 --output-on-failure --timeout 1800 -LE nosan 2>&1 | tee build-asan/ctest.log | grep -vE "^\s+(Start|[0-9]+/[0-9]+ Test)" || true
    count_ctest build-asan/ctest.log
    unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS
  else
    cat build-asan.build.log | tail -40
    echo "ASan build failed"
    FAILED=$((FAILED + 1))
  fi

  echo "== valgrind memcheck (C tests) =="
  for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    if valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 \
        --suppressions=tests/valgrind.supp "$t" build/plugins/ember_backend_cpu.so build/plugins \
        >"build/valgrind.$name.log" 2>&1; then
      echo "valgrind ok - $name"
      PASSED=$((PASSED + 1))
    else
      echo "valgrind FAILED - $name (see build/valgrind.$name.log)"
      tail -30 "build/valgrind.$name.log"
      FAILED=$((FAILED + 1))
    fi
  done
fi

# 4. libFuzzer harnesses (tests/fuzz/), about 15 s each from their seed
# corpora; a crash, sanitizer report or leak fails. Without clang they skip
# (never pass); install_deps.sh installs it, so CI runs them.
if [ "${EMBER_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz (libFuzzer, ASan+UBSan) =="
  bash scripts/fuzz.sh "${EMBER_FUZZ_SECONDS:-15}" >build/fuzz.log 2>&1
  rc=$?
  cat build/fuzz.log
  if [ "$rc" -eq 77 ]; then
    SKIPPED=$((SKIPPED + 4))
    FUZZ_SKIPPED="  fuzz: the 4 libFuzzer harnesses (clang with libFuzzer not found)"
  else
    PASSED=$((PASSED + $(grep -c "^fuzz ok - " build/fuzz.log)))
    FAILED=$((FAILED + $(grep -c "^fuzz FAILED - " build/fuzz.log)))
    # a fuzz.sh that died without its per-harness lines still fails
    if [ "$rc" -ne 0 ] && ! grep -q "^fuzz FAILED - " build/fuzz.log; then FAILED=$((FAILED + 1)); fi
  fi
fi

if [ "$SKIPPED" -gt 0 ]; then
  echo "skipped (they count as neither passed nor failed):"
  grep -hE "^\s*[0-9]+ - .*\(Skipped\)" build/ctest.log build-asan/ctest.log 2>/dev/null | sed 's/^\s*/  /'
  echo "  (tests labelled 'cuda' skip with exit 77 when no CUDA device is present)"
  [ -n "${FUZZ_SKIPPED:-}" ] && echo "$FUZZ_SKIPPED"
fi
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ]
