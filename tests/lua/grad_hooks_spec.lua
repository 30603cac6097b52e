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
