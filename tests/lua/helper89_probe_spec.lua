-- helper89's probes of a new user's first contact: tostring of tensors
-- (set_printoptions included), the REPL's "=expr", ember.tensor from Lua
-- booleans, and `for i, row in ipairs(t)`.
local ember = require "ember"

local function repl(input)
  local bin = (os.getenv("EMBER_BUILD_DIR") or "build") .. "/bin/ember"
  local home = os.tmpname()
  os.remove(home) -- a folder of that name instead: the REPL writes its history there
  assert(os.execute("mkdir -p '" .. home .. "'"))
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(input)
  f:close()
  local h = io.popen(("HOME='%s' '%s' -i < '%s' 2>&1"):format(home, bin, script))
  local out = h:read("a")
  h:close()
  os.remove(script)
  os.execute("rm -rf '" .. home .. "'")
  return out
end

describe("helper89: printing", function()
  after_each(function() ember.set_printoptions { profile = "default" } end)

  it("prints every digit of a large float64 in fixed notation (sci_mode = false)", function()
    -- an element longer than the formatter's buffer was cut and the bytes
    -- after the buffer were printed
    ember.set_printoptions { sci_mode = false }
    local s = tostring(ember.tensor({ 1e300, 1 }, "float64"))
    local big = ("%.4f"):format(1e300)
    assert.truthy(s:find("tensor([" .. big .. ",", 1, true), s)
    assert.truthy(s:find((" "):rep(#big - 6) .. "1.0000], shape=[2], dtype=float64", 1, true), s)
    ember.set_printoptions { sci_mode = false, precision = 30 }
    s = tostring(ember.tensor({ -1.7e308 }, "float64"))
    assert.are.equal("tensor([" .. ("%.30f"):format(-1.7e308) .. "], shape=[1], dtype=float64, device=cpu)", s)
    assert.is_nil(s:find("[^%g ]"), "only printable characters")
  end)

  it("keeps torch's choice of notation and the summary past the threshold", function()
    assert.are.equal("tensor([1.0000e-05, 1.0000e-06], shape=[2], dtype=float32, device=cpu)",
      tostring(ember.tensor({ 1e-5, 1e-6 })))
    assert.are.equal("tensor([   nan,    inf,   -inf, 1.5000], shape=[4], dtype=float32, device=cpu)",
      tostring(ember.tensor({ 0 / 0, 1 / 0, -1 / 0, 1.5 })))
    local s = tostring(ember.arange(0, 2000, { dtype = "int64" }))
    assert.are.equal("tensor([   0,    1,    2,  ..., 1997, 1998, 1999], shape=[2000], dtype=int64, device=cpu)", s)
  end)
end)

describe("helper89: the REPL", function()
  it("prints =expr as lua's REPL does", function()
    local out = repl("=1 + 41\n=ember.ones(2):sum()\nx = 5\n=x\n")
    assert.truthy(out:find("> =1 + 41\n42\n", 1, true), out)
    assert.truthy(out:find("tensor(2.0000, shape=[], dtype=float32, device=cpu)", 1, true), out)
    assert.truthy(out:find("> =x\n5\n", 1, true), out)
    assert.is_nil(out:find("unexpected symbol", 1, true), out)
  end)
end)

describe("helper89: ember.tensor from Lua values", function()
  it("takes a boolean as 1 or 0 in a number dtype", function()
    -- they all became 0: lua_tonumber(true) is 0
    assert.are.same({ 1, 0 }, ember.tensor({ true, false }, "float32"):tolist())
    assert.are.same({ { 1 }, { 0 } }, ember.tensor({ { true }, { false } }, "float64"):tolist())
    assert.are.same({ 1, 0 }, ember.tensor({ true, false }, "bfloat16"):tolist())
    assert.are.same({ 1, 0 }, ember.tensor({ true, false }, "int64"):tolist())
    assert.are.equal(1, ember.tensor(true, "float32"):item())
    assert.are.same({ true, false }, ember.tensor({ true, false }):tolist())
  end)

  it("says nan (not -nan) when a NaN does not fit int64", function()
    local ok, err = pcall(ember.tensor, { 1, 0 / 0 }, "int64")
    assert.is_false(ok)
    assert.truthy(err:find("ember.tensor: nan at {2} does not fit int64", 1, true), err)
  end)
end)

describe("helper89: ipairs over a tensor", function()
  it("walks the rows and stops after the last", function()
    local t = ember.arange(0, 6):reshape(3, 2)
    local rows = {}
    for i, r in ipairs(t) do rows[i] = r:tolist() end
    assert.are.same({ { 0, 1 }, { 2, 3 }, { 4, 5 } }, rows)
    for _ in ipairs(ember.zeros(0, 2)) do error("an empty dim has no rows") end
    -- indexing past the end by hand is still an error
    local ok, err = pcall(function() return t[4] end)
    assert.is_false(ok)
    assert.truthy(err:find("ember.index: index 4 is out of range for a dim of size 3", 1, true), err)
  end)
end)

describe("helper89: t[t > 0], where the comparison gave one Lua boolean", function()
  it("says the mask is t:gt(0)", function()
    local t = ember.tensor({ -1, 2, 3 })
    assert.are.equal("boolean", type(t > 0)) -- Lua's operators give one boolean
    local ok, err = pcall(function() return t[t > 0] end)
    assert.is_false(ok)
    assert.truthy(err:find("helper89_probe_spec.lua:%d+: ember.index: cannot index a tensor with a boolean"), err)
    assert.truthy(err:find("t[t:gt(0)]", 1, true), err)
    ok, err = pcall(function() t[t > 0] = 0 end)
    assert.is_false(ok)
    assert.truthy(err:find("ember.setindex: cannot assign to a tensor indexed by a boolean", 1, true), err)
    assert.truthy(err:find("t[t:gt(0)] = v", 1, true), err)
    assert.are.same({ 2, 3 }, t[t:gt(0)]:tolist())
  end)
end)
