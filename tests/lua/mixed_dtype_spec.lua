-- float32 with bfloat16 in add and sub: float32, as torch's type promotion
-- gives, computed in one kernel (the bfloat16 operand widened as read)
-- where the backend takes mixed operands: the bits and gradients of a cast
-- to float32 followed by the float32 op, without the cast's pass.
local ember = require "ember"

local function bits_equal(a, b)
  return a.dtype == b.dtype and (a:ne(b)):sum():item() == 0
end

local function spans(fn)
  local prof = ember.profile(fn)
  local names = {}
  for _, e in ipairs(prof.events) do names[#names + 1] = e.name end
  return table.concat(names, " ")
end

describe("float32 with bfloat16", function()
  ember.manual_seed(11)
  local x = ember.randn(37, 129)
  local h = ember.randn(37, 129):bfloat16()

  for _, c in ipairs({
    { "x + h", function(a, b) return a + b end, false },
    { "h + x", function(a, b) return b + a end, false },
    { "x - h", function(a, b) return a - b end, false },
    { "h - x", function(a, b) return b - a end, false },
  }) do
    it(c[1] .. ": float32, the bits of the cast path, in one kernel", function()
      local y = c[2](x, h)
      assert.are.equal("float32", y.dtype)
      assert.is_true(bits_equal(y, c[2](x, h:float())))
      local s = spans(function() c[2](x, h) end)
      assert.is_nil(s:find("cast", 1, true), s)
    end)

    it(c[1] .. ": each gradient in its input's dtype, as through the cast", function()
      local xa, ha = x:clone():requires_grad_(), h:clone():requires_grad_()
      local xb, hb = x:clone():requires_grad_(), h:clone():requires_grad_()
      local g = ember.randn(37, 129)
      c[2](xa, ha):backward(g)
      c[2](xb, hb:float()):backward(g)
      assert.are.equal("bfloat16", ha.grad.dtype)
      assert.are.equal("float32", xa.grad.dtype)
      assert.is_true(bits_equal(ha.grad, hb.grad))
      assert.is_true(bits_equal(xa.grad, xb.grad))
    end)
  end

  it("strided and broadcast operands still go through the cast, with the same result", function()
    local ht = ember.randn(129, 37):bfloat16():t()
    assert.is_true(bits_equal(x + ht, x + ht:float()))
    local row = ember.randn(129):bfloat16()
    assert.is_true(bits_equal(x - row, x - row:float()))
  end)

  it("under autocast: a block's bfloat16 output added to a float32 residual", function()
    local w = ember.randn(129, 129):requires_grad_()
    local r = x:clone():requires_grad_()
    local y
    ember.autocast("bfloat16", function() y = r + ember.matmul(r, w) end)
    assert.are.equal("float32", y.dtype)
    y:sum():backward()
    assert.are.equal("float32", r.grad.dtype)
    assert.are.equal("float32", w.grad.dtype)
  end)
end)
