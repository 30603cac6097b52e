-- Resource and size edges: a size too large to build is an error naming the
-- op the user called, at once (never a Lua loop over the size, which hung),
-- and the process goes on allocating; bad sizes and junk environment
-- values get messages that say what is wrong.
local child = require "tests.lua.helpers.child"

-- Runs `body` (Lua) in a fresh ember with `env` ("K=V ...") under a time
-- limit; returns its output (stdout and stderr) and its exit status.
local function run(env, body, seconds)
  return child.output(body, { env = env, plugins = true, seconds = seconds or 60 })
end

-- The error of f(...), or nil when it did not fail. (Here, not parity.error_of:
-- a function that tail-calls ember is gone from the stack, so the error names
-- the line that ran pcall, which must be this spec's.)
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  return not ok and tostring(e) or nil
end

describe("limits", function()
  it("tril_indices/triu_indices: a size too large to build is an error naming them, not a hang", function()
    local out, rc = run(nil, [[
for _, op in ipairs { "tril_indices", "triu_indices" } do
  for _, n in ipairs { 1 << 40, 1 << 21 } do
    local ok, e = pcall(ember[op], n, n)
    print(op, n, ok, e)
  end
end
print("after", ember.ones(1000):sum():item())
]], 60)
    assert.are.equal(0, rc, out)
    for _, op in ipairs { "tril_indices", "triu_indices" } do
      for _, n in ipairs { 1 << 40, 1 << 21 } do
        assert.truthy(out:find(("%s\t%d\tfalse\t[^\n]*ember%%.%s: "):format(op, n, op)), out)
      end
    end
    assert.truthy(out:find("after\t1000", 1, true), out)
  end)

  it("tril_indices/triu_indices: still torch's positions, 1-based", function()
    -- torch.tril_indices(3, 4, 1) + 1 and torch.triu_indices(4, 3, -1) + 1
    assert.are.same({ { 1, 1, 2, 2, 2, 3, 3, 3, 3 }, { 1, 2, 1, 2, 3, 1, 2, 3, 4 } },
      ember.tril_indices(3, 4, 1):totable())
    assert.are.same({ { 1, 1, 1, 2, 2, 2, 3, 3, 4 }, { 1, 2, 3, 1, 2, 3, 2, 3, 3 } },
      ember.triu_indices(4, 3, -1):totable())
    local e = ember.tril_indices(0, 3)
    assert.are.same({ 2, 0 }, e.shape)
    assert.are.equal("int64", e.dtype)
    assert.are.equal("float32", ember.triu_indices(2, 2, { dtype = "float32" }).dtype)
  end)

  it("repeat_interleave: repeats adding up past 2^40 are an error naming it, not a hang", function()
    local out, rc = run(nil, [[
local x = ember.tensor { 1, 2 }
print("int", pcall(x.repeat_interleave, x, 1 << 62))
print("list", pcall(x.repeat_interleave, x, { 1 << 61, 1 << 61 }))
print("alloc", pcall(x.repeat_interleave, x, 1 << 39))
print("after", ember.ones(1000):sum():item())
]], 60)
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("int\tfalse\t[^\n]*ember%.repeat_interleave: repeats add up to more than 2%^40"), out)
    assert.truthy(out:find("list\tfalse\t[^\n]*ember%.repeat_interleave: repeats add up to more than 2%^40"), out)
    assert.truthy(out:find("alloc\tfalse\t[^\n]*ember%.repeat_interleave: "), out)
    assert.truthy(out:find("after\t1000", 1, true), out)
  end)

  it("repeat_interleave: counts, zero counts and a tensor of counts as torch", function()
    local x = ember.tensor { { 1, 2 }, { 3, 4 } }
    assert.are.same({ 1, 1, 2, 2, 3, 3, 4, 4 }, x:repeat_interleave(2):totable())
    assert.are.same({ { 1, 2 }, { 3, 4 }, { 3, 4 } }, x:repeat_interleave({ 1, 2 }, 1):totable())
    assert.are.same({ { 2, 2, 2 }, { 4, 4, 4 } },
      x:repeat_interleave(ember.tensor({ 0, 3 }, { dtype = "int64" }), 2):totable())
    assert.are.same({ 0, 2 }, x:repeat_interleave(0, 1).shape)
  end)

  it("expand: -1 in a new leading dim, and a size below -1, are named as such", function()
    local x = ember.zeros(2, 3)
    local e = err_of(x.expand, x, -1, 4, 3)
    assert.truthy(e and e:find("ember.expand: cannot expand [2, 3] to [-1, 4, 3] (size -1 at dim 1: -1 is not allowed in a new leading dim)", 1, true), e)
    assert.are.same({ 5, 2, 3 }, x:expand(5, -1, -1).shape)
  end)

  it("eye, linspace, tile and repeat take 3.0 as 3 (as zeros does) and name themselves", function()
    assert.are.same({ 3, 3 }, ember.eye(3.0).shape)
    assert.are.same({ 2, 3 }, ember.eye(2, 3.0).shape)
    assert.are.same({ 5 }, ember.linspace(0, 1, 5.0).shape)
    local x = ember.zeros(2, 3)
    assert.are.same({ 4, 3 }, x["repeat"](x, 2.0, 1).shape)
    assert.are.same({ 2, 6 }, x:tile(1, 2.0).shape)
    for _, c in ipairs {
      { function() return ember.eye(2.5) end, "ember.eye: sizes must be integers >= 0, got 2.5" },
      { function() return ember.eye("3") end, "ember.eye: sizes must be integers >= 0" },
      { function() return ember.linspace(0, 1, "5") end, "ember.linspace: steps must be an integer >= 0" },
      { function() return x["repeat"](x, -1, 1) end, "ember.repeat: repeat 1 must be an integer >= 0, got -1" },
      { function() return x:repeatTensor(1.5, 1) end, "ember.repeatTensor: repeat 1 must be an integer >= 0, got 1.5" },
      { function() return ember.linspace(0, 1, 1 << 40) end, "ember.linspace: " },
    } do
      local e = err_of(c[1])
      assert.truthy(e and e:find(c[2], 1, true), tostring(e) .. " (expected " .. c[2] .. ")")
      assert.truthy(e:find("limits_spec.lua:", 1, true), e)
    end
  end)

  it("EMBER_JIT_CACHE_MAX: junk keeps the documented 512 and cpu_info says so", function()
    for _, v in ipairs { "junk", "0", "-3", "12x" } do
      local out = run("EMBER_JIT_CACHE_MAX=" .. v, [[print(ember.cpu_info().float32)]], 60)
      assert.truthy(out:find("EMBER_JIT_CACHE_MAX=" .. v .. " is not a number of entries >= 1, 512 kept", 1, true), out)
    end
    local out = run("EMBER_JIT_CACHE_MAX=7", [[print(ember.cpu_info().float32)]], 60)
    assert.is_nil(out:find("EMBER_JIT_CACHE_MAX", 1, true), out)
  end)
end)
