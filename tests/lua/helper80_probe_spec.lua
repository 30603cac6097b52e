-- helper80's probes of everyday tensor creation against torch 1.13.
local ember = require "ember"

describe("creation options (helper80)", function()
  it("a misspelt option is refused by the Lua creators, as by the C ones", function()
    local x = ember.ones(2)
    local calls = {
      zeros_like = function(o) return ember.zeros_like(x, o) end,
      ones_like = function(o) return ember.ones_like(x, o) end,
      full_like = function(o) return ember.full_like(x, 1, o) end,
      rand_like = function(o) return ember.rand_like(x, o) end,
      randn_like = function(o) return ember.randn_like(x, o) end,
      linspace = function(o) return ember.linspace(0, 1, 3, o) end,
      logspace = function(o) return ember.logspace(0, 1, 3, o) end,
      eye = function(o) return ember.eye(3, o) end,
      randint = function(o) return ember.randint(0, 3, { 3 }, o) end,
      randperm = function(o) return ember.randperm(3, o) end,
    }
    for name, call in pairs(calls) do
      local ok, err = pcall(call, { dtpe = "float64" })
      assert.is_false(ok, name)
      assert.matches("ember%." .. name .. ": unknown option 'dtpe'", err)
      assert.equals("float64", call({ dtype = "float64" }).dtype, name)
    end
  end)

  it("randperm takes dtype and requires_grad, as torch.randperm", function()
    local r = ember.randperm(5, { dtype = "float64" })
    assert.equals("float64", r.dtype)
    assert.same({ 1, 2, 3, 4, 5 }, r:sort():totable())
    assert.equals("int64", ember.randperm(3).dtype)
  end)

  it("logspace takes torch's base keyword", function()
    -- torch.logspace(0, 2, 3, base=2) = [1, 2, 4]
    assert.same({ 1, 2, 4 }, ember.logspace(0, 2, 3, { base = 2, dtype = "float64" }):totable())
    assert.same({ 1, 2, 4 }, ember.logspace(0, 2, 3, 2, { dtype = "float64" }):totable())
    assert.has_error(function() ember.logspace(0, 2, 3, 2, { base = 2 }) end)
  end)
end)

describe("scatter's reduce option (helper80)", function()
  local I = function(t) return ember.tensor(t, { dtype = "int64" }) end
  it("adds with {reduce = 'add'}, as torch's scatter(..., reduce='add')", function()
    -- torch.ones(3).scatter(0, [0,0,1], [2.,3,4], reduce='add') = [6, 5, 1]; a value 2.5 gives [6, 3.5, 1]
    assert.same({ 6, 5, 1 }, ember.ones(3):scatter(1, I { 1, 1, 2 }, ember.tensor({ 2, 3, 4 }), { reduce = "add" }):totable())
    assert.same({ 6, 3.5, 1 }, ember.ones(3):scatter(1, I { 1, 1, 2 }, 2.5, { reduce = "add" }):totable())
    local y = ember.ones(3)
    y:scatter_(1, I { 1, 1, 2 }, ember.tensor({ 2, 3, 4 }), { reduce = "add" })
    assert.same({ 6, 5, 1 }, y:totable())
  end)
  it("refuses what it does not do instead of ignoring it", function()
    local x, i, s = ember.ones(3), I { 1, 1, 2 }, ember.tensor({ 2, 3, 4 })
    local ok, err = pcall(x.scatter, x, 1, i, s, { reduce = "multiply" })
    assert.is_false(ok); assert.matches("ember.scatter: reduce must be", err)
    ok, err = pcall(x.scatter, x, 1, i, s, { reduc = "add" })
    assert.is_false(ok); assert.matches("ember.scatter: unknown option 'reduc'", err)
  end)
end)

describe("roll of a 0-d tensor (helper80)", function()
  it("rolls along its dim 1 as the other 0-d ops do, instead of failing inside ember.size", function()
    local s = ember.tensor(3.5)
    local r = s:roll(2, 1)
    assert.equals(0, r:dim())
    assert.equals(3.5, r:item())
    assert.equals(3.5, s:roll({ 1 }, { -1 }):item())
    local ok, err = pcall(s.roll, s, 1, 2)
    assert.is_false(ok); assert.matches("ember.roll", err)
  end)
end)

describe("median with NaN (helper80)", function()
  local n = 0 / 0
  local function isnan(v) return v ~= v end
  it("propagates NaN as torch.median: all elements and along a dim", function()
    -- torch: tensor([3,nan,1,nan,2]).median() = nan, its grad [0, .5, 0, .5, 0];
    -- median(1) of [[3,nan,1,nan,2],[1,2,3,4,5]] = ([nan, 3], [1, 2]) 0-based, grad one-hot there
    local y = ember.tensor({ 3, n, 1, n, 2 }, { dtype = "float64" }):requires_grad_()
    local m = y:median()
    assert.is_true(isnan(m:item()))
    m:backward()
    assert.same({ 0, 0.5, 0, 0.5, 0 }, y.grad:totable())
    local x = ember.tensor({ { 3, n, 1, n, 2 }, { 1, 2, 3, 4, 5 } }, { dtype = "float64" }):requires_grad_()
    local v, i = x:median(2)
    assert.is_true(isnan(v:totable()[1])); assert.equals(3, v:totable()[2])
    assert.same({ 2, 3 }, i:totable())
    v:sum():backward()
    assert.same({ { 0, 1, 0, 0, 0 }, { 0, 0, 1, 0, 0 } }, x.grad:totable())
    local vk, ik = ember.tensor({ { 3, n }, { 1, 2 } }):median(2, true)
    assert.same({ 2, 1 }, { ik:size(1), ik:size(2) }); assert.same({ { 2 }, { 1 } }, ik:totable())
    assert.equals(2, ember.tensor({ 4, 1, 3, 2 }):median():item())
  end)
end)
