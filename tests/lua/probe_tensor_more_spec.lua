-- More of what a new user coming from PyTorch 1.13 or Torch7 tries on the
-- tensor API (probe_tensor_spec.lua holds the first probe): ember.Size,
-- surplus arguments, clamp without bounds, ... Each block is a defect found
-- by probing; the values are PyTorch 1.13's and the test fails without its fix.
local ember = require "ember"
local raises_here = require("tests.lua.helpers.parity").raises_here

describe("ember.Size: a fresh copy per call, which can only hold a shape", function()
  it("a write to t:size() or t.shape never reaches the tensor or later sizes", function()
    local t = ember.zeros(2, 3)
    local s = t:size()
    s[1] = 5 -- Torch7's t:size() is a copy (a LongStorage) too
    assert.are.equal(ember.Size { 5, 3 }, s)
    assert.are.equal(ember.Size { 2, 3 }, t:size())
    assert.are.equal(ember.Size { 2, 3 }, t.shape)
    assert.are.same({ 2, 3 }, t.shape)
    assert.are.equal(ember.Size { 5, 3 }, t:view(-1):view(s[1] + 1, 1):expand(6, 3):view(6, 3):narrow(1, 1, 5).shape)
  end)
  it("s[-1] = n writes the last size, as s[-1] reads it", function()
    local s = ember.zeros(2, 3):size()
    s[-1] = 6
    s[-2] = 1
    assert.are.equal(ember.Size { 1, 6 }, s)
    assert.are.equal(6, s[-1])
    assert.are.equal(ember.Size { 1, 6 }, ember.zeros(s).shape)
  end)
  it("refuses new positions, names and non-integer sizes, naming ember.Size", function()
    local s = ember.zeros(2, 3).shape
    raises_here(function() s[3] = 4 end, "ember.Size: position 3 is outside a Size of 2 dims")
    raises_here(function() s[0] = 4 end, "ember.Size: position 0 is outside a Size of 2 dims")
    raises_here(function() s[-3] = 4 end, "ember.Size: position -3 is outside a Size of 2 dims")
    raises_here(function() s.foo = 4 end, "ember.Size: cannot set 'foo'")
    raises_here(function() s[-1] = 2.5 end, "ember.Size: a size must be an integer, got 2.5")
    assert.are.equal(ember.Size { 2, 3 }, s)
    assert.are.equal(2, #s)
  end)
  it("keeps Torch7's uses: #, [i], ipairs, unpack, tostring, ==, as a shape argument", function()
    local x = ember.zeros(2, 3, 4)
    local s = x:size()
    local seen = {}
    for i, v in ipairs(s) do seen[i] = v end
    assert.are.same({ 2, 3, 4 }, seen)
    assert.are.equal(3, #s)
    assert.are.equal(4, s[3])
    assert.are.equal("ember.Size{2, 3, 4}", tostring(s))
    assert.is_true(s == ember.Size { 2, 3, 4 })
    assert.are.equal(ember.Size { 6, 4 }, x:reshape(6, 4):view(s):reshape(s[1] * s[2], s[3]).shape)
    assert.are.equal(ember.Size { 2, 3, 4 }, ember.zeros(2, 12):view(s).shape)
    assert.are.equal(ember.Size { 2, 3, 4 }, ember.ones(s).shape)
    assert.are.same({ 2, 3, 4 }, { table.unpack(s) })
  end)
end)
