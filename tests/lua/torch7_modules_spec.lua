-- Torch7's nn calls on ember's modules (nn/_torch7.lua, nn/Criterion.lua,
-- nn/View.lua, nn/Reshape.lua): the classic loop
--   out = model:forward(x); loss = crit:forward(out, y); dout = crit:backward(out, y)
--   model:zeroGradParameters(); model:backward(x, dout); model:updateParameters(lr)
-- and getParameters' flat tensors, checked against the same steps written
-- the PyTorch way (loss:backward(), an optimizer) and against ember's losses.
-- These were "attempt to call a nil value" before.
local ember = require "ember"
local nn = require "ember.nn"
local F = nn.functional
local parity = require "tests.lua.helpers.parity"
local raises_here = parity.raises_here

local function close(a, b, tol)
  assert.is_true(ember.allclose(a, b, tol or 1e-5, tol or 1e-6), tostring(a) .. " vs " .. tostring(b))
end

local function mlp(seed)
  ember.manual_seed(seed)
  local m = nn.Sequential(); m:add(nn.Linear(3, 4)); m:add(nn.Tanh()); m:add(nn.Linear(4, 2))
  return m
end

-- A fresh process: whether m:forward keeps its output depends on the
-- Torch7 calls made before it in the process.
local function fresh(script)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(script)
  f:close()
  local h = assert(io.popen(("'%s/bin/ember' '%s' 2>&1"):format(os.getenv("EMBER_BUILD_DIR") or "build", path)))
  local out = h:read("a")
  h:close()
  os.remove(path)
  return out
end

describe("m:forward's kept output", function()
  -- kept from the first Torch7 call on: PyTorch-style m:forward(x) in a loop
  -- held the last step's graph while the next one ran (fault_injection_spec saw it)
  it("is not kept before any Torch7 call, and is after an nn.*Criterion is built", function()
    local out = fresh([[
      local nn = require "ember.nn"
      local m, x = nn.Linear(3, 2), ember.randn(4, 3)
      local seen = setmetatable({}, { __mode = "v" })
      seen[1] = m:forward(x)
      collectgarbage(); collectgarbage()
      print("before", seen[1] == nil)
      print(pcall(m.backward, m, x, ember.ones(4, 2)))
      local crit = nn.MSECriterion()
      seen[1] = m:forward(x)
      collectgarbage(); collectgarbage()
      print("after", seen[1] == nil)
      print("backward", m:backward(x, ember.ones(4, 2)) == nil, m.weight.grad ~= nil)
    ]])
    assert.truthy(out:find("before\ttrue\n"), out)
    assert.truthy(out:find("Linear.backward: no forward of this module on this input", 1, true), out)
    assert.truthy(out:find("once a Torch7 call was made", 1, true), out)
    assert.truthy(out:find("after\tfalse\n"), out)
    assert.truthy(out:find("backward\ttrue\ttrue\n"), out)
  end)
end)

describe("Torch7's criterions", function()
  local x, y = ember.randn(4, 3), ember.randn(4, 3)
  local ids = ember.tensor({ 1, 3, 2, 1 }, "int64")
  local w = ember.tensor { 1, 2, 3 }
  local logp = ember.randn(4, 3):log_softmax(2)
  local sign = ember.tensor { { 1, -1, 1 }, { -1, -1, 1 }, { 1, 1, -1 }, { -1, 1, 1 } }
  local bits = y:gt(0):float()
  -- criterion, input, target, the matching ember loss as a function of input
  local cases = {
    { nn.MSECriterion(), x, y, function(i) return ember.mse_loss(i, y) end },
    { nn.MSECriterion(false), x, y, function(i) return ember.mse_loss(i, y, "sum") end },
    { nn.AbsCriterion(), x, y, function(i) return ember.l1_loss(i, y) end },
    { nn.SmoothL1Criterion(false), x, y, function(i) return ember.smooth_l1_loss(i, y, { reduction = "sum" }) end },
    { nn.ClassNLLCriterion(), logp, ids, function(i) return ember.nll_loss(i, ids) end },
    { nn.ClassNLLCriterion(w), logp, ids, function(i) return ember.nll_loss(i, ids, { weight = w }) end },
    { nn.ClassNLLCriterion(nil, false), logp, ids, function(i) return ember.nll_loss(i, ids, { reduction = "sum" }) end },
    { nn.CrossEntropyCriterion(), x, ids, function(i) return ember.cross_entropy(i, ids) end },
    { nn.CrossEntropyCriterion(w), x, ids, function(i) return nn.CrossEntropyLoss { weight = w }(i, ids) end },
    { nn.BCECriterion(), x:sigmoid(), bits, function(i) return ember.binary_cross_entropy(i, bits) end },
    { nn.DistKLDivCriterion(), logp, y:softmax(2), function(i) return ember.kl_div(i, y:softmax(2)) end },
    { nn.SoftMarginCriterion(), x, sign, function(i) return F.soft_margin_loss(i, sign) end },
    { nn.HingeEmbeddingCriterion(0.5), x, sign, function(i) return F.hinge_embedding_loss(i, sign, { margin = 0.5 }) end },
    { nn.MultiMarginCriterion(2, nil, 0.5), x, ids, function(i) return F.multi_margin_loss(i, ids, { p = 2, margin = 0.5 }) end },
    { nn.MultiLabelSoftMarginCriterion(), x, bits, function(i) return F.multilabel_soft_margin_loss(i, bits) end },
  }
  it("forward is the ember loss as a Lua number, backward its autograd gradient", function()
    for k, c in ipairs(cases) do
      local crit, input, target, loss = c[1], c[2], c[3], c[4]
      local v = crit:forward(input, target)
      assert.are.equal("number", math.type(v) and "number" or type(v), "case " .. k)
      assert.is_true(math.abs(v - loss(input):item()) <= 1e-6 * math.max(1, math.abs(v)), "case " .. k .. " " .. crit.__name)
      assert.are.equal(v, crit.output)
      local xi = input:detach():requires_grad_()
      local want = ember.grad(loss(xi), { xi })[1]
      local g = crit:backward(input, target)
      close(g, want)
      assert.are.equal(g, crit.gradInput)
      assert.is_false(input.requires_grad) -- input itself untouched
    end
  end)

  it("sizeAverage set on the field afterwards (Torch7 code does) is read at each call", function()
    local c = nn.MSECriterion()
    local mean = c:forward(x, y)
    c.sizeAverage = false
    assert.is_true(math.abs(c:forward(x, y) - mean * x:numel()) < 1e-4)
    close(c:backward(x, y), (x - y) * 2)
  end)

  it("the pair criterions take {x1, x2} and give a pair of gradients", function()
    local a, b, s = ember.randn(5), ember.randn(5), ember.tensor { 1, -1, 1, -1, 1 }
    local c = nn.MarginRankingCriterion(0.1)
    assert.is_true(math.abs(c:forward({ a, b }, s) - F.margin_ranking_loss(a, b, s, { margin = 0.1 }):item()) < 1e-6)
    local ai, bi = a:detach():requires_grad_(), b:detach():requires_grad_()
    local want = ember.grad(F.margin_ranking_loss(ai, bi, s, { margin = 0.1 }), { ai, bi })
    local g = c:backward({ a, b }, s)
    close(g[1], want[1]); close(g[2], want[2])
    local p, q, t = ember.randn(3, 4), ember.randn(3, 4), ember.tensor { 1, -1, 1 }
    local ce = nn.CosineEmbeddingCriterion(0.2)
    assert.is_true(math.abs(ce:forward({ p, q }, t) - F.cosine_embedding_loss(p, q, t, { margin = 0.2 }):item()) < 1e-6)
    raises_here(function() ce:forward(p, t) end, "CosineEmbeddingCriterion.forward: input must be a pair of tensors {x1, x2}, got a tensor")
  end)

  it("constructor and input errors name the criterion", function()
    raises_here(function() nn.MSECriterion(1) end, "nn.MSECriterion: sizeAverage must be a boolean, got number")
    raises_here(function() nn.ClassNLLCriterion({ 1, 2 }) end, "nn.ClassNLLCriterion: weights must be a tensor, got table")
    raises_here(function() nn.AbsCriterion(true, 3) end, "nn.AbsCriterion: takes at most 1 arguments (sizeAverage), got 2")
    raises_here(function() nn.ClassNLLCriterion():backward(ember.tensor({ 1, 2 }, "int64"), ids) end,
      "ClassNLLCriterion.backward: input must be floating-point")
    raises_here(function() nn.MSECriterion():forward(ember.zeros(2), ember.zeros(3)) end, "mse_loss")
  end)
end)

describe("Torch7's module calls", function()
  it("the Torch7 loop and the PyTorch loop give the same parameters", function()
    local a, b = mlp(11), mlp(11)
    local crit = nn.MSECriterion()
    local opt = ember.optim.SGD(b:parameters(), { lr = 0.1 })
    ember.manual_seed(12)
    for _ = 1, 5 do
      local x, y = ember.randn(6, 3), ember.randn(6, 2)
      local out = a:forward(x)
      local loss = crit:forward(out, y)
      local dout = crit:backward(out, y)
      a:zeroGradParameters()
      assert.is_nil(a:backward(x, dout)) -- x required no grad: no gradInput to give
      a:updateParameters(0.1)
      opt:zero_grad()
      local l = ember.mse_loss(b(x), y)
      l:backward()
      opt:step()
      assert.is_true(math.abs(loss - l:item()) < 1e-5)
    end
    local pa, pb = a:parameters(), b:parameters()
    for i = 1, #pa do close(pa[i], pb[i]) end
  end)

  it("backward returns gradInput where x required grad, and stops at x (a chain counts each module once)", function()
    local m1, m2 = mlp(3), nn.Linear(2, 5)
    local x = ember.randn(4, 3)
    local g5 = ember.randn(4, 5)
    -- PyTorch's reference: one graph through both
    local xr = x:detach():requires_grad_()
    m2(m1(xr)):backward(g5)
    local want1, want2 = m1[1].weight.grad:clone(), m2.weight.grad:clone()
    local wantx = xr.grad:clone()
    m1:zero_grad(); m2:zero_grad()
    -- Torch7's: each module backward by itself, the gradient passed by hand
    local xi = x:detach():requires_grad_()
    local h = m1:forward(xi)
    m2:forward(h)
    local gh = m2:backward(h, g5)
    close(m2.weight.grad, want2)
    assert.is_nil(m1[1].weight.grad) -- m2's backward stopped at h
    close(m1:backward(xi, gh), wantx)
    close(m1[1].weight.grad, want1)
    assert.is_nil(xi.grad) -- gradInput is returned, not accumulated into x.grad
  end)

  it("accumulates (scaled), and updateGradInput / accGradParameters split it", function()
    local m = nn.Linear(3, 2)
    local x, g = ember.randn(4, 3):requires_grad_(), ember.randn(4, 2)
    m:forward(x)
    local gx = m:backward(x, g)
    local w1 = m.weight.grad:clone()
    m:accGradParameters(x, g, 0.5) -- the graph is kept: again, half
    close(m.weight.grad, w1 * 1.5)
    close(m:updateGradInput(x, g), gx)
    close(m.weight.grad, w1 * 1.5) -- updateGradInput leaves the parameters' grads
    local gx2 = m:backward(x, g, 3) -- scale weighs the parameters' part only
    close(gx2, gx)
    close(m.weight.grad, w1 * 4.5)
    m:zeroGradParameters()
    assert.are.equal(0, m.weight.grad:abs():sum():item()) -- zeroed in place, not dropped
  end)

  it("backward without a kept forward is an error saying what to do", function()
    local m = nn.Sequential(nn.Linear(3, 2))
    local x = ember.randn(2, 3)
    raises_here(function() m:backward(x, ember.ones(2, 2)) end,
      "Sequential.backward: no forward of this module on this input to go back through: call m:forward(x)")
    m(x) -- m(x) keeps nothing
    raises_here(function() m:backward(x, ember.ones(2, 2)) end, "Sequential.backward: no forward of this module")
    m:forward(x)
    raises_here(function() m:backward(ember.randn(2, 3), ember.ones(2, 2)) end, "with this same x first")
    ember.no_grad(function() m:forward(x) end)
    raises_here(function() m:backward(x, ember.ones(2, 2)) end,
      "Sequential.backward: the forward on this input ran under no_grad")
    m:forward(x)
    raises_here(function() m:backward(x, 5) end, "Sequential.backward: gradOutput must be a tensor of the output's shape, got number")
    raises_here(function() m:backward(x, ember.ones(3, 2)) end, "Sequential.backward:")
    m:clearState()
    raises_here(function() m:backward(x, ember.ones(2, 2)) end, "no forward of this module")
  end)

  it("a kept output goes with its input (weak keys: nothing leaks)", function()
    local m = nn.Linear(3, 2)
    local probe = setmetatable({}, { __mode = "v" })
    do
      local x = ember.randn(2, 3)
      probe[1] = m:forward(x)
      collectgarbage()
      assert.is_not_nil(probe[1])
    end
    collectgarbage(); collectgarbage()
    assert.is_nil(probe[1])
  end)

  it("getParameters: the parameters view one flat tensor, their gradients another", function()
    local a, b = mlp(5), mlp(5)
    local opt_before = ember.optim.SGD(a:parameters(), { lr = 0.05 })
    local weight = a[1].weight
    local params, grads = a:getParameters()
    assert.are.equal(a:num_parameters(), params:numel())
    assert.are.equal(params:numel(), grads:numel())
    assert.is_true(rawequal(weight, a[1].weight)) -- the same tensor objects, re-pointed
    close(params, nn.utils.parameters_to_vector(b))
    -- optim's functional form: write the flat tensor, the model changes
    ember.manual_seed(6)
    for _ = 1, 3 do
      local x, y = ember.randn(5, 3), ember.randn(5, 2)
      grads:zero_()
      ember.mse_loss(a(x), y):backward() -- gradients land in the flat tensor
      params:add_(grads, -0.05)
      b:zero_grad()
      ember.mse_loss(b(x), y):backward()
      ember.no_grad(function() for _, p in ipairs(b:parameters()) do p:sub_(p.grad * 0.05) end end)
    end
    close(params, nn.utils.parameters_to_vector(b))
    close(a[3].bias, b[3].bias)
    -- an optimizer made before getParameters still updates the model, through the flat tensors
    local before = params:clone()
    local x = ember.randn(5, 3)
    a:forward(x)
    a:zeroGradParameters()
    a:backward(x, ember.ones(5, 2))
    assert.is_true(grads:abs():sum():item() > 0)
    opt_before:step()
    close(params, before - grads * 0.05)
  end)

  it("getParameters refuses parameters of several dtypes", function()
    local m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2):double())
    raises_here(function() m:getParameters() end, "Sequential.getParameters: parameter 3 (2.weight) is float64")
  end)

  it("evaluate, listModules, findModules, type, share, noBias", function()
    local m = mlp(1)
    assert.are.equal(m, m:evaluate())
    assert.is_false(m[1].training)
    m:train() -- Torch7's training(): m.training is PyTorch's flag
    assert.is_true(m[3].training)
    assert.are.equal(4, #m:listModules())
    local found, containers = m:findModules("nn.Linear")
    assert.are.equal(2, #found)
    assert.are.equal(m[3], found[2])
    assert.are.equal(m, containers[1])
    assert.are.equal(2, #m:findModules(nn.Linear))
    assert.are.equal("float32", m:type())
    m:type("torch.DoubleTensor")
    assert.are.equal("float64", m[1].weight.dtype)
    raises_here(function() m:type("torch.HalfTensor") end, "Sequential.type: ember has no float16 dtype")
    local l1, l2 = nn.Linear(3, 3), nn.Linear(3, 3)
    l2:share(l1, "weight", "bias")
    assert.is_true(rawequal(l1.weight, l2.weight))
    local net = nn.Sequential(l1, l2)
    assert.are.equal(2, #net:parameters())
    raises_here(function() l2:share(l1, "running_mean") end, "Linear.share: 'running_mean' must be a parameter or buffer of both")
    local l = nn.Linear(3, 2):noBias()
    assert.is_nil(l.bias)
    close(l(ember.ones(1, 3)), ember.ones(1, 3):mm(l.weight:t()))
    raises_here(function() l:noBias() end, "Linear.noBias: this module has no bias")
  end)

  it("Torch7 names with no one meaning here are errors saying the ember way; other names stay nil", function()
    local m = nn.Linear(2, 2)
    raises_here(function() m:reset(0.1) end, "Linear.reset: Torch7's reset is not an ember method; m:reset_parameters()")
    raises_here(function() m:clone() end, "Linear.clone: Torch7's clone is not an ember method; build another module")
    raises_here(function() m:accUpdateGradParameters() end, "m:backward(x, gradOutput) then m:updateParameters(lr)")
    assert.is_nil(m.no_such_thing)
    assert.is_nil(nn.Linear(2, 2, { bias = false }).bias)
  end)

  it("Sequential: size, get, remove; Torch7's insert(m, i) is refused saying the order", function()
    local s = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())
    assert.are.equal(3, s:size())
    assert.are.equal("Tanh", s:get(2).__name)
    assert.are.equal("Sigmoid", s:get(-1).__name)
    raises_here(function() s:get(4) end, "Sequential.get: index 4 is out of range for a Sequential of 3 modules")
    assert.are.equal("Sigmoid", s:remove().__name)
    assert.are.equal("ReLU", s:remove(1).__name)
    assert.are.equal(1, s:size())
    raises_here(function() s:insert(nn.ReLU(), 1) end, "Sequential.insert: takes the position first, as PyTorch's: seq:insert(i, m)")
  end)

  it("nn.View and nn.Reshape follow Torch7's batch rules", function()
    local v = nn.View(2, 6)
    assert.is_true(v(ember.zeros(12)).shape == ember.Size { 2, 6 })
    assert.is_true(v(ember.zeros(5, 12)).shape == ember.Size { 5, 2, 6 })
    assert.is_true(v(ember.zeros(5, 3, 4)).shape == ember.Size { 5, 2, 6 })
    assert.is_true(nn.View(-1, 6)(ember.zeros(4, 3)).shape == ember.Size { 2, 6 })
    assert.is_true(nn.View(6):setNumInputDims(2)(ember.zeros(1, 2, 3)).shape == ember.Size { 1, 6 })
    local x = ember.arange(0, 24):float():view(2, 12)
    assert.is_true(ember.equal(v(x), x:view(2, 2, 6)))
    raises_here(function() v(ember.zeros(7)) end, "View.forward: input view (7) and desired view (2x6) do not match")
    raises_here(function() nn.View(-1, -1) end, "nn.View: only one size can be -1")
    local r = nn.Reshape(2, 6)
    assert.is_true(r(ember.zeros(3, 4)).shape == ember.Size { 2, 6 })
    assert.is_true(r(ember.zeros(5, 3, 4)).shape == ember.Size { 5, 2, 6 })
    assert.is_true(nn.Reshape(2, 2, true)(ember.zeros(3, 4)).shape == ember.Size { 3, 2, 2 })
    local t = x:t() -- not contiguous: Reshape copies
    assert.is_true(ember.equal(nn.Reshape(3, 8)(t), t:reshape(3, 8)))
  end)
end)

describe("Torch7's resize and resizeAs", function()
  it("x itself takes the new shape, its first elements kept", function()
    local x = ember.arange(1, 13):float()
    local keep = x
    assert.are.equal(x, x:resize(2, 6))
    assert.is_true(rawequal(keep, x))
    assert.is_true(ember.equal(x, ember.arange(1, 13):float():view(2, 6)))
    x:resize(3) -- fewer: a view of its start
    assert.is_true(ember.equal(x, ember.tensor { 1, 2, 3 }))
    x:resize({ 2, 3 }) -- more: new memory, zeros past the old elements
    assert.is_true(ember.equal(x, ember.tensor { { 1, 2, 3 }, { 0, 0, 0 } }))
    local y = ember.ones(2)
    y:resizeAs(ember.zeros(2, 2))
    assert.is_true(y.shape == ember.Size { 2, 2 })
    x:resize_(ember.Size { 6 })
    assert.is_true(x.shape == ember.Size { 6 })
    assert.is_true(ember.equal(ember.ones(3):expandAs(ember.zeros(2, 3)), ember.ones(2, 3)))
  end)
  it("refuses what it cannot do honestly, saying the alternative", function()
    raises_here(function() ember.ones(2):requires_grad_():resize(4) end,
      "ember.resize: cannot resize a tensor that requires grad or has a grad_fn (x = x:reshape(...)")
    raises_here(function() ember.ones(2, 3):t():resize(2) end, "ember.resize: x is not contiguous")
    raises_here(function() ember.ones(2):resize(-1) end, "ember.resize: size 1 must be an integer >= 0, got -1")
    raises_here(function() ember.ones(2):storage() end, "ember.storage: Torch7's storage is not an ember method; views share memory")
    raises_here(function() ember.ones(2):set(ember.ones(3)) end, "ember.set: Torch7's set is not an ember method")
  end)
end)
