#!/bin/bash
# The example attention plugin, built OUT OF TREE against an installed ember
# (headers + pkg-config), dropped into EMBER_PLUGIN_PATH, passes the
# conformance checker. Then three broken plugins (wrong ABI version, missing
# entry symbol, failing init) are listed by ember.plugins() with their
# reasons while the process goes on, and a bad vtable is refused by name.
#   usage: test_example_plugin.sh EMBER_BIN BUILD_DIR   (from the source root)
set -u
EMBER=$1
BUILD=$2
SRC=${EMBER_SOURCE_DIR:-$(pwd)}
T=$(mktemp -d /tmp/ember-example-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; fail=1; }

command -v cc >/dev/null || { echo "skip: no C compiler"; exit 77; }
command -v pkg-config >/dev/null || { echo "skip: no pkg-config"; exit 77; }

# 1. install into a temporary root. DESTDIR (not --prefix) so that no path
# can escape it: install destinations that are absolute ignore --prefix.
if DESTDIR="$T/root" cmake --install "$BUILD" >"$T/install.log" 2>&1; then
  ok "cmake --install into a temporary root (DESTDIR)"
else
  cat "$T/install.log"; notok "cmake --install"; exit 1
fi
PC=$(find "$T/root" -name ember.pc | head -1)
HDR=$(find "$T/root" -name ember_attention.h | head -1)
LIBSO=$(find "$T/root" -name libember.so | head -1)
[ -n "$PC" ] && ok "ember.pc installed" || { notok "ember.pc installed"; exit 1; }
[ -n "$HDR" ] && ok "ember_attention.h is installed" || { notok "ember_attention.h is installed"; exit 1; }
[ -n "$LIBSO" ] || { notok "libember.so installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$PC")
# ember.pc's prefix is relative to the file itself, so the staged copy names
# the temporary root (test_install_prefix.sh moves a whole install).
CFLAGS=$(pkg-config --cflags ember) && LIBS=$(pkg-config --libs ember) \
  && ok "pkg-config --cflags --libs ember: $CFLAGS $LIBS" || { notok "pkg-config ember"; exit 1; }
case "$CFLAGS $LIBS" in
  *"$T/root"*) ok "the flags point into the temporary root" ;;
  *) notok "the flags point into the temporary root" ;;
esac

# 2. build the example exactly as a newcomer would: a copy, cc, pkg-config
mkdir -p "$T/work" "$T/plugins"
cp "$SRC/plugins/example/example.c" "$T/work/"
if cc -std=c11 -shared -fPIC -O2 -Wall -Wextra -Werror $CFLAGS -o "$T/plugins/ember_attn_example.so" \
      "$T/work/example.c" $LIBS -lm 2>"$T/cc.log"; then
  ok "the example builds out of tree"
else
  cat "$T/cc.log"; notok "the example builds out of tree"; exit 1
fi

# 3. it loads from EMBER_PLUGIN_PATH and passes the checker. The build's own
# plugins (the CPU backend, standard) stay on the path after the drop-in folder.
export EXAMPLE_DIR=$T/plugins
export EMBER_PLUGIN_PATH=$T/plugins:$BUILD/plugins
"$EMBER" -e '
  for _, r in ipairs(ember.plugins()) do
    if r.name == "example" and r.kind == "attention" then
      assert(r.loaded, "example not loaded: " .. tostring(r.reason))
      assert(r.path:find(os.getenv("EXAMPLE_DIR"), 1, true), "loaded from " .. r.path)
      os.exit(0)
    end
  end
  error("example plugin not listed")' && ok "ember.plugins() lists the example from EMBER_PLUGIN_PATH" \
  || notok "ember.plugins() lists the example from EMBER_PLUGIN_PATH"
if "$EMBER" "$SRC/scripts/check_plugin.lua" example >"$T/check.log" 2>&1; then
  ok "the example passes the conformance checker ($(tail -1 "$T/check.log"))"
else
  cat "$T/check.log"; notok "the example passes the conformance checker"
fi
"$EMBER" -e '
  local m = ember.MultiHeadAttention{d_model = 8, heads = 2, attention = "example", max_distance = 8}
  local y = m:forward(ember.randn(2, 3, 8), nil, {causal = true})
  assert(y.shape[3] == 8)' && ok "MultiHeadAttention uses the drop-in variant by name" \
  || notok "MultiHeadAttention uses the drop-in variant by name"
# it trains: a layer learns to copy the token two places back (a task a
# distance penalty helps with), on the fused route, its table learning too
"$EMBER" -e '
  ember.manual_seed(1)
  local m = ember.MultiHeadAttention{d_model = 16, heads = 2, attention = "example", max_distance = 8}
  local opt = ember.optim.Adam(m:parameters(), {lr = 0.01})
  local x = ember.randn(8, 40, 16)
  local target = ember.cat({ember.zeros(8, 2, 16), x:narrow(2, 1, 38)}, 2)
  local before = ember.attention_routes()
  local first, last
  for step = 1, 60 do
    opt:zero_grad()
    local loss = (m:forward(x, nil, {causal = true}) - target):pow(2):mean()
    loss:backward()
    opt:step()
    first = first or loss:item()
    last = loss:item()
  end
  local after = ember.attention_routes()
  assert(last < 0.8 * first, string.format("loss %.4f -> %.4f", first, last))
  assert(after.fused - before.fused == 60 and after.composed == before.composed, "not on the fused route")
  local t
  for _, p in ipairs(m.attn:parameters()) do t = p end
  assert(t and t:abs():sum():item() > 0, "the distance table did not learn")
  print(string.format("loss %.4f -> %.4f", first, last))' >"$T/train.log" 2>&1 \
  && ok "a layer with the example trains on the fused route ($(tail -1 "$T/train.log"))" \
  || { cat "$T/train.log"; notok "a layer with the example trains on the fused route"; }

# 4. broken plugins: each is listed with its reason; the process goes on
mkdir -p "$T/broken"
cat >"$T/b.c" <<'CEOF'
#include <ember_attention.h>
#include <stdio.h>
#ifdef WRONG_ABI
EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {EM_ATTENTION_ABI_VERSION + 98, EM_PLUGIN_ATTENTION, "wrongabi", "0", "x"};
EM_PLUGIN_EXPORT const void *ember_plugin_init(char *e, size_t n) { (void)e, (void)n; return NULL; }
#endif
#ifdef NO_INIT
EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "noinit", "0", "x"};
#endif
#ifdef FAILING_INIT
EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "failinit", "0", "x"};
EM_PLUGIN_EXPORT const void *ember_plugin_init(char *e, size_t n) { snprintf(e, n, "the moon is not full"); return NULL; }
#endif
#ifdef BAD_VTABLE
static const em_attention_variant V = {.abi_version = EM_ATTENTION_ABI_VERSION, .struct_size = 12, .name = "badvtable"};
EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "badvtable", "0", "x"};
EM_PLUGIN_EXPORT const void *ember_plugin_init(char *e, size_t n) { (void)e, (void)n; return &V; }
#endif
CEOF
for d in WRONG_ABI NO_INIT FAILING_INIT BAD_VTABLE; do
  name=$(echo "$d" | tr 'A-Z' 'a-z')
  cc -std=c11 -shared -fPIC -D$d $CFLAGS -o "$T/broken/ember_attn_$name.so" "$T/b.c" $LIBS 2>>"$T/cc.log" \
    || { cat "$T/cc.log"; notok "build broken plugin $d"; }
done
export EMBER_PLUGIN_PATH=$T/broken:$BUILD/plugins
"$EMBER" -e '
  local want = {wrong_abi = "ABI version", no_init = "ember_plugin_init", failing_init = "the moon is not full"}
  local seen = {}
  for _, r in ipairs(ember.plugins()) do
    for key, reason in pairs(want) do
      if r.path:find("ember_attn_" .. key .. ".so", 1, true) then
        assert(not r.loaded, key .. " should not load")
        assert(tostring(r.reason):find(reason, 1, true), key .. ": reason is " .. tostring(r.reason))
        seen[key] = true
      end
    end
  end
  for key in pairs(want) do assert(seen[key], key .. " is not listed") end
  -- the process goes on: the shipped variants still work
  local m = ember.MultiHeadAttention{d_model = 8, heads = 2}
  assert(m:forward(ember.randn(1, 4, 8)).shape[2] == 4)
  -- a vtable with the wrong size is refused by name, with the reason
  local ok, err = pcall(ember.MultiHeadAttention, {d_model = 8, heads = 2, attention = "badvtable"})
  assert(not ok and tostring(err):find("vtable", 1, true), "badvtable: " .. tostring(err))
' && ok "broken plugins are listed with their reasons and the process goes on" \
  || notok "broken plugins are listed with their reasons and the process goes on"

exit $fail
