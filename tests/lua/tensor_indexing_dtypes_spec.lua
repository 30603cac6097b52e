-- Indexing and dtypes as a PyTorch / Torch7 user meets them: int64 index
-- tensors count negative positions from the end (x[-1], torch's x[idx]);
-- `for i, row in ipairs(t)` walks the rows; t[t > 0] (one Lua boolean) says
-- the mask is t:gt(0); the logical ops take any dtype and more in-place
-- twins exist; the ternary ops (where, addcmul, addcdiv, lerp, clamp) name
-- themselves in their errors; ember.full's dtype; a bool mask scatters.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local raises_here = parity.raises_here

local function same(a, b) assert.is_true(ember.equal(a, b), tostring(a) .. " vs " .. tostring(b)) end

describe("int64 index tensors count negative positions from the end, as x[-1] and torch's x[idx]", function()
  local I = function(t) return ember.tensor(t, { dtype = "int64" }) end
  local x = ember.arange(12):view(3, 4)

  -- was: ember.index: index -1 at {1} is out of range 1..3 (1-based)
  it("x[idx], x[{idx}], x[{{}, idx}] and x[{rows, cols}] read them", function()
    assert.is_true(ember.equal(x[I { -1, 1 }], x[I { 3, 1 }]))
    assert.is_true(ember.equal(x[I { { -1 }, { 2 } }], x[I { { 3 }, { 2 } }]))
    assert.is_true(ember.equal(x[{ I { -2 } }], x[{ I { 2 } }]))
    assert.is_true(ember.equal(x[{ {}, I { -1, 1 } }], x[{ {}, I { 4, 1 } }]))
    assert.is_true(ember.equal(x[{ 2, I { -1 } }], x[{ 2, I { 4 } }]))
    assert.is_true(ember.equal(x[{ I { 1, -1 }, I { -1, 1 } }], ember.tensor({ 3, 8 })))
  end)

  it("gradients flow to the rows they name", function()
    local w = ember.zeros(3, 2, { dtype = "float64" }):requires_grad_()
    w[I { -1, -1, 1 }]:sum():backward()
    assert.is_true(ember.equal(w.grad, ember.tensor({ { 1, 1 }, { 0, 0 }, { 2, 2 } }, { dtype = "float64" })))
  end)

  it("x[idx] = v, x[{rows, cols}] = v and index_put (accumulate) write them", function()
    local t = ember.zeros(3, 2)
    t[I { -1 }] = 1
    t[{ I { -3 }, I { -1 } }] = 5
    assert.is_true(ember.equal(t, ember.tensor({ { 0, 5 }, { 0, 0 }, { 1, 1 } })))
    local acc = ember.zeros(3):index_put({ I { -1, -1, 1 } }, ember.tensor({ 1, 2, 3 }), true)
    assert.is_true(ember.equal(acc, ember.tensor({ 3, 0, 3 })))
  end)

  it("x:take(idx) too (torch.take); past either end is refused naming the op", function()
    local t = ember.arange(24):view(2, 3, 4):transpose(1, 3)
    assert.is_true(ember.equal(t:take(I { 1, -1 }), ember.tensor({ 0, 23 })))
    raises_here(function() local _ = ember.arange(3):take(I { -4 }) end,
      "ember.take: index -4 is out of range for 3 elements (1-based: 1..3 or -3..-1)")
    raises_here(function() local _ = ember.arange(3):take(I { 4 }) end,
      "ember.take: index 4 is out of range for 3 elements")
    raises_here(function() local _ = x[I { -4 }] end, "ember.index: index -4")
    raises_here(function() local _ = x[{ I { 1 }, I { -5 } }] end, "ember.index: index -5 is out of range for a dim of size 4")
  end)
end)

describe("ipairs over a tensor", function()
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

describe("t[t > 0], where the comparison gave one Lua boolean", function()
  it("says the mask is t:gt(0)", function()
    local t = ember.tensor({ -1, 2, 3 })
    assert.are.equal("boolean", type(t > 0)) -- Lua's operators give one boolean
    local ok, err = pcall(function() return t[t > 0] end)
    assert.is_false(ok)
    assert.truthy(err:find("tensor_indexing_dtypes_spec.lua:%d+: ember.index: cannot index a tensor with a boolean"), err)
    assert.truthy(err:find("t[t:gt(0)]", 1, true), err)
    ok, err = pcall(function() t[t > 0] = 0 end)
    assert.is_false(ok)
    assert.truthy(err:find("ember.setindex: cannot assign to a tensor indexed by a boolean", 1, true), err)
    assert.truthy(err:find("t[t:gt(0)] = v", 1, true), err)
    assert.are.same({ 2, 3 }, t[t:gt(0)]:tolist())
  end)
end)

describe("logical ops of any dtype and more in-place twins, as torch's", function()
  local I = function(t) return ember.tensor(t, { dtype = "int64" }) end
  -- was: 'ember.logical_and: expected bool tensors, got float32 [2] and float32 [2]'
  it("logical_and / or / xor / not treat nonzero (NaN too) as true", function()
    local a, b = ember.tensor({ 0, 2, 0 / 0 }), I { 1, 0, 0 }
    assert.are.same({ false, false, false }, ember.logical_and(a, b):totable())
    assert.are.same({ true, true, true }, a:logical_or(b):totable())
    assert.are.same({ true, true, true }, ember.logical_xor(a, b):totable())
    assert.are.same({ true, false, false }, a:logical_not():totable())
    assert.are.equal("bool", a:logical_not().dtype)
  end)

  -- was: absent (attempt to call a nil value)
  it("floor_divide_, true_divide_, logical_not_, put_, copysign_ write x, refusing a higher result type", function()
    local i = I { -7, 7 }
    assert.are.equal(i, i:floor_divide_(2))
    assert.are.same({ -4, 3 }, i:totable())
    local f = ember.tensor({ 0, 2 })
    f:logical_not_()
    assert.are.same({ 1, 0 }, f:totable())
    local p = ember.zeros(2, 2)
    p:put_(I { -1, 1 }, ember.tensor({ 5, 6 }))
    assert.are.same({ { 6, 0 }, { 0, 5 } }, p:totable())
    local c = ember.tensor({ 3, -4 })
    c:copysign_(-1)
    assert.are.same({ -3, -4 }, c:totable())
    raises_here(function() I({ 1, 2 }):true_divide_(2) end,
      "ember.true_divide_: result type float32 can't be cast to the desired output type int64")
  end)
end)

describe("the ternary ops name themselves in their errors, at the user's line", function()
  local t = ember.randn(3)
  it("where: a bad condition or operand", function()
    raises_here(function() local _ = ember.where(t:gt(0), "x", ember.randn(3)) end,
      "ember.where: argument 2 (input) must be a tensor or a number, got string")
    raises_here(function() local _ = ember.where(t:gt(0), ember.randn(3), nil) end,
      "ember.where: argument 3 (other) must be a tensor or a number, got nil")
    raises_here(function() local _ = ember.where("x", t, t) end,
      "ember.where: the condition (argument 1) must be a bool tensor, got string")
    raises_here(function() local _ = ember.where(t:gt(0), t, ember.randn(4)) end, "ember.where: shapes [3] and [4]")
    -- numbers and booleans still work
    assert.are.same({ 1, 0 }, ember.where(ember.tensor { true, false }, 1, 0):totable())
  end)
  it("addcmul, addcdiv, lerp, clamp: shapes that do not broadcast name the op, not the op inside", function()
    raises_here(function() local _ = ember.addcmul(t, ember.randn(4), ember.randn(3)) end,
      "ember.addcmul: tensor1 [4] does not broadcast to the others (size 4 vs 3)")
    raises_here(function() local _ = t:addcdiv(ember.randn(3), ember.randn(2, 5)) end,
      "ember.addcdiv: tensor2 [2, 5] does not broadcast to the others (size 5 vs 3)")
    raises_here(function() local _ = ember.lerp(t, ember.randn(4), 0.5) end,
      "ember.lerp: end [4] does not broadcast to the others (size 4 vs 3)")
    raises_here(function() local _ = ember.lerp(t, ember.randn(3), ember.randn(4)) end,
      "ember.lerp: weight [4] does not broadcast to the others (size 4 vs 3)")
    raises_here(function() local _ = t:clamp(ember.randn(3), ember.randn(5)) end,
      "ember.clamp: max [5] does not broadcast to the others (size 5 vs 3)")
    raises_here(function() local _ = ember.tensor({ 1, 2, 3 }, "int64"):clamp(ember.tensor { 1, 2 }) end,
      "ember.clamp: min [2] does not broadcast to the others (size 2 vs 3)")
    raises_here(function() local _ = t:clone():addcmul_(ember.randn(4), ember.randn(3)) end, "ember.addcmul: tensor1 [4]")
    -- broadcasting operands still work
    local w = ember.full({ 2, 1 }, 0.25)
    assert(ember.allclose(ember.lerp(ember.zeros(2, 3), ember.ones(3), w), ember.full({ 2, 3 }, 0.25)))
    assert(ember.addcmul(ember.zeros(3), ember.ones(2, 1), ember.ones(3)).shape == ember.Size { 2, 3 })
  end)
end)

describe("ember.full's dtype: float32 by design (Torch7's), int64 by name", function()
  it("infers float32 from numbers, bool from booleans, and takes the dtype by name or in options", function()
    assert.are.equal("float32", ember.full({ 2 }, 3).dtype)
    assert.are.equal("bool", ember.full({ 2 }, true).dtype)
    assert.are.equal("int64", ember.full({ 2 }, 3, "int64").dtype)
    assert.are.same({ 3, 3 }, ember.full({ 2 }, 3, { dtype = "int64" }):totable())
    assert.are.equal("float64", ember.full({ 2 }, 3, { dtype = "float64" }).dtype)
  end)
  it("an argument after the options is an error, not a dtype silently dropped", function()
    raises_here(function() local _ = ember.full({ 2 }, 3, nil, { dtype = "int64" }) end,
      "ember.full: takes (shape, value [, opts]), got a table as argument 4")
  end)
end)

describe("scatter of a bool tensor", function()
  it("a bool mask scatters (Hugging Face's top-p filter), as on 0/1 numbers", function()
    ember.manual_seed(3)
    local logits = ember.randn(4, 11)
    local sorted, idx = logits:sort(-1, true)
    local remove = nn.functional.softmax(sorted, -1):cumsum(-1):gt(0.7)
    local back = remove:scatter(-1, idx, remove)
    assert.are.equal("bool", back.dtype)
    same(back, remove:float():scatter(-1, idx, remove:float()):ne(0))
    -- each row removes the tokens its own sorted order removed
    for r = 1, 4 do
      for j = 1, 11 do
        assert.are.equal(remove[{ r, j }]:item(), back[{ r, idx[{ r, j }]:item() }]:item())
      end
    end
    -- a boolean src, in place too
    local m = ember.zeros(2, 3, "bool")
    same(m:scatter(2, ember.tensor({ { 2 }, { 3 } }, "int64"), true),
      ember.tensor({ { false, true, false }, { false, false, true } }))
    m:scatter_(2, ember.tensor({ { 1 }, { 1 } }, "int64"), true)
    same(m, ember.tensor({ { true, false, false }, { true, false, false } }))
  end)
end)
