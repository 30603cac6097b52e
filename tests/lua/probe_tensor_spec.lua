-- What a new user coming from PyTorch 1.13 or Torch7 types at the REPL when
-- exploring the tensor API: creation, indexing, arithmetic options,
-- reductions. Each block is a defect found by probing ember as such a user
-- (the values are PyTorch 1.13's); the test fails without its fix.
local ember = require "ember"
local raises_here = require("tests.lua.helpers.parity").raises_here

local function I(t) return ember.tensor(t, "int64") end

local function close(got, want, tol)
  assert.are.same(ember.tensor(want).shape, got.shape)
  local e = (got:double() - ember.tensor(want, "float64")):abs():max():item()
  assert(e <= (tol or 1e-6), ("max error %g in %s"):format(e, tostring(got)))
end

describe("add and sub take alpha (torch.add(a, b, alpha=)): it was silently ignored", function()
  local x = ember.tensor { -7, -3, 3, 7 }
  it("as an options table and as a number (Torch7's and add_'s positional alpha)", function()
    close(x:add(x, { alpha = 2 }), { -21, -9, 9, 21 })
    close(x:add(x, 2), { -21, -9, 9, 21 })
    close(x:sub(1, { alpha = 2 }), { -9, -5, 1, 5 })
    close(ember.sub(x, x, { alpha = 0.5 }), { -3.5, -1.5, 1.5, 3.5 })
    close(ember.add(1, x, { alpha = -1 }), { 8, 4, -2, -6 })
  end)
  it("keeps int64 with an integer alpha, refuses a float alpha on integers as torch", function()
    local i = I { -7, -3, 3, 7 }
    local y = i:add(i, { alpha = 2 })
    assert.are.equal("int64", y.dtype)
    assert.are.same({ -21, -9, 9, 21 }, y:totable())
    raises_here(function() local _ = i:add(i, { alpha = 0.5 }) end,
      "ember.add: for integer tensors alpha must be an integer, got 0.5")
  end)
  it("differentiates through the scaled operand", function()
    local a = ember.tensor({ 1, 2 }, { dtype = "float64", requires_grad = true })
    local b = ember.tensor({ 3, 4 }, { dtype = "float64", requires_grad = true })
    a:sub(b, { alpha = 3 }):sum():backward()
    assert.are.same({ 1, 1 }, a.grad:totable())
    assert.are.same({ -3, -3 }, b.grad:totable())
  end)
  it("refuses what it does not know", function()
    raises_here(function() local _ = x:add(x, { beta = 2 }) end, "ember.add: unknown option 'beta'")
    raises_here(function() local _ = x:sub(x, "2") end, "ember.sub: alpha must be a number or an options table {alpha =}, got string")
  end)
end)

describe("div takes rounding_mode (torch.div(a, b, rounding_mode=)): it was silently ignored", function()
  local f = ember.tensor { -7, -3, 3, 7 }
  local i = I { -7, -3, 3, 7 }
  it("'trunc' and 'floor' on floats", function()
    close(f:div(2, { rounding_mode = "trunc" }), { -3, -1, 1, 3 })
    close(f:div(2, { rounding_mode = "floor" }), { -4, -2, 1, 3 })
    close(f:div(-2, "floor"), { 3, 1, -2, -4 })
    close(ember.div(7, f, { rounding_mode = "trunc" }), { -1, -2, 2, 1 })
    close(f:div(2, { rounding_mode = nil }), { -3.5, -1.5, 1.5, 3.5 })
  end)
  it("on int64 it stays int64 (true division gives float32)", function()
    local t = i:div(2, { rounding_mode = "trunc" })
    assert.are.equal("int64", t.dtype)
    assert.are.same({ -3, -1, 1, 3 }, t:totable())
    local fl = i:div(I { 2, 2, -2, -2 }, "floor")
    assert.are.equal("int64", fl.dtype)
    assert.are.same({ -4, -2, -2, -4 }, fl:totable())
    assert.are.equal("float32", i:div(2).dtype)
  end)
  it("div_ writes the rounded quotient in place", function()
    local y = ember.tensor { -7, 7 }
    y:div_(2, { rounding_mode = "floor" })
    assert.are.same({ -4, 3 }, y:totable())
  end)
  it("refuses an unknown mode and an integer division by zero", function()
    raises_here(function() local _ = f:div(2, { rounding_mode = "round" }) end,
      "ember.div: rounding_mode must be nil, \"trunc\" or \"floor\", got round")
    raises_here(function() local _ = f:div(2, { mode = "floor" }) end, "ember.div: unknown option 'mode'")
    raises_here(function() local _ = i:div(0, "trunc") end, "integer division by zero")
  end)
end)

describe("clamp with min > max gives max everywhere (torch: min(max(x, lo), hi))", function()
  it("number bounds, on float and int64", function()
    close(ember.tensor { -7, -3, 3, 7 }:clamp(5, -5), { -5, -5, -5, -5 })
    assert.are.same({ -5, -5, -5 }, I { -7, 0, 7 }:clamp(5, -5):totable())
    close(ember.tensor { -7, 7 }:double():clamp(5, -5), { -5, -5 })
  end)
  it("the gradient is zero everywhere, as torch's", function()
    local x = ember.tensor({ -7, 0, 7 }, { dtype = "float64", requires_grad = true })
    x:clamp(5, -5):sum():backward()
    assert.are.same({ 0, 0, 0 }, x.grad:totable())
  end)
end)

describe("var and std take PyTorch 1.13's positional (dim, unbiased, keepdim)", function()
  local x = ember.tensor { { 1, 5, 3 }, { 4, 2, 6 } }
  it("x:var(dim, false) is the biased variance (it was the unbiased one, keepdim false)", function()
    close(x:var(2, false), { 8 / 3, 8 / 3 })
    close(x:var(2, true), { 4, 4 })
    close(x:var(2, false, true), { { 8 / 3 }, { 8 / 3 } })
    close(x:std(1, false), { 1.5, 1.5, 1.5 })
    close(x:var(false), 35 / 12)
    close(x:std(true), math.sqrt(3.5))
    close(x:var({ 1, 2 }, false, true), { { 35 / 12 } })
  end)
  it("and unbiased = as an option, beside correction and keepdim", function()
    close(x:std(2, { unbiased = false }), { math.sqrt(8 / 3), math.sqrt(8 / 3) })
    close(x:var({ unbiased = false, keepdim = true }), { { 35 / 12 } })
    raises_here(function() local _ = x:var(2, { unbiased = false, correction = 0 }) end,
      "ember.var: give unbiased or correction, not both")
    raises_here(function() local _ = x:var(2, 1) end, "ember.var: expected unbiased (a boolean) or an options table")
  end)
  it("the gradient of the biased variance is torch's", function()
    local y = ember.tensor({ { 1, -2, 3 }, { 4, 5, -6 } }, { dtype = "float64", requires_grad = true })
    y:var(2, false):sum():backward()
    close(y.grad, { { 2 / 9, -16 / 9, 14 / 9 }, { 2, 8 / 3, -14 / 3 } }, 1e-12)
  end)
end)

describe("ember.tensor of a nested table", function()
  it("takes one-element tensors as elements, as torch.tensor([t1, t2])", function()
    local t = ember.tensor { ember.tensor(1.5), ember.tensor { 2 }, 3 }
    assert.are.equal("float32", t.dtype)
    assert.are.same({ 1.5, 2, 3 }, t:totable())
    local a = ember.tensor { { 1, 5 }, { 7, 2 } }
    local idx = ember.tensor { a[1]:argmax(), a[2]:argmax() } -- the first element's dtype, as torch
    assert.are.equal("int64", idx.dtype)
    assert.are.same({ 2, 1 }, idx:totable())
    assert.are.equal("float64", ember.tensor { ember.tensor(1, "float64"), ember.tensor(2, "float64") }.dtype)
    assert.are.same({ true, false }, ember.tensor { ember.tensor(true), ember.tensor(false) }:totable())
    assert.are.equal("float64", ember.tensor({ ember.tensor(1) }, "float64").dtype)
    raises_here(function() local _ = ember.tensor { ember.ones(2), ember.ones(2) } end,
      "ember.tensor: only one-element tensors can stand for numbers, got shape [2] at {1}")
  end)
  it("names what it found where a mix of numbers and booleans was given (it said 'a string')", function()
    raises_here(function() local _ = ember.tensor { 1, 2.5, true } end,
      "ember.tensor: mixed numbers and booleans (a boolean at {3})")
    raises_here(function() local _ = ember.tensor { { 1, 2 }, { 3, "x" } } end,
      "ember.tensor: expected a number or a boolean at {2, 2}, got string")
  end)
  it("refuses a table that is not a list (it gave an empty tensor) and int64 overflow", function()
    raises_here(function() local _ = ember.tensor { a = 1 } end, "ember.tensor: expected a list")
    raises_here(function() local _ = ember.tensor({ 2 ^ 63 }, "int64") end, "does not fit int64")
    assert.are.same({ math.mininteger }, ember.tensor({ -2 ^ 63 }, "int64"):totable())
    assert.are.same({ 0 }, ember.tensor {}.shape)
  end)
end)

describe("amax and amin along dims", function()
  it("share the gradient evenly among ties, as torch (it all went to the first)", function()
    local x = ember.tensor({ 3, 1, 3, 0 }, { dtype = "float64", requires_grad = true })
    x:amax(1):backward()
    assert.are.same({ 0.5, 0, 0.5, 0 }, x.grad:totable())
    local y = ember.tensor({ { 1, 0, 1 }, { 2, 2, 2 } }, { dtype = "float64", requires_grad = true })
    y:amin(2):sum():backward()
    assert.are.same({ { 0, 1, 0 }, { 1 / 3, 1 / 3, 1 / 3 } }, y.grad:totable())
  end)
  it("take a table of dims and keepdim, as torch.amax(x, (0, 1))", function()
    local x = ember.tensor { { { 1, 9 }, { 4, 2 } }, { { 7, 3 }, { 5, 8 } } }
    close(x:amax({ 1, 3 }), { 9, 8 })
    close(x:amin({ 2, 3 }, true), { { { 1 } }, { { 3 } } })
    close(x:amax({ -1, -2 }), { 9, 8 })
    close(ember.amax(x, 2), { { 4, 9 }, { 7, 8 } })
    local g = ember.tensor({ { 1, 5 }, { 5, 2 } }, { dtype = "float64", requires_grad = true })
    g:amax({ 1, 2 }):backward()
    assert.are.same({ { 0, 0.5 }, { 0.5, 0 } }, g.grad:totable())
    assert.are.same({ 5, 7 }, I { { 1, 5 }, { 7, 2 } }:amax(2):totable())
    raises_here(function() local _ = x:amax({ 1, 1 }) end, "ember.amax: dim 1 repeated")
    raises_here(function() local _ = x:amax(4) end, "ember.amax: dim 4 is out of range")
  end)
end)

describe("max and min with a tensor are the elementwise maximum and minimum (torch.max(a, b))", function()
  it("it was 'dim must be an integer, got userdata'", function()
    local a, b = ember.tensor { 1, 5, 3 }, ember.tensor { 4, 2, 3 }
    close(a:max(b), { 4, 5, 3 })
    close(ember.min(a, b), { 1, 2, 3 })
    close(a:max(ember.tensor(2)), { 2, 5, 3 })
  end)
end)

describe("x:unflatten(dim, sizes), as torch.Tensor.unflatten", function()
  it("splits a dim (1-based, negative from the end, one size may be -1)", function()
    local x = ember.arange(24):view(2, 12)
    assert.are.same({ 2, 3, 4 }, x:unflatten(2, { 3, 4 }).shape)
    assert.are.same({ 2, 2, 6 }, x:unflatten(-1, { 2, -1 }).shape)
    assert.are.same({ 1, 2, 12 }, ember.unflatten(x, 1, { 1, 2 }).shape)
    assert.are.same(x:view(2, 3, 4):totable(), x:unflatten(2, { 3, 4 }):totable())
    raises_here(function() local _ = x:unflatten(2, { 5, 2 }) end,
      "ember.unflatten: sizes {5, 2} do not multiply to the size 12 of dim 2")
    raises_here(function() local _ = x:unflatten(3, { 1 }) end, "ember.unflatten: dim 3 is out of range")
  end)
end)

describe("scatter, index_fill and index_add name themselves in errors (they said scatter_add)", function()
  it("at the user's line", function()
    raises_here(function() local _ = ember.zeros(3):index_fill(1, I { 4 }, 1) end,
      "ember.index_fill: index 4 at {1} is out of range 1..3")
    raises_here(function() local _ = ember.zeros(3):index_add(1, I { 0 }, ember.ones(1)) end,
      "ember.index_add: index 0 at {1} is out of range 1..3")
    raises_here(function() local _ = ember.zeros(3, 4):scatter(2, I { { 5 }, { 1 }, { 1 } }, 1) end,
      "ember.scatter: index 5 at {1, 1} is out of range 1..4")
  end)
end)

describe("gradients at a zero norm or a zero spread are 0, as torch's (they were NaN)", function()
  local function leaf(v) return ember.tensor(v, { dtype = "float64", requires_grad = true }) end
  it("norm for p = 2, 3, 0.5 over a dim, and of everything", function()
    for _, p in ipairs { 2, 3, 0.5 } do
      local x = leaf { { 0, 0 }, { 3, 4 } }
      x:norm(p, 2):sum():backward()
      local n = (3 ^ p + 4 ^ p) ^ (1 / p)
      close(x.grad, { { 0, 0 }, { (3 / n) ^ (p - 1), (4 / n) ^ (p - 1) } }, 1e-12)
    end
    local z = leaf { 0, 0, 0 }
    z:norm():backward()
    assert.are.same({ 0, 0, 0 }, z.grad:totable())
    assert.are.same({}, leaf { { 3, 4 } }:norm().shape)
    assert.are.same({ 1, 1 }, leaf { { 3, 4 } }:norm(2, { 1, 2 }, true).shape)
    close(leaf { { 3, 4 }, { 6, 8 } }:norm(2, 2, true), { { 5 }, { 10 } })
  end)
  it("normalize of a zero row (1 / eps, as torch.nn.functional.normalize)", function()
    local x = leaf { { 0, 0 }, { 3, 4 } }
    ember.normalize(x, { dim = 2 }):sum():backward()
    close(x.grad, { { 1e12, 1e12 }, { 0.032, -0.024 } }, 1e-3)
  end)
  it("std of a constant row", function()
    local w = leaf { { 1, 1, 1 }, { 1, 2, 3 } }
    w:std(2):sum():backward()
    close(w.grad, { { 0, 0, 0 }, { -0.5, 0, 0.5 } }, 1e-12)
  end)
  it("the infinity norm along a dim shares the gradient among ties, as torch", function()
    local x = leaf { { -2, 2, 1 }, { 0, 3, -1 } }
    x:norm(math.huge, 2):sum():backward()
    assert.are.same({ { -0.5, 0.5, 0 }, { 0, 1, 0 } }, x.grad:totable())
  end)
  it("median of everything shares the gradient among ties, as torch", function()
    local x = leaf { 1, 2, 2, 3 }
    x:median():backward()
    assert.are.same({ 0, 0.5, 0.5, 0 }, x.grad:totable())
  end)
end)

describe("int64 tensors as indices in assignments and in table indices (x[idx] = v, x[{{}, idx}])", function()
  it("x[idx] = number or tensor writes the rows (it was 'cannot assign')", function()
    local a = ember.zeros(4)
    a[I { 1, 3 }] = 2
    assert.are.same({ 2, 0, 2, 0 }, a:totable())
    local b = ember.zeros(3, 2)
    b[I { 3, 1 }] = ember.tensor { { 1, 2 }, { 3, 4 } }
    assert.are.same({ { 3, 4 }, { 0, 0 }, { 1, 2 } }, b:totable())
    b[I { 2 }] = ember.tensor { 7, 8 } -- broadcast to [1, 2]
    assert.are.same({ 7, 8 }, b[2]:totable())
    b[I { { 1 } }] = ember.tensor { { 9, 9 } } -- replaced, not added
    assert.are.same({ { 9, 9 }, { 7, 8 }, { 1, 2 } }, b:totable())
    raises_here(function() b[I { 4 }] = 1 end, "ember.setindex: index 4 at {1} is out of range 1..3")
    raises_here(function() b[ember.tensor { 1 }] = 1 end, "ember.setindex: an index tensor must be int64")
  end)
  it("x[{{}, idx}] selects along that dim, as x[:, idx]", function()
    local x = ember.arange(12):view(3, 4)
    assert.are.same({ { 3, 0 }, { 7, 4 }, { 11, 8 } }, x[{ {}, I { 4, 1 } }]:totable())
    assert.are.same({ 9, 8 }, x[{ 3, I { 2, 1 } }]:totable())
    assert.are.same({ { 4, 7 } }, x[{ { 2, 2 }, I { 1, 4 } }]:totable())
    local g = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "float64", requires_grad = true })
    g[{ {}, I { 2, 2 } }]:sum():backward()
    assert.are.same({ { 0, 2 }, { 0, 2 } }, g.grad:totable())
    raises_here(function() local _ = x[{ I { 1 }, I { 1 } }] end, "ember.index: one int64 tensor per table index")
  end)
  it("x[{{}, idx}] = v writes through", function()
    local x = ember.zeros(2, 4)
    x[{ {}, I { 4, 2 } }] = 1
    assert.are.same({ { 0, 1, 0, 1 }, { 0, 1, 0, 1 } }, x:totable())
    x[{ 2, I { 1, 3 } }] = ember.tensor { 5, 6 }
    assert.are.same({ { 0, 1, 0, 1 }, { 5, 1, 6, 1 } }, x:totable())
    x[{ {}, I { 2 } }] = ember.tensor { { 3 }, { 4 } }
    assert.are.same({ { 0, 3, 0, 1 }, { 5, 4, 6, 1 } }, x:totable())
  end)
  it("index_copy, as torch.index_copy (and index_copy_)", function()
    local x = ember.zeros(3, 2)
    local y = x:index_copy(1, I { 3, 1 }, ember.tensor { { 1, 2 }, { 3, 4 } })
    assert.are.same({ { 3, 4 }, { 0, 0 }, { 1, 2 } }, y:totable())
    assert.are.same({ { 0, 0 }, { 0, 0 }, { 0, 0 } }, x:totable())
    x:index_copy_(2, I { 2 }, ember.ones(3, 1))
    assert.are.same({ { 0, 1 }, { 0, 1 }, { 0, 1 } }, x:totable())
    local s = ember.tensor({ { 5, 6 } }, { dtype = "float64", requires_grad = true })
    local t = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "float64", requires_grad = true })
    local y2 = t:index_copy(1, I { 2 }, s) * ember.tensor { { 1, 2 }, { 3, 4 } }:double()
    y2:sum():backward()
    assert.are.same({ { 1, 2 }, { 0, 0 } }, t.grad:totable())
    assert.are.same({ { 3, 4 } }, s.grad:totable())
    raises_here(function() local _ = x:index_copy(1, I { 1 }, ember.ones(2, 2)) end,
      "ember.index_copy: source must be x's shape [3, 2] with dim 1 the index's length")
  end)
end)

describe("mul_ and fill_ take tensors, as torch's mul_(other) and fill_(0-d tensor)", function()
  it("mul_ broadcasts the other tensor (it was 'bad argument #1 to mul_')", function()
    local x = ember.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
    local y = x:clone()
    assert.are.equal(y, y:mul_(ember.tensor { 1, 2, 3 }))
    assert.are.same({ { 1, 4, 9 }, { 4, 10, 18 } }, y:totable())
    y:mul_(ember.tensor { { 2 }, { 0 } })
    assert.are.same({ { 2, 8, 18 }, { 0, 0, 0 } }, y:totable())
    local i = I { 1, 2 }
    i:mul_(I { 3, 4 })
    assert.are.same({ 3, 8 }, i:totable())
    raises_here(function() i:mul_(ember.tensor { 1.5, 1 }) end,
      "ember.mul_: result type float32 can't be cast to the desired output type int64")
    raises_here(function() x:clone():mul_(ember.ones(3, 3)) end, "ember.mul_: shapes [2, 3] and [3, 3] cannot be broadcast")
    raises_here(function() ember.ones(2):requires_grad_():mul_(ember.ones(2)) end,
      "ember.mul_: a leaf tensor that requires grad")
    raises_here(function() x:clone():mul_("2") end, "ember.mul_: the factor must be a number or a tensor, got string")
  end)
  it("fill_ takes a one-element tensor", function()
    assert.are.same({ 3, 3 }, ember.zeros(2):fill_(ember.tensor(3)):totable())
    assert.are.same({ 7, 7 }, ember.zeros(2, "int64"):fill_(ember.tensor({ 7 }, "int64")):totable())
    raises_here(function() ember.zeros(2):fill_(ember.ones(2)) end,
      "ember.fill_: the value must be a number or a one-element tensor, got 2 elements")
  end)
end)
