#!/usr/bin/env bash
# The backend loader seen from a user: the CPU backend is listed as
# loaded; with it missing, or replaced by a corrupt file, creating a tensor
# fails with a message that says where the loader looked and why each
# candidate was rejected, and the process goes on.
# usage: test_plugin_loader.sh EMBER_BIN BUILD_DIR
set -u
EMBER=$1
BUILD=$2
pass=0
fail=0
check() { # name, command output, expected substring
  if printf '%s' "$2" | grep -qF -- "$3"; then
    echo "ok - $1"
    pass=$((pass + 1))
  else
    echo "not ok - $1 (expected '$3')"
    printf '%s\n' "$2" | sed 's/^/#   /' | head -20
    fail=$((fail + 1))
  fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$("$EMBER" -e 'for _, p in ipairs(ember.plugins()) do if p.name == "cpu" then print("cpu", p.loaded, p.kind) end end' 2>&1)
check "plugins() lists the cpu backend as loaded" "$out" "cpu	true	backend"

out=$("$EMBER" -e 'print(ember.plugins())' 2>&1)
check "plugins() prints a table naming the cpu backend" "$out" "cpu"

# No plugin anywhere on the path.
mkdir -p "$tmp/empty"
out=$(EMBER_PLUGIN_PATH="$tmp/empty" EMBER_PLUGIN_PATH_ONLY=1 "$EMBER" -e '
  local ok, err = pcall(ember.zeros, 2, 2)
  print(ok, err)
  print("still alive")' 2>&1)
check "missing backend: tensor creation fails" "$out" "false"
check "missing backend: the error names the folder searched" "$out" "searched $tmp/empty"
check "missing backend: the process goes on" "$out" "still alive"

# A corrupt file in place of the plugin.
mkdir -p "$tmp/corrupt"
head -c 4096 /dev/urandom >"$tmp/corrupt/ember_backend_cpu.so"
out=$(EMBER_PLUGIN_PATH="$tmp/corrupt" EMBER_PLUGIN_PATH_ONLY=1 "$EMBER" -e '
  local ok, err = pcall(ember.zeros, 2, 2)
  print(ok, err)
  for _, p in ipairs(ember.plugins()) do print("record", p.path, p.loaded, p.reason) end
  print("still alive")' 2>&1)
check "corrupt plugin: the error names the file" "$out" "$tmp/corrupt/ember_backend_cpu.so"
check "corrupt plugin: the error gives the reason" "$out" "not an ELF file"
check "corrupt plugin: plugins() records it as rejected" "$out" "record	$tmp/corrupt/ember_backend_cpu.so	false"
check "corrupt plugin: the process goes on" "$out" "still alive"

# A real plugin earlier on the path shadows the build tree's copy.
mkdir -p "$tmp/first"
cp "$BUILD/plugins/ember_backend_cpu.so" "$tmp/first/"
out=$(env -u EMBER_PLUGIN_PATH_ONLY EMBER_PLUGIN_PATH="$tmp/first" "$EMBER" -e '
  for _, p in ipairs(ember.plugins()) do
    if p.name == "cpu" then print("cpu", p.path, p.loaded, p.reason) end
  end
  print(ember.zeros(2):sum():item())' 2>&1)
check "EMBER_PLUGIN_PATH comes before the build tree" "$out" "cpu	$tmp/first/ember_backend_cpu.so	true"
check "the build tree's copy is listed as shadowed" "$out" "shadowed by $tmp/first/ember_backend_cpu.so"
check "tensors work with the plugin from EMBER_PLUGIN_PATH" "$out" "0.0"

# An explicit load of a file that is not a plugin.
out=$("$EMBER" -e '
  local ok, err = pcall(ember.load_plugin, "/etc/hostname")
  print(ok, err)' 2>&1)
check "load_plugin of a non-plugin fails with a reason" "$out" "not an ELF file"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
