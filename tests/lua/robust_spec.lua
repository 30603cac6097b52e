-- The repros of issue 11 (robust against what users and files throw at
-- ember), one `describe` each. Every case failed or misbehaved before its
-- fix. Truncated plugins are in plugin_truncated_spec.lua, format strings
-- in format_strings_spec.lua.
local ember = require "ember"

-- f must fail with a message holding every needle (plain text); ember
-- still works afterwards.
local function fails_with(f, ...)
  local ok, msg = pcall(f)
  assert.is_false(ok, "expected an error")
  assert.are.equal("string", type(msg))
  for _, needle in ipairs { ... } do
    assert(msg:find(needle, 1, true), ("message %q lacks %q"):format(msg, needle))
  end
  assert.are.equal(6, ember.ones(2, 3):sum():item())
  return msg
end

describe("sizes that overflow int64 (repro 2)", function()
  it("expand past 2^40 elements is refused, naming the op and the shape", function()
    fails_with(function() return ember.zeros(1, 1):expand(2 ^ 32, 2 ^ 32) end,
      "ember.expand", "[4294967296, 4294967296]")
    fails_with(function() return ember.zeros(1, 1):expand(2 ^ 32 + 1, 2 ^ 32 - 1) end,
      "ember.expand", "[4294967297, 4294967295]")
    fails_with(function() return ember.zeros(1):expand(2 ^ 62, 2 ^ 62, 4) end, "ember.expand")
  end)

  it("a big but countable expand still works", function()
    local e = ember.ones(1, 1):expand(2 ^ 20, 2 ^ 10)
    assert.are.equal(2 ^ 30, e:numel())
    assert.are.same({ 0, 0 }, e:stride())
  end)

  it("view and reshape with sizes whose product overflows", function()
    fails_with(function() return ember.zeros(2, 2):view(2 ^ 62, 4) end, "ember.view", "[4611686018427387904, 4]")
    fails_with(function() return ember.zeros(2, 2):view(-1, 2 ^ 62, 4) end, "ember.view")
    fails_with(function() return ember.zeros(2, 2):reshape(2 ^ 32, 2 ^ 32, 2 ^ 32) end, "ember.reshape")
    fails_with(function() return ember.zeros(0):view(0, 2 ^ 62, 2 ^ 62) end, "ember.view")
  end)

  it("creation with an empty dim and huge others is refused (strides would overflow)", function()
    fails_with(function() return ember.zeros(0, 2 ^ 40, 2 ^ 40) end, "ember.zeros", "[0, 1099511627776, 1099511627776]")
    fails_with(function() return ember.empty(2 ^ 62, 4) end, "ember.empty", "too large")
    fails_with(function() return ember.from_bytes("abc", { 2 ^ 40, 2 ^ 40 }) end, "ember.from_bytes")
  end)

  it("slice with a step far past the size", function()
    local s = ember.arange(1, 4):slice(1, 1, 3, math.maxinteger)
    assert.are.same({ 1 }, s:size())
    assert.are.equal(1, s:item())
  end)
end)

describe("math.mininteger as an index (repro 3)", function()
  local mi = math.mininteger
  it("select, narrow, t[i], size, t[i] = v report the index", function()
    fails_with(function() return ember.zeros(3):select(1, mi) end, "ember.select", tostring(mi), "out of range")
    fails_with(function() return ember.zeros(3):narrow(1, mi, 1) end, "ember.narrow", tostring(mi))
    fails_with(function() return ember.zeros(3)[mi] end, "ember.index", tostring(mi))
    fails_with(function() local t = ember.zeros(3); t[mi] = 1 end, "ember.setindex", tostring(mi))
    fails_with(function() return ember.zeros(3):size(mi) end, "ember.size", tostring(mi))
    fails_with(function() return ember.zeros(3):sum(mi) end, "ember.sum")
    fails_with(function() return ember.zeros(3):transpose(1, mi) end, "ember.transpose", tostring(mi))
  end)

  it("narrow with a length that overflows start + length", function()
    fails_with(function() return ember.zeros(3):narrow(1, 2, math.maxinteger) end,
      "ember.narrow", tostring(math.maxinteger))
  end)
end)

describe("empty tensors (repro 7)", function()
  it("are contiguous, as in PyTorch", function()
    assert.is_true(ember.zeros(2, 0):is_contiguous())
    assert.is_true(ember.zeros(0, 3):is_contiguous())
    assert.is_true(ember.zeros(0):is_contiguous())
    assert.is_true(ember.zeros(2, 0, 3):transpose(1, 3):is_contiguous())
  end)

  it("go through ops", function()
    local z = ember.zeros(2, 0)
    assert.are.same({ 2, 0 }, z:contiguous():size())
    assert.are.same({ 0, 2 }, z:transpose(1, 2):contiguous():size())
    assert.are.same({ 2, 0 }, (z + 1):size())
    assert.are.same({ 0 }, z:view(-1):size())
    assert.are.same({ 2 }, z:sum(2):size())
    assert.are.equal(0, z:sum():item())
    assert.are.same({ 2, 0 }, z:clone():size())
  end)
end)
