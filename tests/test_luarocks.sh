#!/bin/bash
# Packaging from a clone: (1) `luarocks make` builds ember and installs it
# into a temporary Lua tree, after which a stock lua5.4 with that tree's
# paths (`luarocks path`) does require "ember", finds the plugins and
# computes, and with the sources removed still compiles a Lua variant's
# programs from the installed headers; (2) the build tree's ember-uninstalled.pc lets a C program build
# against the uninstalled tree with `pkg-config --cflags --libs ember`.
#   usage: test_luarocks.sh EMBER_BIN BUILD_DIR   (from the source root)
# Skipped (77) without luarocks, and in sanitizer builds (the rock is a
# second full Release build; the normal build covers it).
set -u
BUILD=$2
SRC=${EMBER_SOURCE_DIR:-$(pwd)}
T=$(mktemp -d /tmp/ember-rock-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; fail=1; }

SANITIZED=0
grep -q "EMBER_SANITIZE:BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null && SANITIZED=1
SAN=""; [ $SANITIZED = 1 ] && SAN="-fsanitize=address,undefined" # link as libember was built

# 2 first: it is quick. A program against the uninstalled tree.
if [ -f "$BUILD/ember-uninstalled.pc" ] && command -v pkg-config >/dev/null && command -v cc >/dev/null; then
  cat >"$T/prog.c" <<'C'
#include <stdio.h>
#include "ember.h"
int main(void) {
  em_device cpu;
  em_tensor *t = NULL, *s = NULL;
  if (em_cpu_device(&cpu) || em_ones(&t, 1, (int64_t[]){3}, EM_F32, cpu) ||
      em_sum(&s, t, 0, NULL, false)) { printf("%s\n", em_error_message()); return 1; }
  double v = 0;
  em_item(s, &v);
  printf("sum=%g\n", v);
  em_release(s), em_release(t);
  return v == 3 ? 0 : 1;
}
C
  # only the build folder on the path: pkg-config prefers ember-uninstalled.pc
  FLAGS=$(PKG_CONFIG_PATH="$BUILD" PKG_CONFIG_LIBDIR="$BUILD" pkg-config --cflags --libs ember)
  if cc -std=c11 $SAN -o "$T/prog" "$T/prog.c" $FLAGS >"$T/cc.log" 2>&1 &&
     out=$(EMBER_PLUGIN_PATH="$BUILD/plugins" "$T/prog") && [ "$out" = "sum=3" ]; then
    ok "a C program builds and runs against ember-uninstalled.pc ($FLAGS)"
  else
    cat "$T/cc.log"; notok "build against ember-uninstalled.pc"
  fi
else
  notok "no $BUILD/ember-uninstalled.pc (or no pkg-config/cc)"
fi

command -v luarocks >/dev/null || { echo "skip: no luarocks (apt-get install luarocks)"; exit 77; }
if [ $SANITIZED = 1 ]; then
  echo "skip: the rock is built in the normal build's run"; [ $fail = 0 ] && exit 77 || exit 1
fi

# 1. a clean copy of the sources (what a clone has), then luarocks make
mkdir -p "$T/src"
# (a git checkout: its files; a tarball or an exported tree: everything but
# build folders and run outputs)
if git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$SRC" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$T/src")
else
  (cd "$SRC" && tar -c --exclude='./build*' --exclude='./runs' --exclude='./tmp' . | tar -x -C "$T/src")
fi || { notok "copy the sources"; exit 1; }
ROCKSPEC=$(cd "$T/src" && ls ember-*.rockspec | head -1)
# The CUDA backend (built when the toolkit is found) is left out of this
# copy's rock: it adds minutes and is compiled by the normal build anyway.
sed -i 's/EMBER_TESTS = "OFF",/EMBER_TESTS = "OFF", EMBER_CUDA = "OFF",/' "$T/src/$ROCKSPEC"
if (cd "$T/src" && CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
      luarocks --lua-version 5.4 make --tree "$T/tree" "$ROCKSPEC") >"$T/rock.log" 2>&1; then
  ok "luarocks make --tree (rockspec $ROCKSPEC)"
else
  tail -40 "$T/rock.log"; notok "luarocks make"; exit 1
fi

paths=$(luarocks --lua-version 5.4 path --tree "$T/tree")
out=$(cd /tmp && eval "$paths" && env -u EMBER_PLUGIN_PATH -u EMBER_PLUGIN_PATH_ONLY lua5.4 -e '
  local ember = require "ember"
  local cpu = false
  for _, p in ipairs(ember.plugins()) do cpu = cpu or (p.name == "cpu" and p.loaded) end
  assert(cpu, "no CPU backend from the rock:\n" .. tostring(ember.plugins()))
  local nn = require "ember.nn"
  local y = nn.Linear(3, 2)(ember.ones(4, 3)):sum()
  y:backward()
  assert(#ember.attention_variants() >= 4, "attention variants missing")
  print("ok", ember.tensor{1, 2, 3}:sum():item(), package.searchpath("ember", package.path))' 2>&1)
case "$out" in
  ok*"$T/tree"*) ok "lua5.4 -e 'require \"ember\"' from the tree: $out" ;;
  *) echo "$out"; notok "require ember from the LuaRocks tree" ;;
esac
if [ -x "$T/tree/bin/ember" ]; then ok "the ember program is in the tree's bin"; else notok "no bin/ember in the tree"; fi

# 1b. the rock without its build folder (gone, as after luarocks install):
# a Lua variant's programs still compile, from the tree's installed headers
rm -rf "$T/src"
out=$(cd /tmp && eval "$paths" && env -u EMBER_PLUGIN_PATH -u EMBER_PLUGIN_PATH_ONLY -u EMBER_JIT_INCLUDE \
      EMBER_JIT_CACHE="$T/jit" lua5.4 -e '
  local ember = require "ember"
  local att = ember.Attention { attention = "softcap", cap = 5, heads = 2, head_dim = 8 }
  local q = ember.randn(1, 2, 16, 8)
  att(q, q, q)
  print(ember.cpu_info().float32)' 2>&1)
case "$out" in
  *"traced programs: compiled"*) ok "a Lua variant compiles from the installed headers: ${out##*traced programs: }" ;;
  *) echo "$out"; notok "a Lua variant from the tree without its sources is not compiled" ;;
esac

exit $fail
