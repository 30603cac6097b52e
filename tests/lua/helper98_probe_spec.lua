-- helper98: a Torch7 user's scripts. Where a Torch7 call means something
-- else in ember (PyTorch's meaning), it must be an error at the user's line,
-- never a silently different result: x:sub(i1, i2, j1, j2) (Torch7's slice)
-- was x - i2 * i1 with the rest dropped; ember.cat(a, b, dim) (Torch7's
-- form) raised Lua's "bad argument #1 to '?'"; seq:add(m, i) dropped i;
-- Torch7's result-first res:mm(a, b) was res @ a (b dropped), as fmod,
-- atan2, lerp, masked_fill, dot, outer, kron with one argument too many.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local raises_here = parity.raises_here

describe("helper98: Torch7 calls that mean something else in ember", function()
  local x = ember.tensor { { 1, 2, 3 }, { 4, 5, 7 } }
  local y = ember.ones(2, 3)

  it("add, sub and div refuse arguments past the options (Torch7's x:sub slice)", function()
    raises_here(function() local _ = x:sub(1, 2, 2, 3) end,
      "ember.sub: takes at most 2 arguments besides the tensor (other, alpha), got 4")
    raises_here(function() local _ = x:clone():sub_(1, 2, 2, 3) end, "ember.sub: takes at most 2 arguments")
    raises_here(function() local _ = ember.sub(x, 1, 2, 2) end, "ember.sub: takes at most 2 arguments")
    raises_here(function() local _ = x:add(y, 2, 3) end,
      "ember.add: takes at most 2 arguments besides the tensor (other, alpha), got 3")
    raises_here(function() local _ = x:div(y, "floor", 3) end,
      "ember.div: takes at most 2 arguments besides the tensor (other, rounding_mode), got 3")
    -- the forms that stay: alpha and rounding_mode, trailing nils
    assert.are.same({ { -1, 0, 1 }, { 2, 3, 5 } }, x:sub(1, 2):tolist())
    assert.are.same({ { 3, 4, 5 }, { 6, 7, 9 } }, x:add(y, { alpha = 2 }):tolist())
    assert.are.same({ { 0, 1, 1 }, { 2, 2, 3 } }, x:div(2, "floor", nil):tolist())
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 6 } }, x:sub(y, nil, nil):tolist())
  end)

  it("cat and stack name themselves for Torch7's cat(a, b, dim) and extra arguments", function()
    raises_here(function() local _ = ember.cat(x, y, 2) end,
      "ember.cat: expected one list of tensors, got a tensor as argument 1 (ember.cat({a, b, ...} [, dim]))")
    raises_here(function() local _ = ember.stack(x, y) end, "ember.stack: expected one list of tensors")
    raises_here(function() local _ = ember.cat(5) end, "ember.cat: expected a list of tensors, got number")
    raises_here(function() local _ = ember.cat({ x, y }, 1, 2) end,
      "ember.cat: takes a list of tensors and a dim, got 3 arguments (argument 3 is a number)")
    raises_here(function() local _ = ember.stack({ x, y }, 1, {}) end, "ember.stack: takes a list of tensors and a dim")
    assert.is_true(ember.cat({ x, y }, 2, nil).shape == ember.Size { 2, 6 })
    assert.is_true(ember.stack({ x, y }).shape == ember.Size { 2, 2, 3 })
  end)

  it("Sequential.add names itself, says when it got a class, and refuses Torch7's add(m, i)", function()
    raises_here(function() local _ = nn.Sequential():add(5) end, "Sequential.add: expected a module, got number")
    raises_here(function() local _ = nn.Sequential():add(nn.Linear) end,
      "Sequential.add: expected a module, got the class nn.Linear (call it: nn.Linear(...))")
    raises_here(function() local _ = nn.ModuleList():append(nn.ReLU) end,
      "ModuleList.append: expected a module, got the class nn.ReLU")
    raises_here(function() local _ = nn.Sequential(nn.ReLU()):add(nn.Tanh(), 1) end,
      "Sequential.add: takes one module (seq:insert(i, m)")
    local s = nn.Sequential():add(nn.ReLU()):add(nn.Tanh())
    assert.are.equal(2, #s)
    assert.are.equal("Tanh", s[2].__name)
  end)

  it("two-operand ops refuse Torch7's result-first form res:op(a, b) (it was res op a, b dropped)", function()
    local r, a, b = ember.zeros(2, 2), ember.tensor { { 1, 2 }, { 3, 4 } }, ember.tensor { { 0, 1 }, { 1, 0 } }
    local u = ember.ones(2)
    raises_here(function() local _ = r:mm(a, b) end, "ember.mm: takes at most 1 argument besides the tensor (mat2), got 2")
    raises_here(function() local _ = r:matmul(a, b) end, "ember.matmul: takes at most 1 argument besides the tensor (other), got 2")
    raises_here(function() local _ = r:view(1, 2, 2):bmm(a:view(1, 2, 2), b:view(1, 2, 2)) end, "ember.bmm: takes at most 1 argument")
    raises_here(function() local _ = ember.zeros(2):dot(u, u) end, "ember.dot: takes at most 1 argument")
    raises_here(function() local _ = ember.zeros(2):outer(u, u) end, "ember.outer: takes at most 1 argument")
    raises_here(function() local _ = r:kron(a, b) end, "ember.kron: takes at most 1 argument")
    raises_here(function() local _ = r:atan2(a, b) end, "ember.atan2: takes at most 1 argument")
    raises_here(function() local _ = r:fmod(a, 2) end, "ember.fmod: takes at most 1 argument")
    raises_here(function() local _ = r:remainder(a, 2) end, "ember.remainder: takes at most 1 argument")
    raises_here(function() local _ = r:lerp(a, b, 0.5) end, "ember.lerp: takes at most 2 arguments besides the tensor (end, weight)")
    raises_here(function() local _ = r:masked_fill(a:gt(2), 1, 5) end,
      "ember.masked_fill: takes at most 2 arguments besides the tensor (mask, value), got 3")
    -- the two-operand forms, trailing nils included
    assert.are.same({ { 2, 1 }, { 4, 3 } }, a:mm(b, nil):tolist())
    assert.are.same({ { 2, 1 }, { 4, 3 } }, a:matmul(b):tolist())
    assert.are.equal(2, u:dot(u, nil):item())
    assert.are.same({ { 1, 0 }, { 1, 0 } }, a:fmod(2):tolist())
    assert.are.same({ { 0.5, 1.5 }, { 2, 2 } }, a:lerp(b, 0.5):tolist())
    assert.are.same({ { 1, 2 }, { 0, 0 } }, a:masked_fill(a:gt(2), 0):tolist())
  end)

  it("x:nelement() checks its tensor as the other Torch7 names do", function()
    assert.are.equal(6, x:nelement())
    local f = x.nelement
    raises_here(function() local _ = f(5) end, "ember.nelement: argument 1 must be a tensor, got number")
  end)
end)
