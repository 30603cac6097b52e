-- The ember REPL as a new user drives it, through a pipe (`ember -i < input`):
-- what an expression's error names, what a line prints. tests/test_repl.sh
-- drives it in a terminal (readline, completion, Ctrl-C, history).
local BIN = (os.getenv("EMBER_BUILD_DIR") or "build") .. "/bin/ember"

-- The REPL's output (stdout and stderr) for the lines of input.
local function repl(input)
  local home = os.tmpname()
  os.remove(home) -- a folder of that name instead: the REPL writes its history there
  assert(os.execute("mkdir -p '" .. home .. "'"))
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(input)
  f:close()
  local h = assert(io.popen(("HOME='%s' '%s' -i < '%s' 2>&1"):format(home, BIN, script)))
  local out = h:read("a")
  h:close()
  os.remove(script)
  os.execute("rm -rf '" .. home .. "'")
  return out
end

local function has(out, s) assert(out:find(s, 1, true), ("expected %q in:\n%s"):format(s, out)) end

describe("the REPL", function()
  -- an expression ran as `(function(...) return ... end)(<line>\n)`: Lua emits
  -- the code of a trailing index after the closing parenthesis, on line 2
  it("names stdin:1 for an error of an index typed as an expression", function()
    local out = repl("a = ember.randn(2, 3)\na[5]\nm = nn.Linear(3, 2)\nm.weight[9]\n1 + 1 -- two\n")
    has(out, "stdin:1: ember.index: index 5 is out of range for a dim of size 2")
    has(out, "stdin:1: ember.index: index 9 is out of range for a dim of size 2")
    assert.is_nil(out:find("stdin:2", 1, true), out)
    has(out, "> 1 + 1 -- two\n2\n") -- a trailing comment still ends an expression
  end)

  -- an expression continued on more lines ran as a statement: nothing printed
  it("prints an expression typed over several lines, as one typed on one", function()
    local out = repl("ember.tensor({\n  {1, 2},\n  {3, 4}})\nnn.Sequential(\n  nn.Linear(2, 3))\n"
      .. "for i = 1, 2 do\n  print(i * 100)\nend\n")
    has(out, "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]], shape=[2, 2]")
    has(out, "Sequential(\n  (1): Linear(in_features=2, out_features=3, bias=true)\n)")
    has(out, ">> end\n100\n200\n") -- a statement over several lines runs as before
  end)

  it("prints =expr as lua's REPL does", function()
    local out = repl("=1 + 41\n=ember.ones(2):sum()\nx = 5\n=x\n")
    has(out, "> =1 + 41\n42\n")
    has(out, "tensor(2.0000, shape=[], dtype=float32, device=cpu)")
    has(out, "> =x\n5\n")
    assert.is_nil(out:find("unexpected symbol", 1, true), out)
  end)
end)
