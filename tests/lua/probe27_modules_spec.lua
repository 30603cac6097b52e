-- Issue 27's modules as a new user coming from PyTorch uses them: what a
-- probe of RMSNorm, FeedForward, the convolutions, pools and norms, the
-- containers, nn.init, nn.checkpoint and ember.models found wrong.
--
--  * nn.checkpoint: a module that moves state in its training forward
--    (BatchNorm's and InstanceNorm's running statistics and
--    num_batches_tracked, spectral_norm's power iteration) moved it twice,
--    once in the forward and again in the backward's recompute; spectral
--    norm's second iteration also changed u and v, so the gradients were
--    no longer those of the run without checkpointing.
local ember = require "ember"
local nn = require "ember.nn"

local function bitwise_equal(a, b, what)
  assert(a ~= nil and b ~= nil, what .. ": missing")
  assert.are.same(a.shape, b.shape, what .. " shape")
  local d = (a:double() - b:double()):abs():max():item()
  assert(d == 0, ("%s: differs by %.3g (must be bitwise equal)"):format(what, d))
end

describe("nn.checkpoint and state moved in the forward", function()
  -- one training step of make(), plain or checkpointed; returns the module,
  -- the input's gradient and the output
  local function step(make, use_ckpt, shape)
    ember.manual_seed(5)
    local m = make()
    local x = ember.randn(table.unpack(shape)):requires_grad_()
    local y = use_ckpt and nn.checkpoint(m, x) or m(x)
    y:pow(2):sum():backward()
    return m, x.grad, y
  end

  it("BatchNorm2d's running statistics move once per step, as without checkpointing", function()
    local make = function() return nn.Sequential(nn.Conv2d(3, 4, 3, { padding = 1 }), nn.BatchNorm2d(4)) end
    local a, ga = step(make, false, { 4, 3, 5, 5 })
    local b, gb = step(make, true, { 4, 3, 5, 5 })
    assert.are.equal(1, b[2].num_batches_tracked:item())
    bitwise_equal(a[2].running_mean, b[2].running_mean, "running_mean")
    bitwise_equal(a[2].running_var, b[2].running_var, "running_var")
    bitwise_equal(ga, gb, "input gradient")
    bitwise_equal(a[1].weight.grad, b[1].weight.grad, "conv weight gradient")
  end)

  it("momentum = false (the cumulative average) counts the batch once", function()
    local make = function() return nn.BatchNorm1d(3, { momentum = false }) end
    local a = step(make, false, { 6, 3 })
    local b = step(make, true, { 6, 3 })
    assert.are.equal(1, b.num_batches_tracked:item())
    bitwise_equal(a.running_var, b.running_var, "running_var")
  end)

  it("InstanceNorm2d with track_running_stats moves them once", function()
    local make = function() return nn.InstanceNorm2d(3, { track_running_stats = true }) end
    local a = step(make, false, { 2, 3, 4, 4 })
    local b = step(make, true, { 2, 3, 4, 4 })
    bitwise_equal(a.running_mean, b.running_mean, "running_mean")
    bitwise_equal(a.running_var, b.running_var, "running_var")
  end)

  it("nested checkpoints move the statistics once too", function()
    local make = function() return nn.BatchNorm1d(3) end
    local a = step(make, false, { 5, 3 })
    ember.manual_seed(5)
    local bn = make()
    local x = ember.randn(5, 3):requires_grad_()
    nn.checkpoint(function(h) return nn.checkpoint(bn, h * 1) end, x):pow(2):sum():backward()
    assert.are.equal(1, bn.num_batches_tracked:item())
    bitwise_equal(a.running_mean, bn.running_mean, "running_mean")
  end)

  it("spectral_norm (parametrization and hook) iterates once, and the gradients are the plain run's", function()
    for _, hook in ipairs { false, true } do
      local make = function()
        local lin = nn.Linear(6, 5)
        if hook then nn.utils.spectral_norm(lin) else nn.utils.parametrizations.spectral_norm(lin) end
        return lin
      end
      local a, ga, ya = step(make, false, { 4, 6 })
      local b, gb, yb = step(make, true, { 4, 6 })
      local what = hook and "nn.utils.spectral_norm" or "parametrizations.spectral_norm"
      bitwise_equal(ya, yb, what .. " output")
      bitwise_equal(ga, gb, what .. " input gradient")
      local ua = hook and a.weight_u or a.parametrizations.weight[1]._u
      local ub = hook and b.weight_u or b.parametrizations.weight[1]._u
      bitwise_equal(ua, ub, what .. " u")
    end
  end)

  it("recomputing() is true only inside the backward's recompute", function()
    local ckpt = require "ember.nn.activation_checkpoint"
    local seen = {}
    local x = ember.randn(3):requires_grad_()
    assert.is_false(ckpt.recomputing())
    nn.checkpoint(function(h) seen[#seen + 1] = ckpt.recomputing(); return h * 2 end, x):sum():backward()
    assert.are.same({ false, true }, seen)
    assert.is_false(ckpt.recomputing())
  end)
end)

-- nn.FeedForward: a PyTorch user names the activation ("silu") and asks for
-- the gate; "silu" alone was refused and there was no `gated` option.
describe("nn.FeedForward's gated option and silu", function()
  local F = nn.functional
  local x = ember.randn(2, 3, 8, { dtype = "float64" })

  it("{activation = 'silu', gated = true} is SwiGLU: linear2(silu(linear1(x)) * linear3(x))", function()
    local ff = nn.FeedForward(8, 16, { activation = "silu", gated = true, dtype = "float64" })
    assert.are.equal("swiglu", ff.activation_name)
    assert.is_not_nil(ff.linear3)
    local want = ff.linear2(F.silu(ff.linear1(x)) * ff.linear3(x))
    assert(ember.allclose(ff(x), want, 1e-12, 1e-12))
    assert.truthy(tostring(ff):find("activation=swiglu", 1, true))
    -- the same parameters and state dict names as activation = "swiglu"
    local sw = nn.FeedForward(8, 16, { activation = "swiglu", dtype = "float64" })
    assert.are.equal(#sw:parameters(), #ff:parameters())
    sw:load_state_dict(ff:state_dict())
    assert(ember.equal(sw(x), ff(x)))
  end)

  it("gelu and relu gate too (GeGLU, ReGLU), and so does a function", function()
    local g = nn.FeedForward(8, 16, { activation = "gelu", gated = true, dtype = "float64" })
    assert.are.equal("geglu", g.activation_name)
    assert(ember.allclose(g(x), g.linear2(F.gelu(g.linear1(x)) * g.linear3(x)), 1e-12, 1e-12))
    local r = nn.FeedForward(8, 16, { activation = "relu", gated = true, dtype = "float64" })
    assert(ember.allclose(r(x), r.linear2(F.relu(r.linear1(x)) * r.linear3(x)), 1e-12, 1e-12))
    local t = nn.FeedForward(8, 16, { activation = ember.tanh, gated = true, dtype = "float64" })
    assert(ember.allclose(t(x), t.linear2(ember.tanh(t.linear1(x)) * t.linear3(x)), 1e-12, 1e-12))
  end)

  it("'silu' alone is the plain MLP with SiLU", function()
    local ff = nn.FeedForward(8, 16, { activation = "silu", dtype = "float64" })
    assert.is_nil(ff.linear3)
    assert(ember.allclose(ff(x), ff.linear2(F.silu(ff.linear1(x))), 1e-12, 1e-12))
    assert.are.same({ 2, 3, 8 }, nn.TransformerEncoderLayer(8, 2, { activation = "silu" })(x:float()).shape)
  end)

  it("a contradiction or a bad value is an error naming FeedForward at the caller's line", function()
    local ok, err = pcall(function() local _ = nn.FeedForward(8, 16, { activation = "swiglu", gated = false }) end)
    assert.is_false(ok)
    assert.truthy(err:find("probe27_modules_spec.lua:%d+: FeedForward: activation \"swiglu\" is gated, but gated = false"))
    ok, err = pcall(function() local _ = nn.FeedForward(8, 16, { gated = "yes" }) end)
    assert.is_false(ok)
    assert.truthy(err:find("FeedForward: gated must be true or false, got yes", 1, true))
  end)
end)

-- nn.ModuleList(other): PyTorch's ModuleList takes any iterable of modules.
describe("nn.ModuleList from another list", function()
  it("takes a ModuleList's or a Sequential's modules (the same ones), named 0, 1, ...", function()
    local a, b = nn.Linear(2, 3), nn.ReLU()
    local from_list = nn.ModuleList(nn.ModuleList { a, b })
    assert.are.equal(2, #from_list)
    assert.are.equal(a, from_list[1])
    assert.are.equal(b, from_list[2])
    local names = {}
    for k in pairs(from_list:state_dict()) do names[#names + 1] = k end
    table.sort(names)
    assert.are.same({ "0.bias", "0.weight" }, names)
    local from_seq = nn.ModuleList(nn.Sequential(a, b))
    assert.are.equal(2, #from_seq)
    assert.are.equal(a, from_seq[1])
  end)

  it("refuses another module, naming it", function()
    local ok, err = pcall(function() local _ = nn.ModuleList(nn.ModuleDict { { "a", nn.ReLU() } }) end)
    assert.is_false(ok)
    assert.truthy(err:find("got a module (ModuleDict)", 1, true))
  end)
end)

-- PyTorch's loop `for name, p in model.named_parameters():` written in Lua
-- called the returned map: "attempt to call a ember.List value".
describe("named_* as PyTorch's loops", function()
  local function model()
    return nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
  end

  it("for name, p in m:named_parameters() walks the parameters in registration order", function()
    local m = model()
    local names, shapes = {}, {}
    for name, p in m:named_parameters() do names[#names + 1], shapes[#shapes + 1] = name, p.shape[1] end
    assert.are.same({ "1.weight", "1.bias", "2.weight", "2.bias", "3.2.weight", "3.2.bias" }, names)
    assert.are.same({ 3, 3, 3, 3, 1, 1 }, shapes)
    assert.are.equal(m[1].weight, m:named_parameters()["1.weight"]) -- still the map
    local again = {}
    for name in pairs(m:named_parameters()) do again[#again + 1] = name end
    assert.are.same(names, again)
  end)

  it("named_buffers, named_children and named_modules too; ipairs on the lists as before", function()
    local m = model()
    local got = {}
    for name in m:named_buffers() do got[#got + 1] = name end
    assert.are.same({ "2.running_mean", "2.running_var", "2.num_batches_tracked" }, got)
    got = {}
    for name, child in m:named_children() do got[#got + 1] = name .. "=" .. child.__name end
    assert.are.same({ "1=Linear", "2=BatchNorm1d", "3=Sequential" }, got)
    got = {}
    for name, mod in m:named_modules() do got[#got + 1] = name .. "=" .. mod.__name end
    assert.are.same({ "=Sequential", "1=Linear", "2=BatchNorm1d", "3=Sequential", "3.1=ReLU", "3.2=Linear" }, got)
    local nc = m:named_children()
    assert.are.equal(3, #nc)
    assert.are.equal("BatchNorm1d", nc[2][2].__name)
    -- one result walked twice starts over
    local np, n = m:named_parameters(), 0
    for _ in np do n = n + 1 end
    for _ in np do n = n + 1 end
    assert.are.equal(12, n)
  end)
end)
