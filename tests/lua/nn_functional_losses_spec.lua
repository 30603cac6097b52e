-- torch.nn.functional's losses and pad as a PyTorch 1.13 user calls them:
-- F.cross_entropy with weight= and with class-probability targets,
-- F.ctc_loss with an empty target and unbatched, F.pad's negative amounts in
-- reflect / replicate / circular mode (tests/gen_nn_functional_losses_fixtures.py writes
-- tests/fixtures/nn_functional_losses.lua), float64 gradchecks, errors of
-- nn.functional at the caller's line; and the losses' positional arguments
-- in torch's order (tests/fixtures/sdpa_losses_positional.lua's losses, written by
-- tests/gen_sdpa_losses_positional_fixtures.py).
local ember = require "ember"
local F = ember.nn.functional
local parity = require "tests.lua.helpers.parity"
local gradcheck = require "tests.lua.helpers.gradcheck"
local raises_here = parity.raises_here
local fx = dofile("tests/fixtures/nn_functional_losses.lua")

local function T(spec)
  local dtype = spec.dtype or "float64"
  if #spec.shape == 0 then return ember.tensor(spec.data[1], dtype) end
  return ember.tensor(spec.data, dtype):view(spec.shape)
end

-- out and the gradient of sum(out * R) against the fixture's
local function check(what, fn, x, c)
  local a = x:clone():requires_grad_()
  local out = fn(a)
  parity.check(what .. " out", out, T(c.out), 1e-12)
  local total = (out * T(c.R)):sum()
  total:backward()
  parity.check(what .. " grad", a.grad, T(c.grad), 1e-10)
end

describe("F.cross_entropy as torch's", function()
  it("takes weight (with label_smoothing and ignore_index), each reduction", function()
    local n = 0
    for i, c in ipairs(fx.ce) do
      if c.target.dtype == "int64" then
        local o = { weight = T(c.opts.weight), label_smoothing = c.opts.label_smoothing, reduction = c.opts.reduction }
        if c.opts.ignore_index then o.ignore_index = c.opts.ignore_index + 1 end
        local y = T(c.target) + 1
        check("ce " .. i, function(a) return F.cross_entropy(a, y, o) end, T(c.x), c)
        n = n + 1
      end
    end
    assert.are.equal(9, n)
  end)

  it("takes class-probability targets, with label_smoothing and weight", function()
    local n = 0
    for i, c in ipairs(fx.ce) do
      if c.target.dtype == nil then
        local o = { label_smoothing = c.opts.label_smoothing, reduction = c.opts.reduction }
        if c.opts.weight then o.weight = T(c.opts.weight) end
        check("ce soft " .. i, function(a) return F.cross_entropy(a, T(c.target), o) end, T(c.x), c)
        n = n + 1
      end
    end
    assert.are.equal(9, n)
  end)

  it("float64 gradchecks of the weighted and soft forms", function()
    local x = ember.randn({ 4, 3 }, { dtype = "float64" })
    local y, w = ember.tensor({ 1, 3, 2, 3 }, "int64"), ember.tensor({ 1, 2, 0.5 }, "float64")
    local p = ember.softmax(ember.randn({ 4, 3 }, { dtype = "float64" }), 2)
    gradcheck.check(function(a) return F.cross_entropy(a, y, { weight = w, label_smoothing = 0.2 }) end, { x:clone() })
    gradcheck.check(function(a, t) return F.cross_entropy(a, t, { weight = w, label_smoothing = 0.1 }) end,
      { x:clone(), p:clone() })
  end)

  it("targets all ignored: 0 with zero gradients with a weight too, as without (PyTorch: NaN)", function()
    local x = ember.randn({ 3, 4 }, { dtype = "float64" })
    local y = ember.tensor({ -100, -100, -100 }, "int64")
    for _, o in ipairs { {}, { weight = ember.rand({ 4 }, { dtype = "float64" }) + 0.5 },
      { weight = ember.ones({ 4 }, { dtype = "float64" }), label_smoothing = 0.2 } } do
      local a = x:clone():requires_grad_()
      local loss = F.cross_entropy(a, y, o)
      assert.are.equal(0, loss:item())
      loss:backward()
      assert.are.equal(0, a.grad:abs():sum():item())
      local m = ember.nn.CrossEntropyLoss(o)(x, y)
      assert.are.equal(0, m:item())
    end
  end)

  it("refuses unknown options and non-table options at the caller's line", function()
    local x, y = ember.randn(2, 3), ember.tensor({ 1, 2 }, "int64")
    raises_here(function() F.cross_entropy(x, y, { weight = ember.ones(3), pos_weight = 1 }) end,
      "nn.functional.cross_entropy: unknown option 'pos_weight'")
    raises_here(function() F.cross_entropy(x, y, "sum") end, "nn.functional.cross_entropy: options must be a table")
    raises_here(function() F.cross_entropy(x, ember.rand(2, 4)) end, "must have the logits' shape [2, 3]")
  end)
end)

describe("F.ctc_loss as torch's", function()
  it("an empty target has one end state (was counted twice: log 2 too little)", function()
    for _, c in ipairs(fx.ctc) do
      if c.name == "empty_target" then
        check("ctc empty " .. c.reduction, function(a)
          return F.ctc_loss(a:log_softmax(-1), T(c.targets) + 1, c.input_lengths, c.target_lengths,
            { reduction = c.reduction })
        end, T(c.logits), c)
      end
    end
  end)

  it("takes the unbatched form [T, C] with 1-d targets (0-d lengths too)", function()
    for _, c in ipairs(fx.ctc) do
      if c.name == "unbatched" then
        check("ctc unbatched " .. c.reduction, function(a)
          return F.ctc_loss(a:log_softmax(-1), T(c.targets) + 1, c.input_lengths, c.target_lengths,
            { reduction = c.reduction })
        end, T(c.logits), c)
        local lp = T(c.logits):log_softmax(-1)
        local got = F.ctc_loss(lp, T(c.targets) + 1, ember.tensor(c.input_lengths[1], "int64"),
          ember.tensor(c.target_lengths[1], "int64"), { reduction = c.reduction })
        parity.check("ctc unbatched 0-d lengths", got, T(c.out), 1e-12)
        local nn_got = ember.nn.CTCLoss { reduction = c.reduction }(lp, T(c.targets) + 1, c.input_lengths,
          c.target_lengths)
        parity.check("nn.CTCLoss unbatched", nn_got, T(c.out), 1e-12)
      end
    end
  end)
end)

describe("F.pad's negative amounts", function()
  it("crop in reflect, replicate and circular modes as torch's", function()
    assert.are.equal(18, #fx.pad)
    for i, c in ipairs(fx.pad) do
      check(("pad %d %s {%s}"):format(i, c.mode, table.concat(c.pad, ", ")), function(a)
        return F.pad(a, c.pad, c.mode)
      end, T(c.x), c)
    end
  end)

  it("refuses a crop past the dim and a circular wrap past what is left", function()
    local x = ember.randn(1, 1, 5)
    raises_here(function() F.pad(x, { -3, -3 }, "reflect") end, "ember.pad: cropping 6 of dim 3's 5 elements")
    raises_here(function() F.pad(x, { -3, 4 }, "circular") end,
      "ember.pad: circular padding of (-3, 4) needs more elements in dim 3 than its 2")
  end)
end)

describe("nn.functional's core-op errors at the caller's line", function()
  it("mse_loss's shapes and one_hot's labels", function()
    raises_here(function() F.mse_loss(ember.zeros(2, 3), ember.ones(3)) end,
      "ember.mse_loss: input [2, 3] and target [3] must have the same shape")
    raises_here(function() F.one_hot(ember.tensor({ 1, 5 }, "int64"), 4) end,
      "ember.one_hot: label 5 at {2} is out of range 1..4 (1-based)")
  end)
end)

describe("nn.functional's losses take torch's positional arguments (they were dropped)", function()
  local fx = dofile("tests/fixtures/sdpa_losses_positional.lua")
  local T = function(spec) return parity.T(spec, "float64") end
  local L = fx.losses
  local x, y, w = T(L.x), T(L.y), T(L.w)
  local a, b, logp, logq = T(L.a), T(L.b), T(L.logp), T(L.logq)
  local p, t, bw, pw = T(L.p), T(L.t), T(L.bw), T(L.pw)

  it("as torch.nn.functional's, each against PyTorch 1.13", function()
    local got = {
      cross_entropy = F.cross_entropy(x, y, w, nil, 2, nil, "sum", 0.1),
      nll_loss = F.nll_loss(F.log_softmax(x, -1), y, w, nil, 2, nil, "sum"),
      l1_loss = F.l1_loss(a, b, nil, nil, "sum"),
      smooth_l1_loss = F.smooth_l1_loss(a, b, nil, nil, "sum", 0.5),
      huber_loss = F.huber_loss(a, b, "sum", 0.7),
      kl_div = F.kl_div(logp, logq, nil, nil, "batchmean", true),
      binary_cross_entropy = F.binary_cross_entropy(p, t, bw, nil, nil, "sum"),
      binary_cross_entropy_with_logits = F.binary_cross_entropy_with_logits(a, t, bw, nil, nil, "mean", pw),
    }
    for name, v in pairs(got) do parity.check(name, v, T(L[name]), 1e-12) end
    -- positional, then an options table for the rest
    parity.check("weight, then options", F.cross_entropy(x, y, w, { ignore_index = 2, reduction = "sum",
      label_smoothing = 0.1 }), T(L.cross_entropy), 1e-12)
    parity.check("options alone", F.l1_loss(a, b, { reduction = "sum" }), T(L.l1_loss), 1e-12)
  end)

  it("refuses torch's deprecated size_average / reduce, too many arguments, a name given twice, at the user's line", function()
    raises_here(function() F.l1_loss(a, b, false) end,
      "nn.functional.l1_loss: argument 3 is torch's size_average, deprecated: give reduction")
    raises_here(function() F.cross_entropy(x, y, nil, nil, -100, true) end,
      "nn.functional.cross_entropy: argument 6 is torch's reduce, deprecated")
    raises_here(function() F.nll_loss(x, y, "sum") end,
      "nn.functional.nll_loss: options must be a table ({reduction = ...}), and weight (argument 3 by position) a tensor, "
      .. "got \"sum\"")
    raises_here(function() F.huber_loss(a, b, "sum", 0.7, 1) end, "too many arguments")
    raises_here(function() F.nll_loss(x, y, w, { weight = w }) end, "weight is given twice")
  end)
end)
