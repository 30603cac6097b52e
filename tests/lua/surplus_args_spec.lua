-- Surplus positional arguments to the C-written methods are errors naming
-- the method, at the caller's line, as PyTorch's TypeError ("exp() takes
-- no arguments (1 given)"); they were silently dropped, so x:t(1) or
-- x:sum(1, true, 5) ran as if the argument were not there. Trailing nils
-- do not count (Lua code forwards optional arguments as nil).
local ember = require "ember"
local raises_here = require("tests.lua.helpers.parity").raises_here

describe("surplus arguments to C methods", function()
  local x = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })

  it("methods without arguments", function()
    for _, m in ipairs { "numel", "is_contiguous", "t", "detach", "float", "double", "long", "bool", "bfloat16", "dim", "exp", "neg", "abs", "floor" } do
      raises_here(function() local _ = x[m](x, 1) end,
        ("ember.%s: takes no arguments besides the tensor, got 1 more (argument 2 is a number)"):format(m))
    end
    raises_here(function() local _ = x:t(1, 2) end, "ember.t: takes no arguments besides the tensor, got 2 more")
    raises_here(function() local _ = ember.exp(x, "a") end, "ember.exp: takes no arguments besides the tensor, got 1 more (argument 2 is a string)")
  end)

  it("binary ops take one operand (their options: add, sub, div)", function()
    for _, m in ipairs { "mul", "maximum", "minimum", "eq", "lt", "ge", "pow" } do
      raises_here(function() local _ = x[m](x, x, 2) end,
        ("ember.%s: takes at most 1 argument besides the tensor (other), got 2 (argument 3 is a number)"):format(m))
    end
    raises_here(function() local _ = x:add(x, nil, 3) end,
      "ember.add: takes at most 2 arguments besides the tensor (other, alpha), got 3 (argument 4 is a number)")
    raises_here(function() local _ = ember.ones(1):item(1) end, "ember.item: takes no arguments besides the tensor, got 1 more")
    assert.equals(ember.tensor({ 4, 8 }), ember.tensor({ 1, 2 }):add(ember.tensor({ 1, 2 }), 3)) -- add's alpha
    assert.equals(ember.tensor({ 2, 4 }), ember.tensor({ 1, 2 }) * 2) -- the metamethods
  end)

  it("sum and mean take dim and keepdim, then options, no more", function()
    raises_here(function() local _ = x:sum(1, true, 5) end,
      "ember.sum: takes at most 2 arguments besides the tensor (dim, keepdim), got 3 (argument 4 is a number)")
    raises_here(function() local _ = x:mean(2, false, true) end,
      "ember.mean: takes at most 2 arguments besides the tensor (dim, keepdim), got 3 (argument 4 is a boolean)")
  end)

  it("views and copies: transpose, narrow, select, unsqueeze, contiguous, clone", function()
    raises_here(function() local _ = x:transpose(1, 2, 3) end,
      "ember.transpose: takes at most 2 arguments besides the tensor (dim0, dim1), got 3 (argument 4 is a number)")
    raises_here(function() local _ = x:narrow(2, 1, 2, 1) end,
      "ember.narrow: takes at most 3 arguments besides the tensor (dim, start, length), got 4")
    raises_here(function() local _ = x:select(1, 2, 2) end, "ember.select: takes at most 2 arguments besides the tensor (dim, index), got 3")
    raises_here(function() local _ = x:unsqueeze(1, 2) end, "ember.unsqueeze: takes at most 1 argument besides the tensor (dim), got 2")
    raises_here(function() local _ = x:contiguous(1) end, "ember.contiguous: takes no arguments besides the tensor, got 1 more")
    raises_here(function() local _ = x:clone(true) end, "ember.clone: takes no arguments besides the tensor, got 1 more (argument 2 is a boolean)")
    assert.equals(ember.Size { 3, 2 }, x:transpose(1, 2).shape)
    assert.equals(ember.Size { 2, 2 }, x:narrow(2, 2, 2, nil).shape)
  end)

  it("softmax and log_softmax take a dim and their options, no more (F.softmax is ember.softmax)", function()
    local F = require "ember.nn.functional"
    raises_here(function() local _ = F.softmax(x, -1, nil, 5) end,
      "ember.softmax: takes at most 2 arguments besides the tensor (dim, options), got 3 (argument 4 is a number)")
    raises_here(function() local _ = x:log_softmax(2, { dtype = "float64" }, true) end,
      "ember.log_softmax: takes at most 2 arguments besides the tensor (dim, options), got 3 (argument 4 is a boolean)")
    assert.equals("float64", x:log_softmax(2, { dtype = "float64" }, nil).dtype)
  end)

  it("what they do take still works, trailing nils too", function()
    assert.equals(ember.Size { 3, 2 }, x:t(nil).shape)
    assert.equals(21, x:sum(nil, nil, nil):item())
    assert.equals(ember.Size { 2, 1 }, x:sum(2, true).shape)
    assert.equals("float64", x:sum(1, false, { dtype = "float64" }).dtype) -- torch's dtype= keyword
    assert.equals(2, x:dim())
    assert.equals(x:exp(), x:exp(nil))
  end)
end)
