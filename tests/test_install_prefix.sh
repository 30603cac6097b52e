#!/bin/bash
# An install is relocatable: `cmake --install build --prefix P` into a prefix
# that is not the configured one, then the whole tree moved elsewhere, and
# everything still finds everything else, with no environment set:
#  - the ember program finds libember (RPATH $ORIGIN), the Lua modules
#    beside itself, and the plugins beside libember (not the build tree's);
#  - plain lua5.4 with LUA_PATH/LUA_CPATH into the tree requires ember;
#  - ember.pc names the moved tree, and a C program built with it finds the
#    plugins through libember.
#   usage: test_install_prefix.sh EMBER_BIN BUILD_DIR   (from the source root)
set -u
BUILD=$2
T=$(mktemp -d /tmp/ember-prefix-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; fail=1; }

# A sanitizer build's libraries need the sanitizer runtime first: the C
# program links as libember was built, and plain lua5.4 is left out there.
SANITIZED=0
grep -q "EMBER_SANITIZE:BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null && SANITIZED=1
SAN=""; [ $SANITIZED = 1 ] && SAN="-fsanitize=address,undefined"

command -v cc >/dev/null || { echo "skip: no C compiler"; exit 77; }
command -v pkg-config >/dev/null || { echo "skip: no pkg-config"; exit 77; }

if cmake --install "$BUILD" --prefix "$T/first" >"$T/install.log" 2>&1; then
  ok "cmake --install --prefix (not the configured prefix)"
else
  cat "$T/install.log"; notok "cmake --install --prefix"; exit 1
fi
mv "$T/first" "$T/moved" && ok "the installed tree moved" || { notok "moving the tree"; exit 1; }
P=$T/moved
EMBER=$(find "$P" -path '*/bin/ember' -type f | head -1)
[ -x "$EMBER" ] && ok "the ember program is installed" || { notok "the ember program is installed"; exit 1; }

# 1. the program: plugins and Lua modules from the moved tree, none from the build
out=$(cd "$T" && env -u EMBER_PLUGIN_PATH -u EMBER_PLUGIN_PATH_ONLY -u LUA_PATH -u LUA_CPATH \
      LD_LIBRARY_PATH= P="$P" "$EMBER" -e '
  local P = os.getenv("P")
  local from, outside, names = 0, 0, {}
  for _, r in ipairs(ember.plugins()) do
    if r.path:sub(1, #P) == P then from = from + 1 else outside = outside + 1 end
    if r.loaded then names[r.name] = true end
  end
  print(("plugins %d %d %s %s"):format(from, outside, names.cpu and "cpu" or "-", names.standard and "standard" or "-"))
  print("lua " .. tostring(package.searchpath("ember.nn", package.path):sub(1, #P) == P))
  local m = ember.nn.MultiHeadAttention(16, 2)
  local x = ember.randn(2, 5, 16):requires_grad_()
  m(x):sum():backward()
  print("trained " .. tostring(x.grad ~= nil and x.grad:abs():sum():item() > 0))' 2>&1)
echo "$out" | grep -q "^plugins [1-9][0-9]* 0 cpu standard$" \
  && ok "the plugins come from the moved tree, cpu and standard loaded, nothing from the build tree" \
  || notok "plugins from the moved tree: $out"
echo "$out" | grep -q "^lua true$" && ok "the Lua modules come from the moved tree" || notok "Lua modules: $out"
echo "$out" | grep -q "^trained true$" && ok "an attention forward and backward run" || notok "forward/backward: $out"

# 2. plain lua5.4, pointed at the tree
if [ $SANITIZED = 0 ] && command -v lua5.4 >/dev/null; then
  LDIR=$(dirname "$(dirname "$(find "$P" -path '*/ember/init.lua' | head -1)")")
  CDIR=$(dirname "$(dirname "$(find "$P" -path '*/ember/core.so' | head -1)")")
  got=$(cd "$T" && env -u EMBER_PLUGIN_PATH -u EMBER_PLUGIN_PATH_ONLY LUA_PATH="$LDIR/?.lua;$LDIR/?/init.lua" LUA_CPATH="$CDIR/?.so" \
        lua5.4 -e 'print(require("ember").ones(3):sum():item())' 2>&1)
  [ "$got" = "3.0" ] && ok "lua5.4 requires ember from the moved tree" || notok "lua5.4 require: $got"
fi

# 3. pkg-config and a C program
PC=$(find "$P" -name ember.pc | head -1)
export PKG_CONFIG_PATH=$(dirname "$PC")
CFLAGS=$(pkg-config --cflags ember) && LIBS=$(pkg-config --libs ember) && LIBDIR=$(pkg-config --variable=libdir ember)
case "$CFLAGS $LIBS" in
  *"$P"*) ok "ember.pc names the moved tree: $CFLAGS $LIBS" ;;
  *) notok "ember.pc names the moved tree: $CFLAGS $LIBS" ;;
esac
cat > "$T/count.c" <<'C'
#include <stdio.h>
#include "ember.h"
#include "ember_plugin.h"
int main(void) {
  em_init();
  int loaded = 0;
  for (int i = 0; i < em_plugin_count(); i++) loaded += em_plugin_get(i)->loaded;
  printf("loaded %d\n", loaded);
  return 0;
}
C
if cc -std=c11 $SAN $CFLAGS -o "$T/count" "$T/count.c" $LIBS -Wl,-rpath,"$LIBDIR" 2>"$T/cc.log"; then
  got=$(env -u EMBER_PLUGIN_PATH -u EMBER_PLUGIN_PATH_ONLY "$T/count")
  case "$got" in
    "loaded "[1-9]*) ok "a C program built with ember.pc finds the plugins beside libember ($got)" ;;
    *) notok "a C program's plugins: $got" ;;
  esac
else
  cat "$T/cc.log"; notok "a C program builds with ember.pc"
fi

exit $fail
