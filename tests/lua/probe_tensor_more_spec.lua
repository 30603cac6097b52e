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

describe("surplus and wrong-typed arguments are errors naming the op (they were dropped)", function()
  local x = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  it("view, reshape, expand and permute: the shape or dims, then nothing", function()
    raises_here(function() local _ = x:view(3, 2, "x") end,
      "ember.view: expected the shape as numbers or one table, got a string after it (argument 4)")
    raises_here(function() local _ = x:view({ 3, 2 }, 5) end,
      "ember.view: expected the shape as numbers or one table, got a number after it (argument 3)")
    raises_here(function() local _ = x:reshape(6, {}) end,
      "ember.reshape: expected the shape as numbers or one table, got a table after it (argument 3)")
    raises_here(function() local _ = ember.reshape(x, { 6 }, 1) end, "ember.reshape: expected the shape as numbers")
    raises_here(function() local _ = x:expand({ 2, 3 }, 1) end, "ember.expand: expected the shape as numbers")
    raises_here(function() local _ = x:permute(2, 1, "x") end,
      "ember.permute: expected the dims as numbers or one table, got a string after it (argument 4)")
    assert.are.equal(ember.Size { 3, 2 }, x:view(3, 2, nil).shape) -- trailing nils do not count
    assert.are.equal(ember.Size { 6 }, x:reshape({ 6 }).shape)
  end)
  it("var and std: dim, unbiased, keepdim (or options), then nothing", function()
    raises_here(function() local _ = x:var(1, true, false, {}) end,
      "ember.var: takes at most 3 arguments besides the tensor (dim, unbiased, keepdim), got 4 (argument 5 is a table)")
    raises_here(function() local _ = x:var(1, true, 7, "x") end, "ember.var: keepdim must be a boolean, got number")
    raises_here(function() local _ = x:var(1, { unbiased = false }, 3) end,
      "ember.var: takes at most 2 arguments besides the tensor (dim, options), got 3")
    raises_here(function() local _ = x:var({ unbiased = false }, 3) end,
      "ember.var: takes at most 1 argument besides the tensor (options), got 2")
    raises_here(function() local _ = x:std(1, true, false, 5) end, "ember.var: takes at most 3 arguments")
    -- var(dim, nil, keepdim): unbiased left at its default, keepdim still read
    assert.are.equal(ember.Size { 1, 3 }, x:var(1, nil, true).shape)
    assert.are.equal(4.5, x:var(1, true, true)[1][1]:item())
  end)
  it("max, min, argmax, argmin: dim and keepdim, or another tensor, then nothing", function()
    for _, op in ipairs { "max", "min", "argmax", "argmin" } do
      raises_here(function() local _ = x[op](x, 1, true, 5) end,
        ("ember.%s: takes at most 2 arguments besides the tensor (dim, keepdim), got 3 (argument 4 is a number)"):format(op))
      if op == "max" or op == "min" then -- argmax/argmin keep every dim (below)
        raises_here(function() local _ = x[op](x, nil, true) end,
          ("ember.%s: keepdim needs a dim (got a boolean after no dim)"):format(op))
      end
      raises_here(function() local _ = x[op](x, nil, false, 3) end, ("ember.%s: "):format(op))
    end
    raises_here(function() local _ = x:max(x, 1) end,
      "ember.max: takes at most 1 argument besides the tensor (other), got 2 (argument 3 is a number)")
    raises_here(function() local _ = ember.min(x, 2, false, "y") end, "ember.min: takes at most 2 arguments")
    local v, i = x:max(2, true)
    assert.are.same({ { 3 }, { 6 } }, v:totable())
    assert.are.same({ { 3 }, { 3 } }, i:totable())
  end)
  it("to: trailing nils do not count; a number after a dtype is refused", function()
    raises_here(function() local _ = x:to("float32", 3) end, "ember.to: expected a dtype or device name")
    assert.are.equal("float64", x:to("float64", nil).dtype)
    assert.are.equal("float64", x:to("cpu", "float64", nil).dtype)
  end)
  it("gelu takes approximate (a string or {approximate=}), elu alpha (a number or {alpha=})", function()
    raises_here(function() local _ = x:gelu("tanh", 3) end,
      "ember.gelu: takes at most 1 argument besides the tensor (approximate), got 2 (argument 3 is a number)")
    raises_here(function() local _ = x:gelu(3) end, "ember.gelu: approximate must be \"none\" or \"tanh\", got number")
    raises_here(function() local _ = x:gelu({ approx = "tanh" }) end, "ember.gelu: unknown option 'approx'")
    raises_here(function() local _ = x:elu(1, 2) end,
      "ember.elu: takes at most 1 argument besides the tensor (alpha), got 2 (argument 3 is a number)")
    raises_here(function() local _ = x:elu("x") end, "ember.elu: alpha must be a number, got string")
    assert.are.equal(x:gelu("tanh"), x:gelu({ approximate = "tanh" }))
    assert.are.equal(x:elu(0.5), x:elu({ alpha = 0.5 }))
    -- F.gelu(tensor([-1.]), approximate='tanh') and F.elu(tensor([-1.]), 0.5)
    assert(math.abs(ember.tensor({ -1 }):gelu({ approximate = "tanh" })[1]:item() - (-0.15880799293518066)) < 1e-7)
    assert(math.abs(ember.tensor({ -1 }):elu({ alpha = 0.5 })[1]:item() - (-0.31606027483940125)) < 1e-7)
  end)
  it("clamp: min, max, then nothing", function()
    raises_here(function() local _ = x:clamp(1, 2, 3) end,
      "ember.clamp: takes at most 2 arguments besides the tensor (min, max), got 3 (argument 4 is a number)")
    raises_here(function() local _ = ember.clamp(x, 1, nil, "x") end, "ember.clamp: takes at most 2 arguments")
    assert.are.same({ { 2, 2, 3 }, { 3, 3, 3 } }, x:clamp(2, 3, nil):totable())
  end)
end)

describe("clamp with neither bound", function()
  it("raises as torch.clamp: At least one of 'min' or 'max' must not be None", function()
    local x = ember.tensor({ 1, 2 })
    raises_here(function() local _ = x:clamp() end, "ember.clamp: at least one of 'min' or 'max' must not be nil")
    raises_here(function() local _ = ember.clamp(x) end, "ember.clamp: at least one of 'min' or 'max' must not be nil")
    raises_here(function() local _ = x:clamp(nil, nil) end, "ember.clamp: at least one of 'min' or 'max' must not be nil")
    raises_here(function() local _ = ember.tensor({ 1 }, "int64"):clamp() end, "ember.clamp: at least one")
    assert.are.same({ 1, 1.5 }, x:clamp(nil, 1.5):totable())
  end)
end)

describe("backward refuses tensors modified in place after they were saved (PyTorch's version counter)", function()
  local MSG = "has been modified by an in-place operation since"
  -- PyTorch 1.13 raises "one of the variables needed for gradient computation has been
  -- modified by an inplace operation" in each case; ember computed the gradient from the
  -- new values ([11, 12, 13] for the first instead of [1, 2, 3])
  it("an input saved by mul, written with add_, x[i] = v or a view's fill_", function()
    local w = ember.ones(3):requires_grad_()
    local x = ember.tensor({ 1, 2, 3 })
    local y = (w * x):sum()
    x:add_(10)
    raises_here(function() y:backward() end, "ember.backward: a tensor that 'mul' saved for its gradient ([3] float32 cpu) " .. MSG)
    local y2 = (w * x):sum()
    x[1] = 100
    raises_here(function() y2:backward() end, MSG)
    local y3 = (w * x):sum()
    x:narrow(1, 2, 2):fill_(0)
    raises_here(function() y3:backward() end, MSG)
    assert.is_nil(w.grad)
  end)
  it("an output saved by exp, or a leaf, written under no_grad", function()
    local w = ember.ones(3):requires_grad_()
    local h = w:exp()
    local y = h:sum()
    ember.no_grad(function() h:mul_(0) end)
    raises_here(function() y:backward() end, "ember.backward: a tensor that 'exp' saved for its gradient")
    local y2 = (w * w):sum()
    ember.no_grad(function() w:mul_(5) end)
    raises_here(function() y2:backward() end, MSG)
  end)
  it("an optimizer step between two backwards through one graph", function()
    local w = ember.ones(2):requires_grad_()
    local loss = (w * w):sum()
    loss:backward({ retain_graph = true })
    local opt = require("ember.optim").SGD({ w }, { lr = 0.1 })
    opt:step()
    raises_here(function() loss:backward() end, MSG)
  end)
  it("what was not saved may change, and in place after backward is fine", function()
    local w = ember.ones(3):requires_grad_()
    local x = ember.tensor({ 1, 2, 3 })
    local y = (w + x):sum() -- add saves nothing
    x:add_(1)
    y:backward()
    assert.are.same({ 1, 1, 1 }, w.grad:totable())
    local y2 = (w * x):sum()
    y2:backward()
    x:add_(1) -- after: nothing left to check
    ember.no_grad(function() w:sub_(w.grad) end)
    assert.are.same({ 3, 4, 5 }, w.grad:totable())
    local y3 = (w * x):sum()
    y3:backward()
    assert.are.same({ 6, 8, 10 }, w.grad:totable())
  end)
end)

describe("in-place writes into a leaf that requires grad say so, whatever route they take", function()
  -- PyTorch 1.13: "a leaf Variable that requires grad is being used in an in-place operation."
  -- and, through a view (w[0] = 5), "a view of a leaf Variable that requires grad is being used ..."
  local w = ember.ones(3):requires_grad_()
  local LEAF = "a leaf tensor that requires grad ([3] float32 cpu) is being used in an in-place operation"
  it("zero_ names zero_ once (it said 'ember.zero_: fill_: ...')", function()
    raises_here(function() w:zero_() end, "ember.zero_: " .. LEAF)
  end)
  it("w[i] = v, w[{...}] = v, w[mask] = v and a narrow's fill_ name the leaf, not a 'select' graph", function()
    local VIEW = "a view of " .. LEAF
    raises_here(function() w[1] = 5 end, "ember.setindex: " .. VIEW)
    raises_here(function() w[{ { 1, 2 } }] = 5 end, VIEW)
    raises_here(function() w:narrow(1, 1, 2):fill_(0) end, "ember.fill_: " .. VIEW)
    raises_here(function() w:view(3, 1):copy_(ember.zeros(3, 1)) end, "ember.copy_: " .. VIEW)
    assert.are.same({ 1, 1, 1 }, w:totable())
    ember.no_grad(function() w[1] = 5 end) -- as torch.no_grad()
    assert.are.same({ 5, 1, 1 }, w:detach():totable())
  end)
  it("a view of a tensor made by an op, written through the view, keeps the graph message", function()
    local h = w * 2
    raises_here(function() h:narrow(1, 1, 2):fill_(0) end, "is part of an autograd graph")
  end)
end)

describe("x[key] = value with a value of the wrong shape names setindex and both shapes", function()
  -- PyTorch 1.13: "shape mismatch: value tensor of shape [2] cannot be broadcast to indexing
  -- result of shape [3]"; ember named expand or copy_, ops the user never called
  local x = ember.arange(1, 7):view(2, 3):float()
  local function msg(v, r)
    return ("ember.setindex: shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of shape %s"):format(v, r)
  end
  it("a bool mask, over all dims or leading ones", function()
    raises_here(function() x[x:gt(3)] = ember.tensor({ 1, 2 }) end, msg("[2]", "[3]"))
    raises_here(function() x[ember.tensor({ true, false })] = ember.tensor({ 1, 2 }) end, msg("[2]", "[1, 3]"))
  end)
  it("an int64 index tensor, pointwise index tensors, a range", function()
    raises_here(function() x[ember.tensor({ 1, 2 }, "int64")] = ember.tensor({ 1, 2 }) end, msg("[2]", "[2, 3]"))
    raises_here(function() x[{ ember.tensor({ 1, 2 }, "int64"), ember.tensor({ 3, 1 }, "int64") }] = ember.tensor({ 1, 2, 3 }) end,
      msg("[3]", "[2]"))
    raises_here(function() x[{ {}, 1 }] = ember.tensor({ 1, 2, 3 }) end, msg("[3]", "[2]"))
    raises_here(function() x[{ {}, ember.tensor({ 1 }, "int64") }] = ember.tensor({ 1, 2, 3 }) end, msg("[3]", "[2, 1]"))
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, x:totable())
  end)
  it("values that broadcast still go in", function()
    local y = x:clone()
    y[y:gt(3)] = ember.tensor({ 9 })
    y[{ {}, 1 }] = ember.tensor({ 7 })
    y[ember.tensor({ 1 }, "int64")] = ember.tensor({ 0, 1, 2 })
    assert.are.same({ { 0, 1, 2 }, { 7, 9, 9 } }, y:totable())
  end)
end)

describe("max and min of an empty tensor", function()
  it("name the op once (it said 'ember.max: max_all: ...')", function()
    raises_here(function() local _ = ember.zeros(0):max() end, "ember.max: the tensor is empty (float32 [0]); there is no maximum")
    raises_here(function() local _ = ember.zeros(2, 0):min() end, "ember.min: the tensor is empty")
  end)
end)

describe("backward's arguments", function()
  -- PyTorch 1.13: "gradients can be either Tensors or None, but got int"
  local x = ember.ones(2):requires_grad_()
  it("a gradient that is not a tensor, a retain_graph that is not a boolean, or more, name backward", function()
    raises_here(function() (x * 2):sum():backward(1) end,
      "ember.backward: gradient must be a tensor (or nil), got number")
    raises_here(function() (x * 2):backward(ember.ones(2), "yes") end,
      "ember.backward: retain_graph must be a boolean, got string")
    raises_here(function() (x * 2):backward(ember.ones(2), true, 3) end,
      "ember.backward: create_graph must be a boolean, got number") -- torch's positional create_graph
    raises_here(function() (x * 2):backward(ember.ones(2), true, false, nil, 5) end,
      "ember.backward: takes at most 4 arguments besides the tensor (gradient, retain_graph, create_graph, inputs), got 5")
    local y = (x * 3):sum()
    y:backward(nil, true)
    y:backward(nil, nil)
    assert.are.same({ 6, 6 }, x.grad:totable())
  end)
end)

describe("PyTorch's alias names and in-place twins a user types", function()
  local x = ember.tensor({ -2.5, 0.5, 4 })
  it("multiply, divide, subtract, negative, absolute, fix (torch.multiply ...)", function()
    -- torch: [-5, 1, 8], [-1.25, 0.25, 2], [-3.5, -0.5, 3], [2.5, -0.5, -4], [2.5, 0.5, 4], [-2, 0, 4]
    assert.are.same({ -5, 1, 8 }, x:multiply(2):totable())
    assert.are.same({ -1.25, 0.25, 2 }, ember.divide(x, 2):totable())
    assert.are.same({ -1, 0, 2 }, x:divide(2, { rounding_mode = "trunc" }):totable())
    assert.are.same({ -3.5, -0.5, 3 }, x:subtract(1):totable())
    assert.are.same({ 2.5, -0.5, -4 }, x:negative():totable())
    assert.are.same({ 2.5, 0.5, 4 }, ember.absolute(x):totable())
    assert.are.same({ -2, 0, 4 }, x:fix():totable())
  end)
  it("reciprocal_, square_ and frac_ write in place", function()
    -- torch: [-0.4, 2, 0.25], [6.25, 0.25, 16], [-0.5, 0.5, 0]
    local a, b, c = x:clone(), x:clone(), x:clone()
    assert.are.equal(a, a:reciprocal_())
    assert.are.same({ -0.4000000059604645, 2, 0.25 }, a:totable())
    b:square_()
    c:frac_()
    assert.are.same({ 6.25, 0.25, 16 }, b:totable())
    assert.are.same({ -0.5, 0.5, 0 }, c:totable())
  end)
end)

describe("matmul of int64 tensors, as torch's on the CPU", function()
  local function I(t) return ember.tensor(t, "int64") end
  it("gives torch's exact int64 products for every shape rule", function()
    local a, b = I { { 1, 2, 3 }, { 4, 5, 6 } }, I { { 1, -1 }, { 2, 0 }, { 3, 7 } }
    local y = a:matmul(b)
    assert.are.equal("int64", y.dtype)
    assert.are.same({ { 14, 20 }, { 32, 38 } }, y:totable())
    assert.are.same({ 7, 16 }, ember.matmul(a, I { 1, 0, 2 }):totable())
    assert.are.same({ 9, 12, 15 }, ember.matmul(I { 1, 2 }, a):totable())
    assert.are.equal(32, ember.matmul(I { 1, 2, 3 }, I { 4, 5, 6 }):item())
    local A = ember.arange(0, 12):long():view(2, 2, 3)
    assert.are.same({ { { 8, 14 }, { 26, 32 } }, { { 44, 50 }, { 62, 68 } } }, A:matmul(b):totable())
    assert.are.same({ { { 10, 13 }, { 28, 40 } }, { { 172, 193 }, { 244, 274 } } },
      ember.bmm(A, ember.arange(0, 12):long():view(2, 3, 2)):totable())
    assert.are.same({ { 1152921504606846976 } }, I { { 1 << 40 } }:matmul(I { { 1 << 20 } }):totable()) -- past 2^53
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, ember.zeros(2, 0, "int64"):matmul(ember.zeros(0, 3, "int64")):totable())
  end)
  it("still refuses bool and mixed dtypes, naming matmul", function()
    raises_here(function() local _ = ember.tensor({ { true } }):matmul(ember.tensor({ { true } })) end,
      "ember.matmul: expected float or int64 tensors, got bool [1, 1] and bool [1, 1]")
    raises_here(function() local _ = I { { 1 } }:matmul(ember.ones(1, 1)) end, "ember.matmul: dtype mismatch")
  end)
end)

describe("ember.Function's saved tensors are checked as the core's", function()
  -- torch.autograd.Function: ctx.saved_tensors raises when one was modified in place
  local Square = ember.Function {
    name = "square_fn",
    forward = function(ctx, a) ctx:save_for_backward(a); return a * a end,
    backward = function(ctx, g) return g * ctx.saved[1] * 2 end,
  }
  it("a saved input written in place since raises at backward, naming the Function", function()
    local w = ember.tensor({ 1, 2 }, { requires_grad = true })
    local y = Square(w):sum()
    ember.no_grad(function() w:mul_(10) end)
    raises_here(function() y:backward() end,
      "ember.backward: square_fn: a tensor saved with save_for_backward ([2] float32 cpu) has been modified by an in-place operation since")
    local y2 = Square(w):sum()
    y2:backward()
    assert.are.same({ 20, 40 }, w.grad:totable())
  end)
end)

describe("add_ with a tensor of another dtype follows torch's in-place casting rule", function()
  -- torch: ones(2).add_(tensor([1, 2])) is [2., 3.]; a float result into an int64 tensor is
  -- "result type Float can't be cast to the desired output type Long"
  it("takes int64, bool and float64 sources into float32 (and bool into int64)", function()
    assert.are.same({ 2, 3 }, ember.ones(2):add_(ember.tensor({ 1, 2 }, "int64")):totable())
    assert.are.same({ 2, 1 }, ember.ones(2):add_(ember.tensor({ true, false })):totable())
    assert.are.same({ 1.5, 1.5 }, ember.ones(2):add_(ember.tensor({ 0.25, 0.25 }, "float64"), 2):totable())
    local i = ember.ones(2, "int64"):add_(ember.tensor({ true, false }))
    assert.are.equal("int64", i.dtype)
    assert.are.same({ 2, 1 }, i:totable())
  end)
  it("refuses a float source into an int64 tensor as torch", function()
    raises_here(function() ember.ones(2, "int64"):add_(ember.tensor({ 1.5, 2 })) end,
      "ember.add_: result type float32 can't be cast to the desired output type int64")
  end)
end)

describe("an in-place op's error names it once", function()
  it("not the out-of-place op it runs ('ember.add_: add: ...')", function()
    raises_here(function() ember.zeros(2, "bool"):add_(1) end, "ember.add_: result type int64 can't be cast to the desired output type bool")
  end)
end)

describe("argmax/argmin with keepdim and no dim, max/min with keepdim and no dim", function()
  local x = ember.tensor({ { 1, 5, 3 }, { 4, 2, 6 } })
  it("argmax keeps every dim as size 1 (torch.argmax(x, keepdim=True) is tensor([[5]]), 0-based)", function()
    for _, y in ipairs { x:argmax(nil, true), x:argmax { keepdim = true }, ember.argmax(x, { keepdim = true }) } do
      assert.are.equal(ember.Size { 1, 1 }, y.shape)
      assert.are.equal(6, y:item())
    end
    assert.are.same({ { 1 } }, x:argmin(nil, true):totable())
    assert.are.equal(ember.Size {}, x:argmax(nil, false).shape)
  end)
  it("max and min refuse keepdim without a dim in both spellings (torch: an invalid combination)", function()
    raises_here(function() local _ = x:max { keepdim = true } end, "ember.max: keepdim needs a dim")
    raises_here(function() local _ = x:min(nil, true) end, "ember.min: keepdim needs a dim")
  end)
end)

describe("softmax, log_softmax, cumsum and cumprod take dim as a keyword too", function()
  -- F.softmax(x, dim=-1), x.cumsum(dim=1, dtype=torch.float64): the commonest spelling
  local x = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  it("{dim =} alone or with dtype, as the reductions take it", function()
    assert.are.equal(x:softmax(-1), x:softmax { dim = -1 })
    assert.are.equal(x:log_softmax(1), ember.log_softmax(x, { dim = 1 }))
    assert.are.equal("float64", x:softmax({ dim = 2, dtype = "float64" }).dtype)
    assert.are.same({ { 1, 3, 6 }, { 4, 9, 15 } }, x:cumsum { dim = 2 }:totable())
    assert.are.same({ { 1, 2, 3 }, { 4, 10, 18 } }, ember.cumprod(x, { dim = 1, dtype = "float64" }):totable())
  end)
  it("refuses the dim twice, unknown keys, and no dim at all, naming the op", function()
    raises_here(function() local _ = x:softmax(1, { dim = 1 }) end, "ember.softmax: dim given twice")
    raises_here(function() local _ = x:cumsum { dims = 1 } end, "ember.cumsum: unknown option 'dims' (expected dim, dtype)")
    raises_here(function() local _ = x:cumsum { dtype = "float64" } end, "ember.cumsum: dim is required")
  end)
end)

describe("round takes torch's decimals", function()
  -- torch.tensor([1.2345, -2.5, 1234.5]).round(decimals=2): [1.23, -2.5, 1234.5]; decimals=-2: [0, -0, 1200]
  local x = ember.tensor({ 1.2345, -2.5, 1234.5 }, "float64")
  it("as {decimals =} or a number, half to even on the scaled value", function()
    local r = x:round { decimals = 2 }:totable()
    assert(math.abs(r[1] - 1.23) < 1e-12 and r[2] == -2.5 and r[3] == 1234.5)
    assert.are.same({ 0, -0.0, 1200 }, x:round(-2):totable())
    assert.are.same({ 1, -2, 1234 }, ember.round(x, { decimals = 0 }):totable())
    assert.are.same({ 1, -2, 1234 }, x:round():totable())
    local y = x:clone()
    y:round_({ decimals = 1 })
    assert(math.abs(y[1]:item() - 1.2) < 1e-12)
  end)
  it("refuses a non-integer decimals, unknown options, and integer tensors as torch", function()
    raises_here(function() local _ = x:round { decimals = 1.5 } end, "ember.round: decimals must be an integer, got 1.5")
    raises_here(function() local _ = x:round { digits = 1 } end, "ember.round: unknown option 'digits'")
    raises_here(function() local _ = ember.tensor({ 15 }, "int64"):round(-1) end,
      "ember.round: decimals needs a float tensor, got int64")
    raises_here(function() local _ = x:round(1, 2) end, "ember.round: takes at most 1 argument besides the tensor (decimals)")
  end)
end)

describe("a 0-d tensor takes dim 1 (or -1) in reductions and softmax, as torch's dim 0", function()
  -- torch.tensor(2.).sum(0) is tensor(2.); .max(0) is (2., 0); .softmax(0) is 1.; .var(0) is nan
  local x = ember.tensor(2)
  local function scalar(t, v)
    assert.are.equal(ember.Size {}, t.shape)
    if v ~= v then assert(t:item() ~= t:item()) else assert.are.equal(v, t:item()) end
  end
  it("sum, mean, var, std, max, min, argmax, argmin, amax, amin, logsumexp", function()
    scalar(x:sum(1), 2)
    scalar(x:sum(-1, true), 2)
    scalar(x:sum({ 1 }), 2)
    scalar(x:mean(1), 2)
    scalar(x:var(1), 0 / 0)
    scalar(x:std(1, false), 0)
    local v, i = x:max(1)
    scalar(v, 2)
    scalar(i, 1)
    v, i = x:min(-1, true)
    scalar(v, 2)
    scalar(i, 1)
    scalar(x:argmax(1), 1)
    scalar(x:argmin(-1, true), 1)
    scalar(x:amax(1), 2)
    scalar(x:amin(-1), 2)
    scalar(x:logsumexp(1), 2)
  end)
  it("softmax and log_softmax", function()
    scalar(x:softmax(1), 1)
    scalar(x:log_softmax(-1), 0)
  end)
  it("differentiable as torch's: d sum, max, logsumexp, amax = 1; d softmax = 0", function()
    local w = ember.tensor(2.0, { dtype = "float64", requires_grad = true })
    local y = w:sum(1) + w:max(-1) + w:logsumexp(1) + w:amax(1) + w:mean(1) + w:softmax(1) * 5
    y:backward()
    assert.are.equal(5, w.grad:item())
  end)
  it("other dims are out of range, naming the op called", function()
    raises_here(function() local _ = x:sum(2) end, "ember.sum: dim 2 is out of range for a 0-d tensor (dims 1 or -1)")
    raises_here(function() local _ = x:amax(2) end, "ember.amax: dim 2 is out of range")
    raises_here(function() local _ = x:logsumexp(2) end, "ember.logsumexp: dim 2 is out of range")
  end)
end)

describe("dim -1 of a 0-d tensor in the ops written in Lua", function()
  -- torch.tensor(2.).logsumexp(-1) is 2.; .median(0) is (2., 0); .kthvalue(1, 0) is (2., 0)
  local x = ember.tensor(2)
  it("is its one dim, as 1 is (logsumexp said 'ember.max: dim 0 is out of range')", function()
    assert.are.equal(2, x:logsumexp(-1):item())
    assert.are.equal(ember.Size {}, x:logsumexp(-1).shape)
    local v, i = x:median(1)
    assert.are.same({ 2, 1 }, { v:item(), i:item() })
    v, i = x:kthvalue(1, -1)
    assert.are.same({ 2, 1 }, { v:item(), i:item() })
    raises_here(function() local _ = x:median(2) end, "ember.median: dim 2 is out of range for a tensor with 0 dims")
  end)
end)

describe("in-place ops on a tensor of a graph are recorded, as PyTorch's", function()
  -- each case's values are PyTorch 1.13's (y = w * 2; y.add_(1) ...); ember refused them all
  local function W(t) return ember.tensor(t):requires_grad_() end
  it("add_, mul_ (a number or a tensor), pow_, exp_, zero_", function()
    local w = W { 1, 1, 1 }
    local y = w * 2
    y:add_(1)
    assert.are.same({ 3, 3, 3 }, y:totable())
    assert.are.equal("add", y.grad_fn)
    y:sum():backward()
    assert.are.same({ 2, 2, 2 }, w.grad:totable())
    w = W { 1, 1, 1 }
    y = w * 2
    y:mul_(3);
    (y * y):sum():backward()
    assert.are.same({ 72, 72, 72 }, w.grad:totable())
    w = W { 1, 2, 3 }
    y = w * 2
    y:mul_(w)
    y:sum():backward()
    assert.are.same({ 4, 8, 12 }, w.grad:totable())
    w = W { 1, 2, 3 }
    y = w * 1
    y:pow_(2)
    y:sum():backward()
    assert.are.same({ 2, 4, 6 }, w.grad:totable())
    w = W { 1, 2, 3 }
    y = w * 2
    y:zero_();
    (y + w):sum():backward()
    assert.are.same({ 1, 1, 1 }, w.grad:totable())
  end)
  it("y[mask] = v, y[idx] = v and masked_fill_ (torch's index_put_)", function()
    local w = W { 1, 2, 3 }
    local y = w * 2
    y[y:gt(3)] = 0
    assert.are.same({ 2, 0, 0 }, y:totable())
    y:sum():backward()
    assert.are.same({ 2, 0, 0 }, w.grad:totable())
    w = W { 1, 2, 3 }
    y = w * 2
    y[ember.tensor({ 1 }, "int64")] = 0
    y:masked_fill_(ember.tensor({ false, false, true }), 5)
    y:sum():backward()
    assert.are.same({ 0, 2, 0 }, w.grad:totable())
  end)
  it("copy_ and add_ from a tensor that requires grad into a plain one", function()
    local w = W { 1, 2, 3 }
    local y = ember.zeros(3)
    y:add_(w);
    (y * y):sum():backward()
    assert.are.same({ 2, 4, 6 }, w.grad:totable())
    w = W { 1, 2, 3 }
    local z = ember.zeros(3)
    z:copy_(w * 3)
    assert.is_true(z.requires_grad)
    z:sum():backward()
    assert.are.same({ 3, 3, 3 }, w.grad:totable())
  end)
  it("refused where another tensor shares the memory (a view, a detach()): its values or history would go stale", function()
    local w = W { 1, 1, 1 }
    local y = w * 2
    local v = y:narrow(1, 1, 2)
    raises_here(function() y:add_(1) end, "ember.add_: the tensor ([3] float32 cpu) was made by 'affine' and is part of an autograd graph, and other tensors share its memory")
    local base = w * 3
    local d = base:detach()
    raises_here(function() d:copy_(w) end, "ember.copy_: the source ([3] float32 cpu) requires grad, but other tensors share")
    assert.are.same({ 2, 2 }, v:totable())
    assert.are.same({ 3, 3, 3 }, base:totable())
  end)
  it("a tensor shared only with tensors Lua no longer reaches is recorded, whenever the collector ran", function()
    for _ = 1, 3 do
      local w = W { 1, 2 }
      local y = (w * 2):view(2) -- the dropped w * 2 shares y's memory until collected
      y:add_(1)
      local z = (w * 1):t()
      z:mul_(3)
      z:copy_(z * 2);
      (y + z):sum():backward()
      assert.are.same({ 8, 8 }, w.grad:totable())
    end
  end)
end)

describe("t[i] = v and t[{...}] = v are recorded on graph tensors and from values that require grad", function()
  -- PyTorch 1.13: out = zeros(3, 2); out[i] = w * (i + 1) in a loop; out.sum().backward(): w.grad = [6, 6]
  local function W(t) return ember.tensor(t):requires_grad_() end
  it("plain tensors keep the plain write (t[i] = a tensor or a number)", function()
    local t = ember.zeros(2, 3)
    t[1] = ember.tensor({ 1, 2, 3 })
    t[2] = 4
    assert.are.same({ { 1, 2, 3 }, { 4, 4, 4 } }, t:totable())
    raises_here(function() t[1] = "x" end, "ember.setindex: value must be a number or a tensor, got string")
  end)
  it("filling a plain tensor row by row from a graph (an RNN's outputs)", function()
    local w = W { 1, 2 }
    local out = ember.zeros(3, 2)
    for i = 1, 3 do out[i] = w * i end
    assert.are.same({ { 1, 2 }, { 2, 4 }, { 3, 6 } }, out:totable())
    out:sum():backward()
    assert.are.same({ 6, 6 }, w.grad:totable())
  end)
  it("y[i] = 0, y[{{a, b}}] = v, y[{{}, j}] = 0 and y[{i, j}] = v on a graph tensor", function()
    local w = W { 1, 2, 3 }
    local y = w * 2
    y[1] = 0
    y:sum():backward()
    assert.are.same({ 0, 2, 2 }, w.grad:totable())
    w = W { 1, 2, 3 }
    y = w * 2
    y[{ { 1, 2 } }] = ember.tensor({ 7, 8 })
    assert.are.same({ 7, 8, 6 }, y:totable())
    y:sum():backward()
    assert.are.same({ 0, 0, 2 }, w.grad:totable())
    local m = W { { 1, 2 }, { 3, 4 } }
    local z = m * 1
    z[{ {}, 2 }] = 0
    z[{ 1, 1 }] = m[2][1] * 10 -- torch: z[0, 0] = m[1, 0] * 10
    z:sum():backward()
    assert.are.same({ { 0, 0 }, { 11, 0 } }, m.grad:totable())
  end)
  it("a leaf that requires grad still refuses, naming setindex", function()
    local w = W { 1, 2 }
    raises_here(function() w[1] = 0 end, "ember.setindex: a view of a leaf tensor that requires grad")
    raises_here(function() w[{ 1 }] = 0 end, "a leaf tensor that requires grad")
  end)
end)

describe("t[{rows, cols}] = v on a graph tensor", function()
  it("is recorded too (torch: y[[0, 1], [1, 0]] = 0 gives m.grad [[1, 0], [0, 1]])", function()
    local m = ember.tensor({ { 1, 2 }, { 3, 4 } }):requires_grad_()
    local y = m * 1
    y[{ ember.tensor({ 1, 2 }, "int64"), ember.tensor({ 2, 1 }, "int64") }] = 0
    y:sum():backward()
    assert.are.same({ { 1, 0 }, { 0, 1 } }, m.grad:totable())
  end)
end)

describe("ember.set_printoptions, as torch.set_printoptions", function()
  after_each(function() ember.set_printoptions { profile = "default" } end)
  -- torch.set_printoptions(precision=2): tensor([1.23, 2.00]); sci_mode=False: tensor([0.0000, 1000000.0000]) ...
  it("precision, sci_mode, threshold, edgeitems and linewidth change how tensors print", function()
    ember.set_printoptions { precision = 2 }
    assert.are.equal("tensor([1.23, 2.00], shape=[2], dtype=float32, device=cpu)", tostring(ember.tensor({ 1.23456, 2 })))
    ember.set_printoptions { precision = 4, sci_mode = false }
    assert.are.equal("tensor([1.0000e+00, 1.0000e+06], shape=[2], dtype=float32, device=cpu)",
      (function() ember.set_printoptions { sci_mode = true }; return tostring(ember.tensor({ 1, 1e6 })) end)())
    ember.set_printoptions { sci_mode = false }
    assert.are.equal("tensor([      0.0001, 1000000.0000], shape=[2], dtype=float32, device=cpu)",
      tostring(ember.tensor({ 1e-4, 1e6 })))
    ember.set_printoptions { profile = "default", threshold = 5, edgeitems = 2 }
    assert.are.equal("tensor([0, 1,  ..., 8, 9], shape=[10], dtype=int64, device=cpu)", tostring(ember.arange(0, 10):long()))
    ember.set_printoptions { profile = "default", linewidth = 20 }
    assert.are.equal("tensor([0, 1, 2, 3,\n        4, 5, 6, 7], shape=[8], dtype=int64, device=cpu)", tostring(ember.arange(0, 8):long()))
    ember.set_printoptions { profile = "full" }
    assert.is_nil(tostring(ember.zeros(2000)):find("...", 1, true))
  end)
  it("refuses unknown options and bad values, naming set_printoptions", function()
    raises_here(function() ember.set_printoptions { precison = 2 } end, "ember.set_printoptions: unknown option 'precison'")
    raises_here(function() ember.set_printoptions { precision = -1 } end, "ember.set_printoptions: precision must be an integer in 0..30, got -1")
    raises_here(function() ember.set_printoptions { profile = "long" } end,
      "ember.set_printoptions: profile must be \"default\", \"short\" or \"full\", got \"long\"")
    raises_here(function() ember.set_printoptions { sci_mode = 1 } end, "ember.set_printoptions: sci_mode must be a boolean or nil")
  end)
end)

describe("norm takes torch's keywords", function()
  -- torch.tensor([[3., 4.], [6., 8.]]).norm(p=1, dim=1) is [7., 14.]; .norm(dim=0, keepdim=True) [[6.7082, 8.9443]]
  local x = ember.tensor({ { 3, 4 }, { 6, 8 } })
  it("as {p =, dim =, keepdim =} alone", function()
    assert.are.same({ 7, 14 }, x:norm { p = 1, dim = 2 }:totable())
    local n = x:norm { dim = 1, keepdim = true }
    assert.are.equal(ember.Size { 1, 2 }, n.shape)
    assert(math.abs(n[1][1]:item() - 6.7082) < 1e-4)
    assert(math.abs(ember.norm(x, { p = "fro" }):item() - 11.1803) < 1e-4)
    raises_here(function() local _ = x:norm { p = 1, dims = 2 } end, "ember.norm: unknown option 'dims'")
  end)
end)

describe("t._version counts the in-place writes to t's memory, as PyTorch's", function()
  it("fresh 0, then one per add_, t[i] = v and a view's mul_ (torch: 0, 1, 2, 3)", function()
    local x = ember.zeros(2)
    assert.are.equal(0, x._version)
    x:add_(1)
    assert.are.equal(1, x._version)
    x[1] = 5
    assert.are.equal(2, x._version)
    x:view(2):mul_(2)
    assert.are.equal(3, x._version)
    assert.are.equal(0, (x * 2)._version)
  end)
end)
