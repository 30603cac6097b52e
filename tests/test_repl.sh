#!/usr/bin/env bash
# Drives the ember REPL in a real pseudo-terminal (tmux), as a person would:
# expressions print their values, multi-line input, errors with tracebacks,
# tab completion, plugins(), Ctrl-C, history.
#
#   tests/test_repl.sh path/to/ember [build-dir]
#
# Prints "ok N - what" / "not ok N - what" lines and "N passed, M failed";
# exits 1 if anything failed, 77 (skipped) without tmux.
set -u

EMBER=${1:?usage: test_repl.sh path/to/ember [build-dir]}
EMBER=$(cd "$(dirname "$EMBER")" && pwd)/$(basename "$EMBER")
if ! command -v tmux >/dev/null 2>&1; then
  echo "tmux not found: skipping the REPL test"
  exit 77
fi

SOCK="ember-test-$$"          # a private tmux server
SESS="repl$$"
HOME_DIR=$(mktemp -d)         # fresh ~/.ember_history
passed=0
failed=0
n=0

SOCK_PATH=""
cleanup() {
  tmux -L "$SOCK" kill-session -t "$SESS" >/dev/null 2>&1
  tmux -L "$SOCK" kill-server >/dev/null 2>&1
  [ -n "$SOCK_PATH" ] && rm -f "$SOCK_PATH"
  rm -rf "$HOME_DIR"
}
trap cleanup EXIT

report() { # status description
  n=$((n + 1))
  if [ "$1" -eq 0 ]; then
    echo "ok $n - $2"
    passed=$((passed + 1))
  else
    echo "not ok $n - $2"
    failed=$((failed + 1))
    echo "# screen was:"
    screen | sed 's/^/#   /' | tail -25
  fi
}

screen() { tmux -L "$SOCK" capture-pane -p -J -t "$SESS" -S -300 2>/dev/null; }

# The line the cursor is on (what is being typed).
cursor_line() {
  local y
  y=$(tmux -L "$SOCK" display -p -t "$SESS" '#{cursor_y}' 2>/dev/null) || return
  tmux -L "$SOCK" capture-pane -p -t "$SESS" 2>/dev/null | sed -n "$((y + 1))p"
}

# Waits (up to 5 s) until the cursor line is exactly $1.
wait_for_line() {
  for _ in $(seq 50); do
    [ "$(cursor_line)" = "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

# Waits (up to 10 s) until the screen shows the fixed string $1.
wait_for() {
  for _ in $(seq 100); do
    if screen | grep -qF -- "$1"; then return 0; fi
    sleep 0.1
  done
  return 1
}

type_text() { tmux -L "$SOCK" send-keys -t "$SESS" -l -- "$1"; }   # literal text
press() { tmux -L "$SOCK" send-keys -t "$SESS" "$@"; }             # key names
enter_line() { type_text "$1"; press Enter; }

tmux -L "$SOCK" -f /dev/null new-session -d -s "$SESS" -x 120 -y 40 \
  "env HOME='$HOME_DIR' TERM=xterm INPUTRC=/dev/null '$EMBER'"
SOCK_PATH=$(tmux -L "$SOCK" display -p '#{socket_path}' 2>/dev/null)

wait_for "plugins loaded"
report $? "the banner shows the version and the plugins loaded"
screen | grep -q "^ember [0-9]"
report $? "the banner starts with the version"

enter_line 'ember.tensor{{1, 2}, {3, 4}}'
wait_for "tensor([[1.0000, 2.0000]," && wait_for "shape=[2, 2], dtype=float32, device=cpu)"
report $? "an expression's value is printed (a tensor, pretty)"

enter_line 'ember.zeros(2, 3).shape'
wait_for "ember.Size{2, 3}"
report $? "a shape prints as ember.Size{2, 3}"
enter_line '{1, "a", {k = 2}}'
wait_for '{1, "a", {k = 2}}'
report $? "a plain table prints its contents, not its address"

enter_line 'help(ember.matmul)'
wait_for "Matrix product with broadcast batch dims"
report $? "help(ember.matmul) prints the reference entry"

enter_line 'help(nn.Linear)'
wait_for "in_features"
report $? "nn and optim are there, as the docs use them: help(nn.Linear)"
enter_line 'optim.SGD.__name .. "!"'
wait_for 'SGD!'
report $? "optim is ember.optim"

enter_line 'function twice(x)'
wait_for ">> "
report $? "an unfinished chunk asks for more (>> prompt)"
enter_line 'return 2 * x'
enter_line 'end'
enter_line 'twice(21) + 1000'
wait_for "1042"
report $? "a function entered over several lines works"

enter_line 'error("boom-123")'
wait_for "boom-123" && wait_for "stack traceback:"
report $? "an error prints its message and a traceback"
enter_line '1000 + 337'
wait_for "1337"
report $? "the REPL carries on after an error"

enter_line 'ember.zeros("2,3")'
wait_for "ember.zeros: shape must be numbers or a table of numbers, got string"
report $? "an ember error is a clear Lua error"

# help prints its entry once (the REPL's help also returned the text, which printed again)
enter_line 'help(ember.zeros)'
wait_for "Zeros of a shape" && sleep 0.3
[ "$(screen | grep -c '^Zeros of a shape')" -eq 1 ]
report $? "help(x) prints its entry once"
enter_line 'help(nn)'
wait_for "nn: ember.nn; help(nn.<name>) shows one" && wait_for "MultiHeadAttention,"
report $? "help(nn) lists what nn holds"
enter_line 'opt = optim.Adam({ember.zeros(1):requires_grad_()})'
enter_line 'help(opt)'
wait_for "torch.optim.Adam"
report $? "help(opt) of an optimizer (or a module) shows its class's entry"

enter_line 'nn.Linear'
wait_for "<class nn.Linear>"
report $? "a class prints as <class nn.Linear>, not its methods"
enter_line 'ember.zeros'
wait_for "<function ember.zeros>"
report $? "one of ember's functions prints with its name"

# an error raised in ember's Lua code names the typed line, not the library's
# (the REPL returned an expression's call, a tail call that dropped stdin's frame)
enter_line 'nn.Linear("a")'
wait_for "stdin:1: Linear: in_features must be a positive integer"
report $? "a library error in an expression names stdin:1"
enter_line 'ember.load_plugin("/nonexistent/p.so")'
wait_for "stdin:1: ember.load_plugin: /nonexistent/p.so: cannot open"
named=$?
enter_line '4000 + 44'
wait_for "4044" && [ "$named" -eq 0 ]
report $? "load_plugin of a bad path names stdin:1 and the REPL carries on"

type_text 'ember.zer'
press Tab
wait_for_line "> ember.zeros"
report $? "tab completes ember.zer to ember.zeros"
enter_line '(3)'
wait_for "tensor([0.0000, 0.0000, 0.0000], shape=[3]"
report $? "the completed call runs"

enter_line 'tt = ember.ones(2)'
type_text 'tt:su'
press Tab Tab
wait_for "tt:sum" && wait_for "tt:sub"
report $? "tab lists tensor methods after ':'"
press C-u
type_text 'tt.sha'
press Tab
wait_for_line "> tt.shape"
report $? "tab completes tensor properties after '.'"
press C-u
type_text 'pri'
press Tab
wait_for_line "> print"
report $? "tab completes globals"
press C-u

enter_line 'plugins()'
wait_for "name" && wait_for "backend" && screen | grep -E "^cpu +backend .* loaded" >/dev/null
report $? "plugins() lists the loaded CPU backend"

type_text 'for i = 1, 3 do'
press Enter
wait_for ">> "
type_text '1 +'
press C-c
sleep 0.3
enter_line '2000 + 22'
wait_for "2022"
report $? "Ctrl-C drops a half-typed chunk"

enter_line 'while true do end'
sleep 0.5
press C-c
wait_for "interrupted!"
enter_line '3000 + 33'
wait_for "3033"
report $? "Ctrl-C interrupts running code and the REPL carries on"

press C-d
for _ in $(seq 50); do
  tmux -L "$SOCK" has-session -t "$SESS" 2>/dev/null || break
  sleep 0.1
done
! tmux -L "$SOCK" has-session -t "$SESS" 2>/dev/null
report $? "Ctrl-D quits"
grep -q "return 2 \* x" "$HOME_DIR/.ember_history" 2>/dev/null
report $? "the history is saved in ~/.ember_history"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
