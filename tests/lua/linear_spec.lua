-- ember.linear (core/src/ops_matmul.c's em_linear): x @ w^T + b as
-- torch.nn.functional.linear, with the bias as the product's C, and
-- nn.Linear on it. Values against the composed matmul + add (PyTorch's own
-- Linear values are in the nn fixtures, which nn_spec checks), float64
-- gradients by finite differences, bfloat16 rounded once, bad input named.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local compare = require "tests.lua.helpers.parity"

local F64 = { dtype = "float64" }

local function composed(x, w, b)
  local y = x:matmul(w:transpose(1, 2))
  return b and y + b or y
end

describe("ember.linear", function()
  it("float64: matmul + bias, and float64 gradients of x, w and b (strided too)", function()
    ember.manual_seed(1)
    local x, w, b = ember.randn(2, 3, 5, F64), ember.randn(4, 5, F64), ember.randn(4, F64)
    assert.is_true(compare.max_rel(ember.linear(x, w, b), composed(x, w, b)) < 1e-15)
    assert.is_true(compare.max_rel(ember.linear(x, w), composed(x, w)) < 1e-15)
    gradcheck.check(function(a, c, d) return ember.linear(a, c, d) end, { x, w, b })
    -- a transposed input and a weight stored [in, out] and read through a transpose
    local xt = ember.randn(5, 3, F64):transpose(1, 2):detach()
    local wt = ember.randn(5, 4, F64):transpose(1, 2):detach()
    assert.is_true(compare.max_rel(ember.linear(xt, wt, b), composed(xt, wt, b)) < 1e-15)
    gradcheck.check(function(a, c) return ember.linear(a, c) end, { xt, wt })
  end)

  it("float32: the composed form's bits", function()
    ember.manual_seed(2)
    local x, w, b = ember.randn(7, 33), ember.randn(9, 33), ember.randn(9)
    assert.is_true(ember.equal(ember.linear(x, w, b), composed(x, w, b)))
    local big, wb, bb = ember.randn(4, 64, 128), ember.randn(256, 128), ember.randn(256) -- oneDNN's size
    assert.is_true(compare.max_rel(ember.linear(big, wb, bb), composed(big, wb, bb)) < 1e-6)
  end)

  it("under autocast: bfloat16, rounded once, gradients reach the float32 leaves", function()
    ember.manual_seed(3)
    local x = ember.randn(64, 96):requires_grad_()
    local lin = nn.Linear(96, 80)
    local y = ember.autocast("bfloat16", function() return lin(x) end)
    assert.are.equal("bfloat16", y.dtype)
    -- the reference: the bfloat16 operands multiplied in float64
    local xb, wb, bb = x:detach():to("bfloat16"):double(), lin.weight:detach():to("bfloat16"):double(),
      lin.bias:detach():to("bfloat16"):double()
    local ref = composed(xb, wb, bb)
    local err = ((y:double() - ref):abs() / (ref:abs() + 1e-3)):max():item()
    assert.is_true(err <= 2 ^ -8, "bf16 linear off by " .. err) -- half an ulp of rounding once, plus float32 sums
    y:float():sum():backward()
    assert.are.equal("float32", lin.weight.grad.dtype)
    assert.are.equal("float32", lin.bias.grad.dtype)
    assert.is_true(compare.max_rel(lin.bias.grad, ember.full({ 80 }, 64)) < 1e-6)
  end)

  it("nn.Linear runs one product: no add of its own", function()
    local lin = nn.Linear(16, 8)
    local x = ember.randn(4, 16)
    local prof = ember.profile(function() return lin(x) end)
    local names = {}
    for _, r in ipairs(prof:stats()) do names[r.name] = (names[r.name] or 0) + r.calls end
    assert.are.equal(1, names.gemm)
    assert.is_nil(names.add)
  end)

  it("edge sizes: no rows, and no inputs (the bias alone)", function()
    local b = ember.tensor { 1, 2, 3 }
    assert.are.same({ 0, 3 }, ember.linear(ember.zeros(0, 4), ember.ones(3, 4), b):size())
    assert.are.same({ { 1, 2, 3 }, { 1, 2, 3 } }, ember.linear(ember.zeros(2, 0), ember.zeros(3, 0), b):totable())
    assert.are.same({ { 0, 0, 0 } }, ember.linear(ember.zeros(1, 0), ember.zeros(3, 0)):totable())
    -- and their gradients: the bias's alone is not empty
    local x0, w0, b0 = ember.zeros(2, 0):requires_grad_(), ember.zeros(3, 0):requires_grad_(), ember.ones(3):requires_grad_()
    ember.linear(x0, w0, b0):sum():backward()
    assert.are.same({ 2, 2, 2 }, b0.grad:totable())
    assert.are.equal(ember.Size { 3, 0 }, w0.grad:size())
    -- a 1-d input is one row, as torch.nn.functional.linear
    local x1, w1 = ember.randn(5, F64):requires_grad_(), ember.randn(3, 5, F64)
    assert.are.equal(ember.Size { 3 }, ember.linear(x1, w1):size())
    gradcheck.check(function(a, c) return ember.linear(a, c) end, { x1, w1 })
  end)

  it("refuses bad input, naming linear, at the caller's line", function()
    local raises_here = compare.raises_here
    raises_here(function() ember.linear(ember.ones(2, 3), ember.ones(3)) end, "linear: weight must be 2-d")
    raises_here(function() ember.linear(ember.ones(2, 3), ember.ones(4, 2)) end,
      "linear: input [2, 3] does not end in in_features = 2")
    raises_here(function() ember.linear(ember.ones(2, 3), ember.ones(4, 3), ember.ones(3)) end,
      "linear: bias must be [out_features = 4], got [3]")
    raises_here(function() ember.linear(ember.ones(2, 3), ember.ones(4, 3, F64)) end, "linear: dtype mismatch")
  end)
end)
