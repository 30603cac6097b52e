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
    close(x:var({ dim = 2, unbiased = false }), { 8 / 3, 8 / 3 })
    close(x:std({ dim = { 1, 2 }, keepdim = true }), { { math.sqrt(3.5) } })
    raises_here(function() local _ = x:var(1, { dim = 2 }) end, "ember.var: the dim is given twice")
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
    raises_here(function() local _ = ember.zeros(2, 2, 2)[{ {}, I { 1 }, I { 1 } }] end,
      "ember.index: one int64 tensor per table index")
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

describe("everyday functions a PyTorch user expects (they were missing)", function()
  it("diagonal (offset, dim1, dim2 as torch.diagonal; 1-based dims)", function()
    local x = ember.arange(24):view(2, 3, 4)
    assert.are.same({ { 0, 16 }, { 1, 17 }, { 2, 18 }, { 3, 19 } }, x:diagonal():totable())
    assert.are.same({ { 1, 6, 11 }, { 13, 18, 23 } }, x:diagonal(1, 2, 3):totable())
    assert.are.same({ { 1, 14 }, { 5, 18 }, { 9, 22 } }, x:diagonal(-1, 3, 1):totable())
    local m = ember.arange(12):view(3, 4)
    assert.are.same({ 0, 5, 10 }, m:diagonal():totable())
    assert.are.same({ 2, 7 }, ember.diagonal(m, 2):totable())
    assert.are.same({ 8 }, m:diagonal(-2):totable())
    assert.are.same({ 0 }, m:diagonal(5).shape)
    local g = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "float64", requires_grad = true })
    g:diagonal():sum():backward()
    assert.are.same({ { 1, 0 }, { 0, 1 } }, g.grad:totable())
    raises_here(function() local _ = m:diagonal(0, 1, 1) end, "ember.diagonal: dim1 and dim2 must differ")
  end)
  it("take and take_along_dim (1-based positions)", function()
    local m = ember.arange(12):view(3, 4)
    assert.are.same({ { 0, 11 } }, m:take(I { { 1, 12 } }):totable())
    assert.are.same({ { 0 }, { 7 }, { 9 } }, m:take_along_dim(I { { 1 }, { 4 }, { 2 } }, 2):totable())
    assert.are.same({ { 8, 1, 6, 7 } }, m:take_along_dim(I { { 3, 1, 2, 2 } }, 1):totable())
    local v, i = m:max(2, true)
    assert.are.same(v:totable(), m:take_along_dim(i, 2):totable())
    raises_here(function() local _ = m:take(ember.tensor { 1 }) end, "ember.take: index must be an int64 tensor")
  end)
  it("nansum, nanmean, logaddexp, hypot, frac, fliplr, flipud", function()
    local nan = 0 / 0
    close(ember.tensor { 1, nan, 2 }:nansum(), 3)
    local nm = ember.tensor { { 1, nan }, { nan, nan } }:nanmean(2)
    assert.are.equal(1, nm[1]:item())
    assert.is_true(nm[2]:isnan():item())
    close(ember.tensor { 1000, -1000, 0 }:logaddexp(ember.tensor { 1000, 1, 0 }), { 1000.6931471805599, 1, 0.6931471805599453 }, 1e-4)
    close(ember.tensor({ 3e30, 0 }, "float64"):hypot(ember.tensor({ 4e30, 0 }, "float64")) / 1e30, { 5, 0 }, 1e-12)
    close(ember.tensor { -1.5, 2.25 }:frac(), { -0.5, 0.25 })
    assert.are.same({ { 2, 1 }, { 4, 3 } }, ember.tensor { { 1, 2 }, { 3, 4 } }:fliplr():totable())
    assert.are.same({ { 3, 4 }, { 1, 2 } }, ember.tensor { { 1, 2 }, { 3, 4 } }:flipud():totable())
    assert.is_true(ember.is_floating_point(ember.zeros(1)))
    assert.is_false(ember.is_floating_point(I { 1 }))
  end)
  it("Torch7's names: nDimension, nElement, isContiguous, fill and zero in place, isSameSizeAs", function()
    local x = ember.zeros(2, 3)
    assert.are.same({ 2, 6, true }, { x:nDimension(), x:nElement(), x:isContiguous() })
    assert.are.equal(x, x:fill(2))
    assert.are.same({ 2, 2, 2 }, x[1]:totable())
    x:zero()
    assert.are.same({ 0, 0, 0 }, x[2]:totable())
    assert.is_true(x:isSameSizeAs(ember.ones(2, 3)))
    assert.is_false(x:is_same_size(ember.ones(3, 2)))
  end)
end)

describe("ember.cat skips 1-d empty tensors beside others, as torch.cat (it was 'tensor 1 has 2 dims')", function()
  it("so that acc = ember.cat({acc, x}) from acc = ember.tensor{} works", function()
    local x = ember.ones(2, 3)
    local acc = ember.tensor {}
    for _ = 1, 2 do acc = ember.cat({ acc, x }) end
    assert.are.same({ 4, 3 }, acc.shape)
    assert.are.same({ 2, 3 }, ember.cat({ ember.tensor {}:long(), x }, 2).shape)
    assert.are.equal("float32", ember.cat({ ember.tensor {}, x:long() }).dtype)
    assert.are.same({ 0 }, ember.cat({ ember.tensor {}, ember.tensor {} }).shape)
    raises_here(function() local _ = ember.cat({ ember.zeros(0, 3), ember.ones(2, 4) }) end, "ember.cat: tensors 1 and 2 differ")
    raises_here(function() local _ = ember.cat({ ember.tensor {}, ember.ones(2), 3 }) end, "ember.cat: element 3 of the list is a number")
  end)
end)

describe("sum, mean, prod, cumsum and cumprod take torch's dtype= (it was silently ignored)", function()
  it("converting the input first", function()
    local x = ember.tensor { { 1, 2 }, { 3, 4 } }
    assert.are.equal("float64", x:sum({ dtype = "float64" }).dtype)
    assert.are.equal("float64", x:sum(1, { dtype = "float64" }).dtype)
    local m = x:mean(2, true, { dtype = "float64" })
    assert.are.equal("float64", m.dtype)
    assert.are.same({ 2, 1 }, m.shape)
    assert.are.equal("float64", x:prod({ dim = 1, dtype = "float64" }).dtype)
    assert.are.same({ { 1, 3 }, { 3, 7 } }, x:cumsum(2, { dtype = "int64" }):totable())
    assert.are.equal("float64", x:cumprod(1, "float64").dtype)
    assert.are.equal("float64", ember.cumsum(x, 1, { dtype = "float64" }).dtype)
    raises_here(function() local _ = x:max({ dtype = "float64" }) end, "ember.max: unknown option 'dtype'")
    raises_here(function() local _ = x:cumsum(1, { dims = 1 }) end, "ember.cumsum: unknown option 'dims'")
    raises_here(function() local _ = x:sum(1, true, { keepdim = true }) end, "ember.sum: keepdim given twice")
  end)
end)

describe("squeeze takes the keyword form {dim =} (it silently squeezed nothing)", function()
  it("as the reductions do", function()
    local x = ember.zeros(1, 3, 1)
    assert.are.same({ 3, 1 }, x:squeeze({ dim = 1 }).shape)
    assert.are.same({ 3 }, x:squeeze({ dim = { 1, 3 } }).shape)
    assert.are.same({ 1, 3 }, x:squeeze({ 3 }).shape)
    raises_here(function() local _ = x:squeeze({ dims = 1 }) end, "ember.squeeze: unknown option 'dims'")
  end)
end)

describe("dtype names as PyTorch and Torch7 write them", function()
  it("'torch.float64' and x:type('torch.DoubleTensor') (were unknown)", function()
    assert.are.equal("float64", ember.zeros(2, { dtype = "torch.float64" }).dtype)
    assert.are.equal("int64", ember.ones(2):to("torch.int64").dtype)
    assert.are.equal("float64", ember.ones(2):type("torch.DoubleTensor").dtype)
    assert.are.equal("int64", ember.ones(2):type("torch.LongTensor").dtype)
    assert.are.equal("float32", ember.ones(2, "int64"):type("torch.FloatTensor").dtype)
    raises_here(function() local _ = ember.zeros(1, "torch.float16") end, "ember.zeros: unknown dtype 'torch.float16'")
  end)
end)

describe("ember.normal in torch's argument orders (it was 'bad argument #3 to normal')", function()
  it("normal(mean, std, size) with numbers, normal(mean, std) with tensors", function()
    ember.manual_seed(7)
    local a = ember.normal(2, 3, { 20000 })
    assert.are.same({ 20000 }, a.shape)
    assert(math.abs(a:mean():item() - 2) < 0.1 and math.abs(a:std():item() - 3) < 0.1)
    ember.manual_seed(7)
    assert.is_true(a:equal(ember.normal({ 20000 }, 2, 3))) -- ember's own order, the same draws
    local m = ember.tensor { 0, 100, -100 }
    local y = ember.normal(m, 0.001)
    assert(y:sub(m):abs():max():item() < 0.01)
    local z = ember.normal(ember.zeros(2, 1), ember.tensor { 1e-9, 1e-9, 1e-9 })
    assert.are.same({ 2, 3 }, z.shape)
    assert.is_false(ember.normal(ember.zeros(3):requires_grad_(), 1).requires_grad)
    raises_here(function() local _ = ember.normal(m, 1, { 3 }) end, "ember.normal: normal(mean, std) with tensors takes no size")
  end)
end)

describe("several int64 tensors in a table index pick pointwise, as x[rows, cols] (it was an error)", function()
  it("reads, broadcasting the tensors, with ranges after them", function()
    local logits = ember.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
    assert.are.same({ 3, 4 }, logits[{ I { 1, 2 }, I { 3, 1 } }]:totable()) -- logits[arange(B), labels]
    local x = ember.arange(24):view(2, 3, 4)
    assert.are.same({ { 4, 5, 6, 7 }, { 20, 21, 22, 23 } }, x[{ I { 1, 2 }, I { 2, 3 } }]:totable())
    assert.are.same({ { 5, 6 }, { 21, 22 } }, x[{ I { 1, 2 }, I { 2, 3 }, { 2, 3 } }]:totable())
    assert.are.same({ { 1, 2 }, { 13, 14 } }, x[{ I { { 1 }, { 2 } }, I { 1 }, I { 2, 3 } }]:totable())
    local g = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "float64", requires_grad = true })
    g[{ I { 1, 2, 2 }, I { 2, 1, 1 } }]:sum():backward()
    assert.are.same({ { 0, 1 }, { 2, 0 } }, g.grad:totable())
    raises_here(function() local _ = logits[{ I { 1, 3 }, I { 1, 1 } }] end, "ember.index: index 1: positions must be in 1..2")
    raises_here(function() local _ = logits[{ I { 1 }, 2, I { 1 } }] end, "ember.index: int64 tensors in a table index must lead it")
  end)
  it("assigns numbers and tensors", function()
    local x = ember.zeros(2, 3)
    x[{ I { 1, 2 }, I { 3, 1 } }] = 5
    assert.are.same({ { 0, 0, 5 }, { 5, 0, 0 } }, x:totable())
    x[{ I { 2, 1 }, I { 2, 2 } }] = ember.tensor { 7, 8 }
    assert.are.same({ { 0, 8, 5 }, { 5, 7, 0 } }, x:totable())
    x[{ I { 1 }, I { 3 } }] = 1 -- replaced, not added
    assert.are.same({ 0, 8, 1 }, x[1]:totable())
  end)
end)

describe("x.data and x.is_cuda, as PyTorch's (they were nil)", function()
  it("x.data is x detached, the same memory (w.data:mul_(3) on a leaf that requires grad)", function()
    local w = ember.ones(2):requires_grad_()
    w.data:mul_(3)
    assert.are.same({ 3, 3 }, w:totable())
    assert.is_true(w.requires_grad)
    assert.is_false(w.data.requires_grad)
    assert.is_false(w.is_cuda)
  end)
end)

describe("ember.load and ember.save name themselves in errors (they said ember.safetensors_*)", function()
  it("for a missing or a broken file, at the user's line", function()
    raises_here(function() local _ = ember.load("/nonexistent/x.safetensors") end,
      "ember.load: '/nonexistent/x.safetensors': No such file or directory")
    local p = os.tmpname()
    local f = assert(io.open(p, "w"))
    f:write("garbage")
    f:close()
    raises_here(function() local _ = ember.load(p) end, "ember.load: '" .. p .. "': the file is 7 bytes")
    os.remove(p)
  end)

  it("and ember.save too, whatever it saves (it said ember.safetensors_save)", function()
    local dir = "/nonexistent/dir/x.safetensors"
    for _, obj in ipairs { ember.ones(2), { a = ember.ones(2) }, { a = ember.ones(2), epoch = 3 }, ember.nn.Linear(2, 2) } do
      raises_here(function() ember.save(obj, dir) end, "ember.save: '" .. dir .. "': cannot create")
    end
  end)
end)

describe("cummax, cummin, unfold and rot90 (they were missing)", function()
  it("cummax and cummin: values and 1-based indices, ties giving the latest, as torch", function()
    local v, i = ember.tensor { 1, 3, 3, 2, 5, 5, 0 }:cummax(1)
    assert.are.same({ 1, 3, 3, 3, 5, 5, 5 }, v:totable())
    assert.are.same({ 1, 2, 3, 3, 5, 6, 6 }, i:totable())
    local x = ember.tensor { { 1, 3, 3, 2 }, { 4, 1, 4, 0 } }
    v, i = x:cummax(2)
    assert.are.same({ { 1, 3, 3, 3 }, { 4, 4, 4, 4 } }, v:totable())
    assert.are.same({ { 1, 2, 3, 3 }, { 1, 1, 3, 3 } }, i:totable())
    v, i = ember.cummin(x, 1)
    assert.are.same({ { 1, 3, 3, 2 }, { 1, 1, 3, 0 } }, v:totable())
    assert.are.same({ { 1, 1, 1, 1 }, { 1, 2, 1, 2 } }, i:totable())
    v, i = ember.tensor { 1, 0 / 0, 0 }:cummax(1)
    assert.are.same({ 1, 2, 2 }, i:totable())
    assert.are.same({ 1, 2, 3, 3 }, select(2, I { 5, 7, 7, 1 }:cummax(1)):totable())
    local g = ember.tensor({ 1, 3, 2 }, { dtype = "float64", requires_grad = true })
    g:cummax(1):sum():backward()
    assert.are.same({ 1, 2, 0 }, g.grad:totable())
    raises_here(function() local _ = x:cummax() end, "ember.cummax: dim is required")
  end)
  it("unfold(dim, size, step): windows as a new last dim, as torch.Tensor.unfold", function()
    local w = ember.arange(10):unfold(1, 3, 2)
    assert.are.same({ { 0, 1, 2 }, { 2, 3, 4 }, { 4, 5, 6 }, { 6, 7, 8 } }, w:totable())
    local x = ember.arange(24):view(2, 3, 4)
    assert.are.same({ 2, 3, 3, 2 }, x:unfold(3, 2, 1).shape)
    assert.are.same({ 2, 1, 4, 2 }, x:unfold(2, 2, 2).shape)
    assert.are.same(x[{ 1, { 1, 2 }, 1 }]:totable(), x:unfold(2, 2, 2)[1][1][1]:totable())
    raises_here(function() local _ = x:unfold(3, 5, 1) end, "ember.unfold: size must be an integer in 0..4")
  end)
  it("rot90, as torch.rot90", function()
    local x = ember.arange(6):view(2, 3)
    assert.are.same({ { 2, 5 }, { 1, 4 }, { 0, 3 } }, x:rot90():totable())
    assert.are.same({ { 5, 4, 3 }, { 2, 1, 0 } }, x:rot90(2):totable())
    assert.are.same({ { 3, 0 }, { 4, 1 }, { 5, 2 } }, x:rot90(3):totable())
    assert.are.same({ { 3, 0 }, { 4, 1 }, { 5, 2 } }, x:rot90(-1):totable())
    assert.are.same({ { 3, 0 }, { 4, 1 }, { 5, 2 } }, x:rot90(1, { 2, 1 }):totable())
  end)
end)

describe("x.sum() for x:sum(), the usual Lua slip, is named in the error", function()
  it("for C methods and Lua ones (it said bad argument #1 to '?')", function()
    local x = ember.ones(2, 3)
    raises_here(function() local _ = x.view(3, 2) end, "call tensor methods with a colon, x:view(...), not x.view(...)")
    raises_here(function() local _ = x.sum() end, "call tensor methods with a colon")
    raises_here(function() local _ = x.cumsum(1) end, "call tensor methods with a colon: x:cumsum(...)")
    raises_here(function() local _ = x.t() end, "ember.Tensor expected, got no value")
  end)
end)

describe("more of torch's everyday functions (they were missing)", function()
  it("tensordot, inner, kron", function()
    local a, b = ember.arange(6):view(2, 3), ember.arange(12):view(3, 4)
    assert.are.same({ { 20, 23, 26, 29 }, { 56, 68, 80, 92 } }, ember.tensordot(a, b, 1):totable())
    assert.are.same({ 440, 1232 }, ember.tensordot(ember.arange(24):view(2, 3, 4), ember.arange(12):view(4, 3), { { 2, 3 }, { 2, 1 } }):totable())
    assert.are.same({ { 1, 2, 3 }, { 3, 4, 7 } }, ember.tensor { { 1, 2 }, { 3, 4 } }:inner(ember.tensor { { 1, 0 }, { 0, 1 }, { 1, 1 } }):totable())
    assert.are.same({ { 0, 1, 0, 2 }, { 1, 0, 2, 0 }, { 0, 3, 0, 4 }, { 3, 0, 4, 0 } },
      ember.kron(ember.tensor { { 1, 2 }, { 3, 4 } }, ember.tensor { { 0, 1 }, { 1, 0 } }):totable())
    assert.are.same({ { 1, 2 }, { 2, 4 } }, ember.tensor { 1, 2 }:kron(ember.tensor { { 1 }, { 2 } }):totable())
    raises_here(function() local _ = ember.tensordot(a, a, 1) end, "ember.tensordot: contracted sizes differ")
  end)
  it("cdist (a zero distance with a zero gradient)", function()
    local x1 = ember.tensor({ { 0, 0 }, { 3, 4 } }, { dtype = "float64", requires_grad = true })
    local x2 = ember.tensor({ { 0, 0 }, { 1, 1 }, { 6, 8 } }, "float64")
    close(ember.cdist(x1, x2), { { 0, math.sqrt(2), 10 }, { 5, math.sqrt(13), 5 } }, 1e-12)
    close(ember.cdist(x1, x2, 1), { { 0, 2, 14 }, { 7, 5, 7 } }, 1e-12)
    ember.cdist(x1, x2):sum():backward()
    assert.is_false(x1.grad:isnan():any():item())
  end)
  it("tril_indices and triu_indices, 1-based", function()
    assert.are.same({ { 1, 2, 2, 3, 3, 3 }, { 1, 1, 2, 1, 2, 3 } }, ember.tril_indices(3, 3):totable())
    assert.are.same({ { 1, 1, 1, 2, 2, 3 }, { 2, 3, 4, 3, 4, 4 } }, ember.triu_indices(3, 4, 1):totable())
    assert.are.same({ { 2 }, { 1 } }, ember.tril_indices(2, 3, -1):totable())
    local m = ember.arange(9):view(3, 3)
    local ij = ember.tril_indices(3, 3)
    assert.are.same({ 0, 3, 4, 6, 7, 8 }, m[{ ij[1], ij[2] }]:totable())
  end)
  it("broadcast_shapes, broadcast_tensors, diag_embed, ravel, var_mean, std_mean, aminmax", function()
    assert.are.same({ 2, 3, 4 }, ember.broadcast_shapes({ 3, 1 }, { 2, 1, 4 }))
    raises_here(function() local _ = ember.broadcast_shapes({ 3 }, { 4 }) end, "ember.broadcast_shapes: shape 2 [4] does not broadcast")
    local p, q = table.unpack(ember.broadcast_tensors(ember.ones(3, 1), ember.zeros(4)))
    assert.are.same({ { 3, 4 }, { 3, 4 } }, { p.shape, q.shape })
    assert.are.same({ { { 1, 0 }, { 0, 2 } }, { { 3, 0 }, { 0, 4 } } }, ember.tensor { { 1, 2 }, { 3, 4 } }:diag_embed():totable())
    assert.are.same({ { 0, 1, 0 }, { 0, 0, 2 }, { 0, 0, 0 } }, ember.tensor { 1, 2 }:diag_embed(1):totable())
    assert.are.same({ { 0, 0, 0 }, { 1, 0, 0 }, { 0, 2, 0 } }, ember.tensor { 1, 2 }:diag_embed(-1):totable())
    assert.are.same({ 1, 2, 3, 4 }, ember.tensor { { 1, 2 }, { 3, 4 } }:t():contiguous():t():ravel():totable())
    local x = ember.tensor { { 1, 5, 3 }, { 4, 2, 6 } }
    local v, m = x:var_mean(2)
    assert.are.same({ { 4, 4 }, { 3, 4 } }, { v:totable(), m:totable() })
    local s, mm = ember.std_mean(x, false)
    close(s, math.sqrt(35 / 12))
    close(mm, 3.5)
    v, m = x:var_mean(2, false, true)
    assert.are.same({ { 2, 1 }, { 2, 1 } }, { v.shape, m.shape })
    local lo, hi = x:aminmax({ dim = 1 })
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, { lo:totable(), hi:totable() })
  end)
end)

describe("integer powers with an integer tensor exponent, as torch (negative ones were an error)", function()
  it("int64, the power truncated", function()
    local b = I { 0, 1, -1, 2, -2, 3 }
    assert.are.same({ 0, 1, -1, 0, 0, 0 }, b:pow(I(-1)):totable())
    assert.are.same({ 0, 1, 1, 0, 0, 0 }, ember.pow(b, I { -2 }):totable())
    local p = 2 ^ I { -1, 0, 3 }
    assert.are.equal("int64", p.dtype)
    assert.are.same({ 0, 1, 8 }, p:totable())
    assert.are.same({ -1, 1 }, ember.pow(-1, I { -1, -2 }):totable())
    assert.are.same({ 1, 1, -1, 4, 4, 27 }, b:pow(b:abs()):totable())
    assert.are.equal("float32", (2.5 ^ I { 2 }).dtype)
  end)
end)

describe("index_put and index_put_, as torch's (they were missing)", function()
  it("sets or accumulates at index tensors", function()
    local x = ember.zeros(2, 3)
    local y = x:index_put({ I { 1, 2 }, I { 3, 1 } }, ember.tensor { 5, 6 })
    assert.are.same({ { 0, 0, 5 }, { 6, 0, 0 } }, y:totable())
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, x:totable())
    x:index_put_({ I { 2 } }, 1)
    assert.are.same({ { 0, 0, 0 }, { 1, 1, 1 } }, x:totable())
    x:index_put_({ I { 1, 1, 2 }, I { 2, 2, 3 } }, ember.tensor { 1, 2, 3 }, true)
    assert.are.same({ { 0, 3, 0 }, { 1, 1, 4 } }, x:totable())
    local a = ember.zeros(3)
    a:index_put_({ I { 1, 1, 3 } }, ember.tensor { 1, 1, 1 }, true)
    assert.are.same({ 2, 0, 1 }, a:totable())
    raises_here(function() x:index_put_({ ember.tensor { 1 } }, 1) end, "ember.index_put_: indices[1] must be an int64 tensor")
  end)
end)

describe("clear errors for a forgotten or wrong argument", function()
  it("ember.eye() (it was 'attempt to perform arithmetic on a nil value')", function()
    raises_here(function() local _ = ember.eye() end, "ember.eye: sizes must be integers >= 0, got nothing")
    raises_here(function() local _ = ember.eye(2.5) end, "ember.eye: sizes must be integers >= 0, got 2.5")
    assert.are.same({ 2, 3 }, ember.eye(2, 3).shape)
  end)
  it("requires_grad_ takes a boolean (\"yes\" was taken for true)", function()
    raises_here(function() ember.ones(2):requires_grad_("yes") end, "ember.requires_grad_: expected a boolean, got string")
    assert.is_false(ember.ones(2):requires_grad_(false).requires_grad)
  end)
end)

describe("gather and scatter take an index smaller than x in the other dims, as PyTorch's", function()
  it("gather reads x's leading part (it was 'index must have the shape of input')", function()
    local x = ember.arange(12):view(3, 4)
    assert.are.same({ { 3 }, { 4 } }, x:gather(2, I { { 4 }, { 1 } }):totable())
    assert.are.same({ { 8, 5 } }, ember.gather(x, 1, I { { 3, 2 } }):totable())
    assert.are.same({ { 0, 1, 2, 3, 0 } }, x:gather(2, I { { 1, 2, 3, 4, 1 } }):totable())
    local g = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "float64", requires_grad = true })
    g:gather(2, I { { 2 } }):sum():backward()
    assert.are.same({ { 0, 1 }, { 0, 0 } }, g.grad:totable())
  end)
  it("scatter writes x's leading part, src cut to the index", function()
    local y = ember.zeros(3, 4):scatter(2, I { { 2 }, { 3 } }, ember.arange(1, 13):view(3, 4))
    assert.are.same({ { 0, 1, 0, 0 }, { 0, 0, 5, 0 }, { 0, 0, 0, 0 } }, y:totable())
    assert.are.same({ { 0, 0, 0, 0 }, { 0, 5, 0, 0 }, { 5, 0, 0, 0 } }, ember.zeros(3, 4):scatter(1, I { { 3, 2 } }, 5):totable())
    local x = ember.ones(2, 3, 2)
    local z = x:scatter(3, I { { { 2 } } }, 7)
    assert.are.same({ { { 1, 7 }, { 1, 1 }, { 1, 1 } }, { { 1, 1 }, { 1, 1 }, { 1, 1 } } }, z:totable())
    local s = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "float64", requires_grad = true })
    local w = ember.zeros(2, 2, "float64"):scatter(2, I { { 2 } }, s)
    assert.are.same({ { 0, 1 }, { 0, 0 } }, w:totable())
    w:sum():backward()
    assert.are.same({ { 1, 0 }, { 0, 0 } }, s.grad:totable())
  end)
end)

describe("scatter_add takes a smaller index and a larger src too, as PyTorch's", function()
  it("adding into x's leading part", function()
    local y = ember.ones(3, 4):scatter_add(2, I { { 2, 2 }, { 3, 1 } }, ember.arange(1, 13):view(3, 4))
    assert.are.same({ { 1, 4, 1, 1 }, { 7, 1, 6, 1 }, { 1, 1, 1, 1 } }, y:totable())
    raises_here(function() local _ = ember.ones(3, 4):scatter_add(2, I { { 9 } }, ember.ones(1, 1)) end,
      "ember.scatter_add: index 9 at {1, 1} is out of range 1..4")
  end)
end)

describe("logsumexp over a table of dims, as torch's tuple (it was 'dim must be an integer')", function()
  it("values and shapes", function()
    local x = ember.tensor({ { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 1000 } } }, "float64")
    local want = { math.log(math.exp(1) + math.exp(2) + math.exp(3) + math.exp(4)), 1000 }
    close(x:logsumexp({ 2, 3 }), want, 1e-12)
    assert.are.same({ 2, 1, 1 }, x:logsumexp({ -1, -2 }, true).shape)
    close(x:logsumexp({ 1, 2, 3 }), 1000, 1e-12)
    close(x:logsumexp(3), { { math.log(math.exp(1) + math.exp(2)), math.log(math.exp(3) + math.exp(4)) },
      { math.log(math.exp(5) + math.exp(6)), 1000 } }, 1e-12)
  end)
end)

describe("float64 gradchecks of the functions added or changed here", function()
  local gradcheck = require "tests.lua.helpers.gradcheck"
  local function leaf(shape, seed)
    ember.manual_seed(seed or 1)
    return ember.randn(shape, "float64"):requires_grad_()
  end
  local cases = {
    { "add alpha", { { 2, 3 }, { 3 } }, function(a, b) return a:add(b, { alpha = -2.5 }) end },
    { "sub alpha", { { 2, 3 }, { 2, 3 } }, function(a, b) return ember.sub(a, b, 3) end },
    { "var biased", { { 3, 4 } }, function(a) return a:var(2, false, true) end },
    { "std unbiased dims", { { 3, 4, 2 } }, function(a) return a:std({ 1, 3 }) end },
    { "amax dims", { { 3, 4, 2 } }, function(a) return a:amax({ 1, 3 }) end },
    { "amin dim keepdim", { { 3, 4 } }, function(a) return a:amin(2, true) end },
    { "norm p=3 dim", { { 3, 4 } }, function(a) return a:norm(3, 2) end },
    { "norm p=2 all", { { 3, 4 } }, function(a) return a:norm() end },
    { "median all", { { 3, 5 } }, function(a) return a:median() end },
    { "cummax", { { 3, 6 } }, function(a) return (a:cummax(2)) end },
    { "cummin", { { 5, 2 } }, function(a) return (a:cummin(1)) end },
    { "diagonal offset", { { 2, 3, 4 } }, function(a) return a:diagonal(1, 2, 3) end },
    { "take", { { 3, 4 } }, function(a) return a:take(I { { 1, 12 }, { 5, 5 } }) end },
    { "take_along_dim", { { 3, 4 } }, function(a) return a:take_along_dim(I { { 2 }, { 4 }, { 1 } }, 2) end },
    { "logaddexp", { { 3, 4 }, { 4 } }, function(a, b) return a:logaddexp(b) end },
    { "hypot", { { 3, 4 }, { 3, 4 } }, function(a, b) return a:hypot(b) end },
    { "frac", { { 3, 4 } }, function(a) return (a * 3):frac() end },
    { "kron", { { 2, 3 }, { 3, 2 } }, function(a, b) return ember.kron(a, b) end },
    { "tensordot", { { 2, 3, 4 }, { 4, 3, 5 } }, function(a, b) return ember.tensordot(a, b, { { 2, 3 }, { 2, 1 } }) end },
    { "inner", { { 2, 3 }, { 4, 3 } }, function(a, b) return a:inner(b) end },
    { "cdist", { { 3, 2 }, { 4, 2 } }, function(a, b) return ember.cdist(a, b) end },
    { "unfold", { { 2, 7 } }, function(a) return a:unfold(2, 3, 2) end },
    { "rot90", { { 2, 3 } }, function(a) return a:rot90(3) end },
    { "diag_embed", { { 2, 3 } }, function(a) return a:diag_embed(-1) end },
    { "index_copy", { { 4, 3 }, { 2, 3 } }, function(a, b) return a:index_copy(1, I { 4, 2 }, b) end },
    { "index_put accumulate", { { 3, 3 }, { 2 } }, function(a, b) return a:index_put({ I { 1, 3 }, I { 2, 2 } }, b, true) end },
    { "pointwise index", { { 3, 4 } }, function(a) return a[{ I { 3, 1, 3 }, I { 2, 4, 1 } }] end },
    { "column index", { { 3, 4 } }, function(a) return a[{ {}, I { 4, 1 } }] end },
    { "gather smaller index", { { 3, 4 } }, function(a) return a:gather(2, I { { 4, 1 }, { 2, 2 } }) end },
    { "scatter smaller index", { { 3, 4 }, { 2, 2 } }, function(a, b) return a:scatter(2, I { { 4, 1 }, { 2, 3 } }, b) end },
    { "logsumexp dims", { { 2, 3, 4 } }, function(a) return a:logsumexp({ 1, 3 }) end },
    { "nansum", { { 3, 4 } }, function(a) return a:nansum(2) end },
    { "var_mean", { { 3, 4 } }, function(a) local v, m = a:var_mean(2); return { v, m } end },
  }
  for i, c in ipairs(cases) do
    it(c[1], function()
      local inputs = {}
      for j, shape in ipairs(c[2]) do inputs[j] = leaf(shape, 10 * i + j) end
      gradcheck.check(c[3], inputs, { name = c[1] })
    end)
  end
end)

describe("ember.grad as torch.autograd.grad: non-leaf inputs, grad_outputs third", function()
  it("the gradient with respect to an intermediate tensor (it was 'must be a leaf')", function()
    local x = ember.tensor({ 1, 2, 3 }, { dtype = "float64", requires_grad = true })
    local h = x * 2
    local z = (h * h):sum()
    local g = ember.grad(z, { h, x })
    assert.are.same({ 4, 8, 12 }, g[1]:totable())
    assert.are.same({ 8, 16, 24 }, g[2]:totable())
    assert.is_nil(h.grad)
    assert.is_nil(x.grad)
    local w = x * 3
    assert.are.same({ 3, 6, 9 }, ember.grad(w, x, ember.tensor({ 1, 2, 3 }, "float64"))[1]:totable())
    raises_here(function() local _ = ember.grad((x * 2):sum(), ember.ones(3)) end, "ember.grad: input 1 does not require grad")
  end)
end)

describe("add_ takes {alpha =} as add does (it was 'bad argument #2 to add_')", function()
  it("in place", function()
    local x = ember.ones(2)
    x:add_(ember.tensor { 1, 2 }, { alpha = 2 })
    assert.are.same({ 3, 5 }, x:totable())
    x:add_(1, { alpha = -3 })
    assert.are.same({ 0, 2 }, x:totable())
    raises_here(function() x:add_(1, { beta = 2 }) end, "ember.add_: unknown option 'beta'")
    raises_here(function() x:add_(1, "2") end, "ember.add_: alpha must be a number, got string")
  end)
end)

describe("masked_fill and index_fill take a 0-d tensor value, as torch's (it was 'expected a tensor or a number')", function()
  it("differentiable in the value", function()
    local x = ember.ones(3)
    assert.are.same({ 5, 5, 5 }, x:masked_fill(x:gt(0), ember.tensor(5)):totable())
    local v = ember.tensor(2.0, { dtype = "float64", requires_grad = true })
    local w = ember.tensor({ 1, 2, 3 }, { dtype = "float64", requires_grad = true })
    local y = w:masked_fill(ember.tensor { true, false, true }, v)
    assert.are.same({ 2, 2, 2 }, y:totable())
    y:sum():backward()
    assert.are.equal(2, v.grad:item())
    assert.are.same({ 0, 1, 0 }, w.grad:totable())
    assert.are.same({ 3, 0 }, ember.zeros(2):index_fill(1, I { 1 }, ember.tensor(3)):totable())
    raises_here(function() local _ = x:masked_fill(x:gt(0), ember.ones(2)) end,
      "ember.masked_fill: the value must be a number or a one-element tensor, got 2 elements")
  end)
end)

describe("softmax and log_softmax take torch's dtype= (it was silently ignored)", function()
  it("converting the input first", function()
    local x = ember.tensor { { 1, 2 }, { 3, 4 } }
    assert.are.equal("float64", x:softmax(2, { dtype = "float64" }).dtype)
    assert.are.equal("float64", ember.log_softmax(x, -1, "float64").dtype)
    assert.are.equal("float32", x:long():softmax(1, { dtype = "float32" }).dtype)
    raises_here(function() local _ = x:softmax(2, { dim = 1 }) end, "ember.softmax: dim given twice") -- {dim =} alone is the keyword
    raises_here(function() local _ = x:softmax(3) end, "ember.softmax: dim 3 is out of range")
  end)
end)
