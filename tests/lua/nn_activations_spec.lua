-- The activation modules and losses composed in lua/ember/_functional.lua
-- and their modules: nn.Tanh, Sigmoid, Softmax, LogSoftmax, LeakyReLU, ELU,
-- Softplus, BCELoss, BCEWithLogitsLoss, NLLLoss, L1Loss, SmoothL1Loss.
-- Values and gradients against PyTorch 1.13 in float64 through the
-- committed fixtures (tests/gen_nn_fixtures.py -> tests/fixtures/nn_modern.lua),
-- float64 gradchecks, the extremes (logits of +-1e4, probabilities of 0 and
-- 1: finite losses and gradients), errors at the caller's line, printing.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local compare = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/nn_modern.lua")
local F64 = { dtype = "float64" }
local raises_here = compare.raises_here
local function case(name) return compare.case(fixtures, name) end

local function finite(t) return t:isfinite():all():item() end

describe("activations and binary losses match PyTorch (float64)", function()
  local MODULES = {
    Tanh = function() return nn.Tanh() end,
    Sigmoid = function() return nn.Sigmoid() end,
    Softmax_dim2 = function(c) return nn.Softmax(c.config.dim) end,
    LogSoftmax = function(c) return nn.LogSoftmax(c.config.dim) end,
    LeakyReLU = function(c) return nn.LeakyReLU(c.config.negative_slope) end,
    ELU = function(c) return nn.ELU(c.config.alpha) end,
    Softplus = function(c) return nn.Softplus({ beta = c.config.beta, threshold = c.config.threshold }) end,
  }
  for name, make in pairs(MODULES) do
    it(name, function()
      local c = case(name)
      compare.module(make(c), c)
    end)
  end

  for _, name in ipairs { "BCEWithLogitsLoss_mean", "BCEWithLogitsLoss_sum", "BCEWithLogitsLoss_none",
                          "BCEWithLogitsLoss_weights", "BCELoss_mean", "BCELoss_weight_sum" } do
    it(name, function()
      local c = case(name)
      local o = { reduction = c.config.reduction }
      -- buffers of the right shape, which load_state_dict fills from the fixture
      for k, v in pairs(c.state) do o[k] = ember.zeros(compare.T(v).shape, F64) end
      local m = (name:find("Logits") and nn.BCEWithLogitsLoss or nn.BCELoss)(o)
      compare.module(m, c, { forward = function(mod, i) return mod(i.x, i.target) end })
    end)
  end

  for _, name in ipairs { "NLLLoss_mean", "NLLLoss_weight_ignore", "NLLLoss_sum_ignore", "NLLLoss_none" } do
    it(name, function()
      local c = case(name)
      local o = { reduction = c.config.reduction, ignore_index = c.config.ignore_index }
      if c.state.weight then o.weight = ember.zeros(4, F64) end
      compare.module(nn.NLLLoss(o), c, { forward = function(mod, i) return mod(i.x, i.target) end })
    end)
  end

  for name, make in pairs { L1Loss_mean = function() return nn.L1Loss() end,
                            L1Loss_sum = function() return nn.L1Loss("sum") end,
                            SmoothL1Loss_beta05 = function() return nn.SmoothL1Loss({ beta = 0.5 }) end,
                            SmoothL1Loss_none = function() return nn.SmoothL1Loss({ reduction = "none" }) end } do
    it(name, function()
      compare.module(make(), case(name), { forward = function(mod, i) return mod(i.x, i.target) end })
    end)
  end
end)

describe("activations and binary losses: float64 gradchecks", function()
  local function gc(name, f, inputs)
    ember.manual_seed(4321)
    gradcheck.check(f, inputs, { name = name })
  end

  it("every activation", function()
    local x = ember.randn({ 3, 4 }, F64) * 2
    for name, m in pairs { Tanh = nn.Tanh(), Sigmoid = nn.Sigmoid(), Softmax = nn.Softmax(1),
                           LogSoftmax = nn.LogSoftmax(), LeakyReLU = nn.LeakyReLU(0.1), ELU = nn.ELU(0.7),
                           Softplus = nn.Softplus({ beta = 1.5, threshold = 3 }) } do
      gc(name, function(a) return m(a) end, { x:clone() })
    end
  end)

  it("both binary losses, with weights", function()
    local y = ember.rand({ 3, 4 }, F64)
    local w, pw = ember.rand({ 3, 4 }, F64) + 0.5, ember.rand({ 4 }, F64) * 2
    gc("BCEWithLogits", function(x) return ember.binary_cross_entropy_with_logits(x, y, { weight = w, pos_weight = pw }) end,
      { ember.randn({ 3, 4 }, F64) * 3 })
    gc("BCE", function(p) return ember.binary_cross_entropy(p, y, { reduction = "sum" }) end,
      { ember.rand({ 3, 4 }, F64) * 0.8 + 0.1 })
  end)

  it("NLL, L1 and smooth L1", function()
    local ids = ember.tensor({ 2, 1, 3 }, { dtype = "int64" })
    local w = ember.rand({ 4 }, F64) + 0.5
    gc("NLL", function(x) return ember.nll_loss(x, ids, { weight = w, ignore_index = 1 }) end,
      { ember.randn({ 3, 4 }, F64) })
    local t = ember.randn({ 3, 4 }, F64)
    gc("L1", function(x) return ember.l1_loss(x, t) end, { t + ember.randn({ 3, 4 }, F64):sign() * 0.5 })
    gc("smooth L1", function(x) return ember.smooth_l1_loss(x, t, { beta = 2 }) end, { ember.randn({ 3, 4 }, F64) })
  end)
end)

describe("activations and binary losses at the extremes", function()
  it("BCEWithLogits: finite for any logit, the gradient sigmoid(x) - y (1/2 - y at 0)", function()
    for _, dt in ipairs { "float32", "float64", "bfloat16" } do
      local x = ember.tensor({ -1e4, -50, 0, 50, 1e4 }):to(dt):requires_grad_()
      local y = ember.tensor { 1, 0, 1, 1, 0 }
      local loss = nn.BCEWithLogitsLoss({ reduction = "sum" })(x, y)
      assert.is_true(finite(loss), dt)
      loss:backward()
      local want = { -1, 0, -0.5, 0, 1 }
      for i, v in ipairs(want) do assert.is_true(math.abs(x.grad[i]:item() - v) < 1e-2, dt .. " grad " .. i) end
    end
    -- log(1 + e^-50) is e^-50, not 0: no cancellation on the flat side
    local l = ember.binary_cross_entropy_with_logits(ember.tensor({ 50 }, F64), ember.tensor({ 1 }, F64))
    assert.is_true(math.abs(l:item() - math.exp(-50)) < 1e-30)
  end)

  it("BCE: probabilities 0 and 1 give PyTorch's clamped loss (100 a wrong sure answer) and a finite gradient", function()
    for _, dt in ipairs { "float32", "float64", "bfloat16" } do
      local p = ember.tensor({ 0, 1, 0, 1 }):to(dt):requires_grad_()
      local y = ember.tensor { 1, 0, 0, 1 }
      local loss = ember.binary_cross_entropy(p, y, { reduction = "none" })
      assert.is_true(math.abs(loss[1]:item() - 100) < 1e-3 and math.abs(loss[2]:item() - 100) < 1e-3, dt)
      assert.is_true(loss[3]:item() == 0 and loss[4]:item() == 0, dt)
      loss:sum():backward()
      assert.is_true(finite(p.grad), dt)
    end
  end)

  it("Softplus: linear above the threshold, e^x far below, finite gradients", function()
    local x = ember.tensor({ -100, -30, 0, 19, 21, 1e4 }, F64):requires_grad_()
    local y = nn.Softplus()(x)
    assert.is_true(math.abs(y[1]:item() - math.exp(-100)) < 1e-50)
    assert.is_true(math.abs(y[3]:item() - math.log(2)) < 1e-15)
    assert.are.equal(21, y[5]:item())
    assert.are.equal(1e4, y[6]:item())
    y:sum():backward()
    assert.is_true(finite(x.grad))
    assert.is_true(math.abs(x.grad[3]:item() - 0.5) < 1e-15)
  end)
end)

describe("activation and loss modules", function()
  it("print their options, as PyTorch's", function()
    assert.are.equal("Softmax(dim=-1)", tostring(nn.Softmax()))
    assert.are.equal("LogSoftmax(dim=2)", tostring(nn.LogSoftmax(2)))
    assert.are.equal("LeakyReLU(negative_slope=0.01)", tostring(nn.LeakyReLU()))
    assert.are.equal("ELU(alpha=1)", tostring(nn.ELU()))
    assert.are.equal("Softplus(beta=1, threshold=20)", tostring(nn.Softplus()))
    assert.are.equal("BCEWithLogitsLoss(reduction=mean)", tostring(nn.BCEWithLogitsLoss()))
    assert.are.equal("Tanh()", tostring(nn.Tanh()))
    assert.are.equal("NLLLoss(reduction=mean, ignore_index=3)", tostring(nn.NLLLoss({ ignore_index = 3 })))
    assert.are.equal("SmoothL1Loss(beta=1, reduction=sum)", tostring(nn.SmoothL1Loss("sum")))
  end)

  it("raise clear errors at the caller's line", function()
    raises_here(function() nn.Softmax(0) end, "Softmax: dim must be a non-zero integer (1-based; -1 is the last), got 0")
    raises_here(function() nn.LeakyReLU("a") end, "LeakyReLU: negative_slope must be a number, got string")
    raises_here(function() nn.Softplus({ beta = 0 }) end, "Softplus: beta must be a number > 0, got 0")
    raises_here(function() nn.BCELoss({ reduction = "avg" }) end,
      "BCELoss: reduction must be \"mean\", \"sum\" or \"none\", got avg")
    raises_here(function() nn.BCEWithLogitsLoss({ pos_weight = 2 }) end, "BCEWithLogitsLoss: pos_weight must be a tensor, got number")
    raises_here(function() nn.BCEWithLogitsLoss()(ember.randn(3), ember.randn(4)) end,
      "ember.binary_cross_entropy_with_logits: target shape [4] must equal input shape [3]")
    raises_here(function() ember.softplus(ember.randn(2), { bet = 1 }) end,
      "ember.softplus: unknown option 'bet' (expected beta, threshold)")
    raises_here(function() nn.Tanh()(3) end, "Tanh.forward: expected a tensor, got number")
    raises_here(function() nn.BCELoss()(ember.tensor { 1.5, -0.2 }, ember.tensor { 1, 0 }) end,
      "ember.binary_cross_entropy: input must hold probabilities in [0, 1]")
    raises_here(function() nn.NLLLoss()(ember.randn(3, 4), ember.tensor({ 1, 5, 2 }, { dtype = "int64" })) end,
      "ember.nll_loss: target ids must be in 1..4 (1-based), got 1..5")
    raises_here(function() nn.NLLLoss()(ember.randn(3, 4), ember.tensor { 1, 2, 2 }) end,
      "ember.nll_loss: target must be int64 class ids (1-based), got float32")
    raises_here(function() nn.SmoothL1Loss({ beta = "x" }) end, "SmoothL1Loss: beta must be a number, got string")
    raises_here(function() nn.L1Loss({ reduction = "avg" }) end,
      "L1Loss: reduction must be \"mean\", \"sum\" or \"none\", got avg")
  end)
end)

describe("nn.Parameter", function()
  it("makes a leaf requiring grad that a module registers, as torch.nn.Parameter", function()
    local Scale = nn.Module:extend("Scale")
    function Scale:__init(n) self.gain = nn.Parameter(ember.ones(n)) end
    function Scale:forward(x) return x * self.gain end
    local m = Scale(3)
    assert.are.same({ "gain" }, { table.unpack(m:parameter_names()) })
    local x = ember.randn(2, 3)
    m(x):sum():backward()
    assert.is_true(ember.allclose(m.gain.grad, x:sum(1)))
    -- detached from the graph it came from, sharing its storage
    local a = ember.randn(2):requires_grad_()
    local p = nn.Parameter(a * 2)
    assert.is_true(p.requires_grad and p.is_leaf)
    local frozen = nn.Parameter(ember.ones(2), false)
    assert.is_false(frozen.requires_grad)
    raises_here(function() nn.Parameter(3) end, "nn.Parameter: expected a tensor, got number")
    raises_here(function() nn.Parameter(ember.ones(2, "int64")) end,
      "nn.Parameter: only floating-point tensors can require grad, got int64")
  end)
end)
