-- Autograd from Lua: backward, accumulation, grad mode, detach, graph
-- freeing, and ember.Function with a Lua backward.
local ember = require "ember"

local function close(a, b, tol)
  tol = tol or 1e-5
  local x, y = a:totable(), b
  for i = 1, #y do
    assert(math.abs(x[i] - y[i]) <= tol, ("element %d: got %s, expected %s"):format(i, x[i], y[i]))
  end
end

describe("backward", function()
  it("computes gradients from a scalar", function()
    local x = ember.tensor({ 1, 2, 3 }, { requires_grad = true })
    local y = (x * x):sum()
    assert.are.equal("sum", y.grad_fn)
    assert.is_false(y.is_leaf)
    assert.is_true(x.is_leaf)
    assert.is_nil(x.grad)
    y:backward()
    close(x.grad, { 2, 4, 6 })
  end)

  it("accumulates into .grad across two backwards, until reset to nil", function()
    local x = ember.tensor({ 1, 2, 3 }, { requires_grad = true })
    ;(x * x):sum():backward()
    ;(x * 3):sum():backward()
    close(x.grad, { 5, 7, 9 })
    x.grad = nil
    assert.is_nil(x.grad)
    ;(x * 3):sum():backward()
    close(x.grad, { 3, 3, 3 })
  end)

  it("takes an explicit gradient for a non-scalar root", function()
    local x = ember.tensor({ 1, 2 }, { requires_grad = true })
    local y = x * x
    y:backward(ember.tensor { 1, 10 })
    close(x.grad, { 2, 40 })
  end)

  it("goes through a graph twice only with retain_graph", function()
    local x = ember.tensor({ 1, 2 }, { requires_grad = true })
    local y = (x * x):sum()
    y:backward(nil, true)
    y:backward()
    close(x.grad, { 4, 8 })
    local ok, msg = pcall(y.backward, y)
    assert.is_false(ok)
    assert.truthy(msg:find("ember.backward", 1, true))
    assert.truthy(msg:find("retain_graph", 1, true))
  end)

  it("flows through matmul, broadcasting and reductions", function()
    local w = ember.tensor({ { 1, 2 }, { 3, 4 } }, { requires_grad = true })
    local b = ember.tensor({ 1, 1 }, { requires_grad = true })
    local x = ember.tensor { { 1, 0 }, { 0, 1 }, { 1, 1 } }
    local loss = (x:matmul(w) + b):sum()
    loss:backward()
    assert.are.same({ { 2, 2 }, { 2, 2 } }, w.grad:totable())
    close(b.grad, { 3, 3 })
  end)
end)

describe("backward through pieces of one tensor", function()
  -- narrow, select, slice, chunk and split: each piece's gradient goes into
  -- its region of the whole's (added in place once the whole has one)
  local function close(a, b) return (a:double() - b:double()):abs():max():item() < 1e-12 end

  it("chunk, split, narrow, select and slice pieces of a non-leaf sum into its gradient", function()
    local x = ember.randn(4, 6, { dtype = "float64" }):requires_grad_()
    local y = x * 2 -- not a leaf: the pieces' gradients meet in y's pending gradient
    local a, b, c = table.unpack(y:chunk(3, 2))
    local p, q = table.unpack(y:split(3, 2))
    local loss = (a * 1 + b * 2 + c * 3):sum() + (p * 10):sum() + (q * q):sum()
      + y:narrow(1, 2, 2):sum() * 100 + y:narrow(1, 3, 2):sum() * 1000 -- overlapping rows 3
      + y:select(2, 6):sum() * 7 + y:slice(2, 1, 6, 2):sum() * 5
    loss:backward()
    -- the same gradient written out: d loss / d y, then times 2
    local dy = ember.zeros(4, 6, { dtype = "float64" })
    local yd = (x * 2):detach()
    for i = 1, 4 do
      for j = 1, 6 do
        local g = (j <= 2 and 1 or j <= 4 and 2 or 3) + (j <= 3 and 10 or 2 * yd[i][j]:item())
        if i == 2 or i == 3 then g = g + 100 end
        if i == 3 or i == 4 then g = g + 1000 end
        if j == 6 then g = g + 7 end
        if j % 2 == 1 then g = g + 5 end
        dy[i][j] = g
      end
    end
    assert.is_true(close(x.grad, dy * 2))
  end)

  it("a piece whose whole is also used as a whole, and a shared gradient, stay right", function()
    local x = ember.randn(3, 4, { dtype = "float64" }):requires_grad_()
    local y = x + 0
    local z = y + y -- add's backward hands the same gradient to both of its inputs
    local loss = (z:narrow(2, 1, 2) * 3):sum() + z:sum() + (y:narrow(2, 3, 2) * 5):sum()
    loss:backward()
    local want = ember.tensor({ { 8, 8, 7, 7 }, { 8, 8, 7, 7 }, { 8, 8, 7, 7 } }, { dtype = "float64" })
    assert.is_true(close(x.grad, want))
  end)
end)

describe("grad mode", function()
  it("no_grad runs a function without recording and returns its results", function()
    local x = ember.ones(2, { requires_grad = true })
    local y, extra = ember.no_grad(function(a, k) return a * k, "extra" end, x, 2)
    assert.are.equal("extra", extra)
    assert.is_false(y.requires_grad)
    assert.is_nil(y.grad_fn)
    assert.is_true(ember.is_grad_enabled())
  end)

  it("restores grad mode when the function fails", function()
    local ok = pcall(ember.no_grad, function() error("inside") end)
    assert.is_false(ok)
    assert.is_true(ember.is_grad_enabled())
  end)

  it("set_grad_enabled returns the previous mode", function()
    assert.is_true(ember.set_grad_enabled(false))
    assert.is_false(ember.is_grad_enabled())
    local y = ember.ones(2, { requires_grad = true }) * 2
    assert.is_false(ember.set_grad_enabled(true))
    assert.is_false(y.requires_grad)
  end)

  it("detach cuts the graph", function()
    local x = ember.ones(2, { requires_grad = true })
    local d = (x * 2):detach()
    assert.is_false(d.requires_grad)
    assert.is_true(d.is_leaf)
    local y = (d * x):sum()
    y:backward()
    close(x.grad, { 2, 2 })
  end)

  it("requires_grad can be set on leaves only", function()
    local x = ember.ones(2)
    assert.are.equal(x, x:requires_grad_())
    assert.is_true(x.requires_grad)
    x.requires_grad = false
    assert.is_false(x.requires_grad)
    local y = ember.ones(2, { requires_grad = true }) * 2
    local ok, msg = pcall(function() y.requires_grad = false end)
    assert.is_false(ok)
    assert.truthy(msg:find("leaf", 1, true))
  end)
end)

describe("ember.Function", function()
  local Scale = ember.Function {
    name = "scale",
    forward = function(ctx, a, k)
      assert(not ember.is_grad_enabled(), "forward runs with grad off")
      ctx:save_for_backward(a)
      ctx.k = k
      return a * a * k
    end,
    backward = function(ctx, g)
      local a = ctx.saved[1]
      return g * a * 2 * ctx.k, nil
    end,
  }

  it("records a node whose Lua backward gives the gradient", function()
    local w = ember.tensor({ 1, 2, 3 }, { requires_grad = true })
    local out = Scale(w, 10)
    assert.are.equal("scale", out.grad_fn)
    out:sum():backward()
    close(w.grad, { 20, 40, 60 })
  end)

  it("composes with core ops on both sides", function()
    local w = ember.tensor({ 1, 2 }, { requires_grad = true })
    local y = (Scale(w * 2, 1) + w):sum() -- d/dw (4w^2 + w) = 8w + 1
    y:backward()
    close(w.grad, { 9, 17 })
  end)

  it("records nothing when no input needs grad", function()
    local y = Scale(ember.ones(2), 3)
    assert.is_nil(y.grad_fn)
  end)

  it("gives nil gradients for inputs that get none", function()
    local Pick = ember.Function {
      name = "pick",
      forward = function(ctx, a, b) return a + b end,
      backward = function(ctx, g) return g, nil end,
    }
    local a = ember.ones(2, { requires_grad = true })
    local b = ember.ones(2, { requires_grad = true })
    Pick(a, b):sum():backward()
    close(a.grad, { 1, 1 })
    assert.is_nil(b.grad)
  end)

  it("turns a Lua error in backward into a Lua error from backward() naming the function", function()
    local Bad = ember.Function {
      name = "badop",
      forward = function(ctx, a) return a:clone() end,
      backward = function(ctx, g) error("boom in backward") end,
    }
    local w = ember.ones(2, { requires_grad = true })
    local ok, msg = pcall(function() Bad(w):sum():backward() end)
    assert.is_false(ok)
    assert.truthy(msg:find("badop", 1, true))
    assert.truthy(msg:find("boom in backward", 1, true))
    -- the process and autograd carry on
    ;(w * 2):sum():backward()
    close(w.grad, { 2, 2 })
  end)

  it("rejects a gradient of the wrong shape or type", function()
    local Wrong = ember.Function {
      name = "wrongshape",
      forward = function(ctx, a) return a:clone() end,
      backward = function(ctx, g) return ember.ones(5) end,
    }
    local w = ember.ones(3, { requires_grad = true })
    local ok, msg = pcall(function() Wrong(w):sum():backward() end)
    assert.is_false(ok)
    assert.truthy(msg:find("wrongshape", 1, true))
    assert.truthy(msg:find("[5]", 1, true))
    local Str = ember.Function {
      name = "stringgrad",
      forward = function(ctx, a) return a:clone() end,
      backward = function(ctx, g) return "nope" end,
    }
    ok, msg = pcall(function() Str(w):sum():backward() end)
    assert.is_false(ok)
    assert.truthy(msg:find("string", 1, true))
  end)

  it("checks its definition", function()
    assert.has_error(function() ember.Function { name = "x", forward = function() end } end)
    local ok, msg = pcall(ember.Function, { forward = print, backward = print, backwards = print })
    assert.is_false(ok)
    assert.truthy(msg:find("unknown option 'backwards'", 1, true))
    local F = ember.Function { forward = function() return 1 end, backward = print }
    ok, msg = pcall(F, ember.ones(1))
    assert.is_false(ok)
    assert.truthy(msg:find("must return a tensor", 1, true))
  end)

  it("frees its graph (no leak of Lua references)", function()
    local w = ember.ones(100, { requires_grad = true })
    collectgarbage()
    collectgarbage()
    local before = ember.live_bytes()
    for _ = 1, 50 do
      local out = Scale(w, 2) -- never backpropagated: dropped with the graph
      out = nil
    end
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, ember.live_bytes())
  end)
end)

describe("backward's PyTorch keywords", function()
  it("takes {gradient =, retain_graph =} as a table, first or after the gradient", function()
    local x = ember.tensor({ 1, 2, 3 }, { requires_grad = true })
    local y = x * x
    y:backward { gradient = ember.ones(3), retain_graph = true }
    y:backward(ember.ones(3), { retain_graph = true })
    y:backward { gradient = ember.ones(3) }
    assert.are.same({ 6, 12, 18 }, x.grad:totable())
    local ok, err = pcall(function() y:backward { gradient = ember.ones(3) } end)
    assert.is_false(ok)
    assert.truthy(err:find("t:backward{retain_graph = true}", 1, true), err)
    ok, err = pcall(function() (x * 2):sum():backward { retain = true } end)
    assert.truthy(err:find("ember.backward: unknown option 'retain'", 1, true), err)
  end)
end)

-- A leaf's first gradient becomes its .grad without a copy when nothing
-- else can see it (core/src/autograd.c em__grad_owned), and is copied
-- whenever something else can: the caller's gradient, one gradient handed
-- to two leaves, a tensor a hook kept.
describe("a leaf's first gradient", function()
  local function backward_copies(f)
    local prof = ember.profile(f)
    local n = 0
    for _, r in ipairs(prof:stats()) do
      if r.phase == "backward" and r.name == "copy" then n = n + r.calls end
    end
    return n
  end

  it("is taken as it is when the engine holds the only reference", function()
    local x = ember.randn(1000):requires_grad_()
    assert.are.equal(0, backward_copies(function() x:exp():backward(ember.ones(1000)) end))
    assert.is_true(ember.equal(x.grad, x:detach():exp()))
  end)

  it("is copied when the caller still holds it", function()
    local x = ember.randn(5):requires_grad_()
    local g = ember.ones(5)
    x:backward(g)
    g:mul_(3)
    assert.are.same({ 1, 1, 1, 1, 1 }, x.grad:totable())
  end)

  it("is copied when one gradient goes to two leaves (add passes it on to both)", function()
    local x, y = ember.zeros(4):requires_grad_(), ember.zeros(4):requires_grad_()
    ;(x + y):backward(ember.ones(4) * 2)
    x.grad:mul_(10)
    assert.are.same({ 2, 2, 2, 2 }, y.grad:totable())
    assert.are.same({ 20, 20, 20, 20 }, x.grad:totable())
  end)

  it("is copied when a hook kept it", function()
    local x = ember.zeros(3):requires_grad_()
    local kept
    x:register_hook(function(g) kept = g end)
    x:exp():backward(ember.ones(3))
    kept:fill_(7)
    assert.are.same({ 1, 1, 1 }, x.grad:totable())
  end)
end)
