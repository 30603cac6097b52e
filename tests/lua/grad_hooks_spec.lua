-- The gradient-ready hooks of autograd (t:register_grad_ready_hook,
-- ember.register_backward_end_hook), which DistributedDataParallel starts
-- its all-reduces from, and the parts of ember.distributed that need no MPI.
local ember = require "ember"
local nn = require "ember.nn"

describe("gradient-ready hooks", function()
  it("fire once per leaf and pass, when the gradient is final", function()
    local w = ember.tensor({1, 2, 3}):requires_grad_()
    local seen = {}
    local h = w:register_grad_ready_hook(function(t)
      seen[#seen + 1] = t.grad:totable()
    end)
    -- w is used twice: the hook must wait for both contributions
    local y = (w * 2):sum() + (w * w):sum()
    y:backward()
    assert.are.same({{4, 6, 8}}, seen)
    h:remove()
    ;((w * 2):sum()):backward()
    assert.are.equal(1, #seen) -- removed
    h:remove() -- twice is fine
  end)

  it("fire the last layer's parameters before the first layer's", function()
    ember.manual_seed(0)
    local m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    local order, handles = {}, {}
    for _, n in ipairs(m:parameter_names()) do
      handles[#handles + 1] = m:named_parameters()[n]:register_grad_ready_hook(function() order[#order + 1] = n end)
    end
    local ends = 0
    handles[#handles + 1] = ember.register_backward_end_hook(function()
      ends = ends + 1
      assert.are.equal(4, #order) -- every parameter was ready before the end
    end)
    m(ember.randn(5, 3)):sum():backward()
    assert.are.equal(1, ends)
    assert.are.equal(4, #order)
    local pos = {}
    for i, n in ipairs(order) do pos[n] = i end
    assert.is_true(pos["3.weight"] < pos["1.weight"])
    assert.is_true(pos["3.bias"] < pos["1.bias"])
    for _, h in ipairs(handles) do h:remove() end
  end)

  it("a hook's error is the backward's error, and the process goes on", function()
    local w = ember.ones(2):requires_grad_()
    local h = w:register_grad_ready_hook(function() error("hook says no") end)
    local ok, err = pcall(function() (w * 3):sum():backward() end)
    assert.is_false(ok)
    assert.matches("backward.*hook says no", err)
    h:remove()
    w.grad = nil
    ;(w * 3):sum():backward()
    assert.are.same({3, 3}, w.grad:totable())
  end)

  it("only leaves that require grad can be hooked", function()
    local x = ember.ones(2)
    assert.has_error(function() x:register_grad_ready_hook(function() end) end)
    local w = ember.ones(2):requires_grad_()
    assert.has_error(function() (w * 2):register_grad_ready_hook(function() end) end)
  end)

  it("a leaf root fires its hook and the end hook", function()
    local w = ember.ones(1):requires_grad_()
    local n, e = 0, 0
    local h1 = w:register_grad_ready_hook(function() n = n + 1 end)
    local h2 = ember.register_backward_end_hook(function() e = e + 1 end)
    w:backward()
    assert.are.equal(1, n)
    assert.are.equal(1, e)
    h1:remove()
    h2:remove()
  end)
end)

describe("ember.distributed without mpirun", function()
  local dist = require "ember.distributed"

  it("needs init before a collective, and says so", function()
    if not dist.is_available() then
      assert.has_error(function() dist.init() end)
      return
    end
    assert.is_false(dist.is_initialized())
    local ok, err = pcall(dist.all_reduce, ember.ones(2))
    assert.is_false(ok)
    assert.matches("call ember.distributed.init%(%) first", err)
    assert.are.equal(0, dist.rank_or_0())
    assert.are.equal(1, dist.size_or_1())
  end)

  it("DistributedSampler shards by explicit rank and world size", function()
    local all, seen = {}, {}
    for r = 0, 2 do
      local s = dist.DistributedSampler(10, {num_replicas = 3, rank = r, seed = 4})
      s:set_epoch(1)
      all[r + 1] = s:list()
      assert.are.equal(4, #s) -- padded to 12
      for _, i in ipairs(all[r + 1]) do seen[i] = true end
    end
    for i = 1, 10 do assert.is_true(seen[i]) end
    local d = dist.DistributedSampler(10, {num_replicas = 3, rank = 0, drop_last = true})
    assert.are.equal(3, #d)
    local u = dist.DistributedSampler(10, {num_replicas = 3, rank = 2, pad = false})
    assert.are.equal(3, #u)
    assert.has_error(function() dist.DistributedSampler(10, {num_replicas = 3, rank = 3}) end)
    assert.has_error(function() dist.DistributedSampler(10, {shuffel = true}) end)
  end)
end)

-- t:register_hook(fn) and t:retain_grad() (torch's), on the engine's
-- gradient hook (em_set_grad_hook): PyTorch 1.13 gives the values below.
describe("tensor gradient hooks", function()
  local raises_here = require("tests.lua.helpers.parity").raises_here

  it("retain_grad keeps a non-leaf's gradient, accumulated over backwards", function()
    local w = ember.tensor({ 1, 2, 3 }, { requires_grad = true })
    local h = w * 2
    assert.are.equal(h, h:retain_grad())
    ;(h * h):sum():backward()
    assert.are.same({ 4, 8, 12 }, h.grad:totable()) -- d(h^2)/dh = 2h
    assert.are.same({ 8, 16, 24 }, w.grad:totable())
    local a = ember.tensor({ 1, 2 }, { requires_grad = true })
    local b = (a * 3):retain_grad()
    local s = b:sum()
    s:backward { retain_graph = true }
    s:backward()
    assert.are.same({ 2, 2 }, b.grad:totable())
    assert.are.equal(w, w:retain_grad()) -- a leaf: nothing to do
    assert.is_nil((w * 2).grad) -- not retained
    raises_here(function() ember.ones(2):retain_grad() end, "ember.retain_grad: the tensor does not require grad")
  end)

  it("register_hook on a non-leaf sees its whole gradient once and may replace it", function()
    local w = ember.tensor({ 1, 2, 3 }, { requires_grad = true })
    local h = w * 2
    local seen = {}
    local handle = h:register_hook(function(g)
      seen[#seen + 1] = g:totable()
      return g * 10
    end)
    -- h is used twice: the hook gets the sum, once
    ;((h * h):sum() + h:sum()):backward()
    assert.are.same({ { 5, 9, 13 } }, seen)
    assert.are.same({ 100, 180, 260 }, w.grad:totable())
    handle:remove()
    handle:remove() -- twice is fine
  end)

  it("register_hook on a leaf sees the summed gradient of the pass, before .grad", function()
    local w = ember.tensor({ 1, 2, 3 }, { requires_grad = true })
    local calls = 0
    local handle = w:register_hook(function(g)
      calls = calls + 1
      return g:clamp(-5, 5)
    end)
    ;((w * w):sum() + (w * 3):sum()):backward() -- 2w + 3 = 5, 7, 9
    assert.are.equal(1, calls)
    assert.are.same({ 5, 5, 5 }, w.grad:totable())
    handle:remove()
    w.grad = nil
    ;(w * w):sum():backward()
    assert.are.same({ 2, 4, 6 }, w.grad:totable())
    assert.are.equal(1, calls)
  end)

  it("a hook on the loss, and on parameters of a model in training", function()
    ember.manual_seed(0)
    local m = nn.Linear(3, 2)
    local x = ember.randn(4, 3)
    local ref = nn.Linear(3, 2)
    ref:load_state_dict(m:state_dict())
    ref(x):sum():backward()
    local handle = m.weight:register_hook(function(g) return g * 0 end)
    local loss = m(x):sum()
    loss:register_hook(function(g) return g * 2 end)
    loss:backward()
    assert.are.same({ 0, 0, 0 }, m.weight.grad[1]:totable())
    assert.is_true(ember.allclose(m.bias.grad, ref.bias.grad * 2))
    handle:remove()
  end)

  it("errors name the hook and the shapes, at the user's line", function()
    local a = ember.tensor({ 1, 2 }, { requires_grad = true })
    raises_here(function() ember.ones(2):register_hook(print) end,
      "ember.register_hook: cannot register a hook on a tensor that does not require grad")
    raises_here(function()
      local q = a * 2
      q:register_hook(function() return 5 end)
      q:sum():backward()
    end, "a hook must return nil or a tensor, got number")
    raises_here(function()
      local q = a * 2
      q:register_hook(function() return ember.ones(3) end)
      q:sum():backward()
    end, "a gradient hook returned [3] float32 for a gradient of [2] float32")
  end)

  it("hooks of a freed graph go with it: many steps leave no hook behind", function()
    local w = ember.randn(8, 8, { requires_grad = true })
    local before = ember.live_bytes()
    for _ = 1, 200 do
      local h = w:matmul(w):retain_grad()
      h:register_hook(function(g) return g end)
      h:sum():backward()
      w.grad = nil
    end
    collectgarbage()
    collectgarbage()
    assert.is_true(ember.live_bytes() - before < 64 * 1024, "tensors kept alive by old hooks")
  end)

  it("hooks of a graph never backpropagated go with their tensors (no backward at all)", function()
    -- grad mode on, hooks and retain_grad on activations, no backward (an
    -- evaluation pass): the node each hook held, with what it saved, went
    -- only when the state closed
    local w = ember.randn(64, 64, { requires_grad = true })
    collectgarbage()
    collectgarbage()
    local before = ember.live_bytes()
    for _ = 1, 50 do
      local h = w:matmul(w):exp()
      h:register_hook(function(g) return g end)
      local r = w:tanh():retain_grad()
      collectgarbage("step")
    end
    collectgarbage()
    collectgarbage()
    w:tanh():retain_grad() -- a new entry sweeps the dead ones
    collectgarbage()
    collectgarbage()
    assert.is_true(ember.live_bytes() - before < 4 * 64 * 64 * 4, "tensors kept alive by hooks that cannot fire")
    -- a hook whose tensor is gone still fires while a later node holds its graph
    local seen = 0
    local h = w:sigmoid()
    h:register_hook(function() seen = seen + 1 end)
    local y = (h * 2):sum()
    h = nil
    collectgarbage()
    collectgarbage()
    w:tanh():retain_grad() -- sweeps: h's node is still held by y's graph
    y:backward()
    assert.are.equal(1, seen)
  end)
end)

describe("hooks on a parameter converted by Module:to", function()
  it("follow the parameter to its new tensor and are removed through their handles", function()
    local m = nn.Linear(3, 2)
    local ready, seen = 0, 0
    local h1 = m.weight:register_grad_ready_hook(function() ready = ready + 1 end)
    local h2 = m.weight:register_hook(function(g) seen = seen + 1; return g * 2 end)
    m:double() -- the parameter keeps its identity; its tensor changes (Tensor:_assign)
    m(ember.ones(1, 3, "float64")):sum():backward()
    assert.are.equal(1, ready)
    assert.are.equal(1, seen)
    assert.are.same({ { 2, 2, 2 }, { 2, 2, 2 } }, m.weight.grad:totable())
    h1:remove()
    h2:remove()
    m.weight.grad = nil
    -- fresh tensors (which may reuse the old addresses) get no stale hook
    for _ = 1, 50 do
      local w = ember.ones(2, 3):requires_grad_()
      ;(w * 1):sum():backward()
      assert.are.same({ { 1, 1, 1 }, { 1, 1, 1 } }, w.grad:totable())
    end
    m(ember.ones(1, 3, "float64")):sum():backward()
    assert.are.equal(1, ready)
    assert.are.equal(1, seen)
    assert.are.same({ { 1, 1, 1 }, { 1, 1, 1 } }, m.weight.grad:totable())
  end)
end)
