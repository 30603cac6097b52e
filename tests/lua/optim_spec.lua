-- ember.optim: SGD / Adam / AdamW / RMSprop / Adagrad trajectories, clip_grad_norm and the
-- warmup schedules against PyTorch 1.13 (tests/fixtures/nn_optim.lua, made by
-- tests/gen_nn_fixtures.py), the fused C update against the same update
-- composed of core ops, state save/restore, and the error paths. Then
-- NAdam / RAdam / Adamax / Adadelta / amsgrad and LinearLR, ConstantLR,
-- PolynomialLR, CosineAnnealingWarmRestarts, OneCycleLR, CyclicLR and
-- SequentialLR (tests/fixtures/nn_optim_more.lua).
local ember = require "ember"
local optim = require "ember.optim"
local nn = require "ember.nn"
local compare = require "tests.lua.helpers.parity"
local T, max_rel = compare.T, compare.max_rel

local F = dofile("tests/fixtures/nn_optim.lua")

-- Runs `steps` steps of opt on sum(A * p^2 + B * p) (A, B, p0 from the
-- fixture table `src`, nn_optim.lua's by default); returns p after each.
local function run(make, steps, dtype, composed, p0, src)
  src = src or F.optim
  local A, B = T(src.A, dtype), T(src.B, dtype)
  local p = (p0 or T(src.p0, dtype)):clone():requires_grad_(true)
  local opt = make({ p })
  opt.composed = composed
  local traj = {}
  for i = 1, steps do
    opt:zero_grad()
    ;(A * p * p + B * p):sum():backward()
    opt:step()
    traj[i] = p:detach():clone()
  end
  return traj, opt, p
end

local function describe_options(o)
  local keys, parts = {}, {}
  for k in pairs(o) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = o[k]
    if type(v) == "table" then v = "{" .. table.concat(v, ",") .. "}" end
    parts[#parts + 1] = k .. "=" .. tostring(v)
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function options_of(c)
  local o = {}
  for k, v in pairs(c.options) do o[k] = v end
  return o
end

describe("optimizers match PyTorch", function()
  for _, c in ipairs(F.optim.cases) do
    local label = c.optimizer .. " " .. describe_options(c.options)
    for _, dtype in ipairs { "float64", "float32" } do
      for _, composed in ipairs { false, true } do
        it(("%s %s %s"):format(label, dtype, composed and "(composed ops)" or "(fused kernel)"), function()
          local traj = run(function(ps) return optim[c.optimizer](ps, options_of(c)) end, F.optim.steps,
            dtype, composed)
          local tol = dtype == "float64" and 1e-12 or 2e-5
          for i, want in ipairs(c.trajectory) do
            local e = max_rel(traj[i], T(want))
            assert(e <= tol, ("step %d: relative error %.3g > %.1g"):format(i, e, tol))
          end
        end)
      end
    end
  end
end)

describe("optimizer state", function()
  it("state_dict / load_state_dict resume the same trajectory", function()
    for _, name in ipairs { "SGD", "Adam", "AdamW", "RMSprop", "Adagrad" } do
      local o = { lr = 0.05, momentum = (name == "SGD" or name == "RMSprop") and 0.9 or nil, weight_decay = 0.01 }
      local full = run(function(ps) return optim[name](ps, o) end, 5)
      -- 3 steps, save, restore into a fresh optimizer, 2 more steps
      local _, opt, p = run(function(ps) return optim[name](ps, o) end, 3)
      local sd = opt:state_dict()
      local q = p:detach():clone()
      local resumed = run(function(ps)
        local fresh = optim[name](ps, o)
        fresh:load_state_dict(sd)
        return fresh
      end, 2, nil, nil, q)
      assert.is_true(resumed[2] == full[5], name)
    end
  end)

  it("state_dict has PyTorch's layout", function()
    local _, opt = run(function(ps) return optim.Adam(ps, { lr = 0.1 }) end, 2)
    local sd = opt:state_dict()
    assert.are.equal(2, sd.state[1].step)
    assert.are.same({ 3, 4 }, sd.state[1].exp_avg.shape)
    assert.are.same({ 1 }, sd.param_groups[1].params)
    assert.are.equal(0.1, sd.param_groups[1].lr)
  end)

  it("load_state_dict rejects state of another shape or layout", function()
    local _, opt = run(function(ps) return optim.Adam(ps, { lr = 0.1 }) end, 1)
    local other = optim.Adam({ ember.zeros(2, 2, { requires_grad = true }) })
    local ok, err = pcall(other.load_state_dict, other, opt:state_dict())
    assert.is_false(ok)
    assert.truthy(err:find("Adam: load_state_dict: state 'exp_a", 1, true))
    local two = optim.Adam({ ember.zeros(1, { requires_grad = true }), ember.zeros(1, { requires_grad = true }) })
    ok, err = pcall(two.load_state_dict, two, opt:state_dict())
    assert.truthy(err:find("group 1 has 1 parameters in the state, 2 here", 1, true))
  end)

  it("keeps frozen parameters and skips them, as PyTorch (fine-tuning)", function()
    local m = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    m[1].weight:requires_grad_(false)
    local frozen = m[1].weight:clone()
    local opt = optim.AdamW(m, { lr = 0.1 })
    m(ember.randn(4, 3)):sum():backward()
    assert.is_nil(m[1].weight.grad)
    local before = m[2].weight:clone()
    opt:step()
    assert.is_true(m[1].weight == frozen)
    assert.is_false(m[2].weight == before)
  end)

  it("takes a module, parameter groups, and skips parameters without gradients", function()
    local m = nn.Linear(3, 2)
    local opt = optim.SGD(m, { lr = 0.1 })
    assert.are.equal(2, #opt.param_groups[1].params)
    local before = m.bias:clone()
    m.weight:sum():backward() -- bias gets no gradient
    opt:step()
    assert.is_true(m.bias == before)
    local g = optim.AdamW({ { params = { m.weight }, lr = 0.5 }, { params = { m.bias }, weight_decay = 0 } }, { lr = 0.01 })
    assert.are.equal(0.5, g.param_groups[1].lr)
    assert.are.equal(0.01, g.param_groups[2].lr)
    assert.are.equal(0.01, g.param_groups[1].weight_decay)
    assert.are.equal(0, g.param_groups[2].weight_decay)
  end)

  it("checks options with clear errors", function()
    local p = { ember.zeros(2, { requires_grad = true }) }
    assert.has_error(function() optim.SGD(p, {}) end, "SGD: lr is required (give {lr = ...})")
    assert.has_error(function() optim.SGD(p, { lr = 0.1, nesterov = true }) end,
      "SGD: nesterov needs momentum > 0 and dampening 0, got momentum=0, dampening=0")
    assert.has_error(function() optim.Adam(p, { betas = { 0.9, 1 } }) end,
      "Adam: betas must be {beta1, beta2} with each in [0, 1), got {0.9, 1}")
    assert.has_error(function() optim.AdamW(p, { lr = 0.1, momentum = 0.9 }) end,
      "AdamW: unknown option 'momentum' (options: amsgrad, betas, capturable, eps, foreach, lr, maximize, weight_decay)")
    local leaf = ember.zeros(2, { requires_grad = true })
    assert.has_error(function() optim.Adam({ leaf * 2 }) end,
      "Adam: group 1, parameter 1 is not a leaf (the result of an op): optimize the tensors it was computed "
      .. "from, or p:detach():requires_grad_()")
    assert.has_error(function() optim.Adam({}) end, "Adam: got an empty parameter list")
    assert.has_error(function() optim.RMSprop(p, { alpha = 1.5 }) end, "RMSprop: alpha must be a number in [0, 1], got 1.5")
    assert.has_error(function() optim.RMSprop(p, { centered = 1 }) end, "RMSprop: centered must be a boolean, got 1")
    assert.has_error(function() optim.Adagrad(p, { lr_decay = -1 }) end, "Adagrad: lr_decay must be a number >= 0, got -1")
  end)

  it("the fused C call checks its tensors", function()
    local p = ember.zeros(3, { requires_grad = true })
    local g = ember.zeros(4)
    assert.has_error(function() ember.adam_step(p, g, ember.zeros(3), ember.zeros(3), 0.1, 0.9, 0.999, 1e-8, 0, 1, false) end,
      "ember.adam_step: the gradient has shape [4], the parameter [3]")
    assert.has_error(function() ember.adam_step(p, ember.zeros(3), ember.zeros(3, { dtype = "float64" }), ember.zeros(3), 0.1, 0.9, 0.999, 1e-8, 0, 1, false) end,
      "ember.adam_step: exp_avg is float64, the parameter float32")
    assert.has_error(function() ember.adam_step(p, ember.zeros(3), ember.zeros(3), ember.zeros(3), 0.1, 0.9, 0.999, 1e-8, 0, 0, true) end,
      "ember.adamw_step: step 0, expected >= 1")
    assert.has_error(function() ember.sgd_step(p, ember.zeros(3), nil, 0.1, 0.9, 0, 0, false, true) end,
      "ember.sgd_step: momentum 0.9 needs a momentum buffer")
    local q = ember.zeros(3, { dtype = "int64" })
    assert.has_error(function() ember.sgd_step(q, q, nil, 0.1, 0, 0, 0, false, true) end,
      "ember.sgd_step: parameters must be float32, float64 or bfloat16, got int64")
  end)
end)

describe("clip_grad_norm", function()
  for _, c in ipairs(F.clip) do
    it("matches torch.nn.utils.clip_grad_norm_ with max_norm " .. c.max_norm, function()
      local a, b = T(c.a):requires_grad_(true), T(c.b):requires_grad_(true)
      ;((a * a * 1.5):sum() + (b * 2):sum() + a:sum() * b:sum()):backward()
      assert.is_true(max_rel(a.grad, T(c.grad_a)) < 1e-12)
      local total = optim.clip_grad_norm({ a, b }, c.max_norm)
      assert.are.near(c.total_norm, total, 1e-12 * c.total_norm)
      assert.is_true(max_rel(a.grad, T(c.clipped_a)) < 1e-12)
      assert.is_true(max_rel(b.grad, T(c.clipped_b)) < 1e-12)
    end)
  end

  it("sums the squares in one C call, as the squares summed op by op", function()
    local core = require "ember.core"
    ember.manual_seed(3)
    local ts = { ember.randn(300, 257), ember.randn(70000):double(), ember.randn(33, 9):bfloat16() }
    local function exact(list)
      local w = 0
      for _, t in ipairs(list) do w = w + (t:double() * t:double()):sum():item() end
      return w
    end
    local want = exact(ts)
    assert.are.near(want, core._sum_squares(ts), 1e-12 * want) -- float64 sums
    assert.are.near(want, core._sum_squares(ts, true), 1e-5 * want) -- float32 sums there
    local strided = { ember.randn(40, 30):t() } -- not contiguous: composed
    assert.are.near(exact(strided), core._sum_squares(strided), 1e-5 * exact(strided))
    assert.are.equal(0, core._sum_squares({}))
    assert.has_error(function() core._sum_squares({ ember.tensor({ 1, 2 }, { dtype = "int64" }) }) end)
    -- the norm clip_grad_norm reports and uses
    local p = ember.randn(5000):requires_grad_()
    ;(p * 3):sum():backward()
    assert.are.near(3 * math.sqrt(5000), optim.clip_grad_norm({ p }, 1e9), 1e-9)
  end)

  it("supports the max norm, modules, and no gradients at all", function()
    local m = nn.Linear(2, 2)
    assert.are.equal(0, optim.clip_grad_norm(m, 1))
    local p = ember.tensor({ 1, -3, 2 }, { requires_grad = true })
    ;(p * ember.tensor({ 1, -3, 2 })):sum():backward()
    assert.are.equal(3, optim.clip_grad_norm({ p }, 1.5, math.huge))
    assert.are.near(-1.5, p.grad:totable()[2], 1e-5)
    assert.has_error(function() optim.clip_grad_norm({ p }, -1) end,
      "clip_grad_norm: max_norm must be a number >= 0, got -1")
    assert.has_error(function() optim.clip_grad_norm({ p }, 1, 0) end,
      "clip_grad_norm: norm_type must be a number > 0, math.huge or \"inf\", got 0")
  end)

  it("takes any p-norm, as torch's norm_type", function()
    -- gradients {1, -3, 2} and {4}: the 1-norm is 10, the 3-norm (1 + 27 + 8 + 64)^(1/3)
    for _, c in ipairs { { 1, 10 }, { 3, 100 ^ (1 / 3) }, { 2, math.sqrt(30) } } do
      local a = ember.tensor({ 1, -3, 2 }, { dtype = "float64", requires_grad = true })
      local b = ember.tensor({ 4 }, { dtype = "float64", requires_grad = true })
      ;((a * ember.tensor({ 1, -3, 2 }, { dtype = "float64" })):sum() + b * 4):sum():backward()
      local total = optim.clip_grad_norm({ a, b }, 2, c[1])
      assert.are.near(c[2], total, 1e-12 * c[2])
      local coef = 2 / (c[2] + 1e-6)
      assert.are.near(-3 * coef, a.grad:totable()[2], 1e-12)
      assert.are.near(4 * coef, b.grad:totable()[1], 1e-12)
    end
  end)
end)

describe("clip_grad_value", function()
  it("clamps every gradient in place, as torch.nn.utils.clip_grad_value_", function()
    local m = nn.Linear(3, 2)
    local x = ember.tensor({ { 10, -20, 0.1 } })
    m(x):sum():backward()
    optim.clip_grad_value(m, 1.5)
    local w = m.weight.grad:totable()
    assert.are.near(0.1, w[1][3], 1e-6)
    assert.are.equal(1.5, w[2][1])
    assert.are.equal(-1.5, w[2][2])
    assert.are.same({ 1, 1 }, m.bias.grad:totable())
    local p = ember.zeros(2, { requires_grad = true })
    optim.clip_grad_value({ p }, 1) -- no gradient: skipped
    assert.is_nil(p.grad)
    assert.has_error(function() optim.clip_grad_value({ p }, -1) end,
      "clip_grad_value: clip_value must be a number >= 0, got -1")
  end)
end)

describe("learning-rate schedules", function()
  for _, c in ipairs(F.schedules) do
    it(("warmup %d + %s match LambdaLR"):format(c.warmup_steps, c.kind), function()
      local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = c.base_lr })
      local cls = c.kind == "cosine" and optim.WarmupCosine or optim.WarmupLinear
      local s = cls(opt, { warmup_steps = c.warmup_steps, total_steps = c.total_steps, min_lr_ratio = c.min_lr_ratio })
      for i, want in ipairs(c.lrs) do
        if i > 1 then s:step() end
        assert.are.near(want, opt.param_groups[1].lr, 1e-15)
        assert.are.near(want, s:get_last_lr()[1], 1e-15)
      end
    end)
  end

  -- torch.optim.lr_scheduler's lrs for these calls (PyTorch 1.13, SGD lr
  -- 0.1, the lr before each of 8 or 10 steps), printed by:
  --   o = torch.optim.SGD([p], lr=0.1); s = L.StepLR(o, 3, 0.5)
  --   for i in range(8): lrs.append(o.param_groups[0]['lr']); o.step(); s.step()
  local TORCH = {
    { "StepLR(3, 0.5)", function(o) return optim.StepLR(o, 3, 0.5) end,
      { 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025 } },
    { "StepLR{step_size = 3, gamma = 0.5}", function(o) return optim.StepLR(o, { step_size = 3, gamma = 0.5 }) end,
      { 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025 } },
    { "MultiStepLR({2, 5}, 0.1)", function(o) return optim.MultiStepLR(o, { 2, 5 }, 0.1) end,
      { 0.1, 0.1, 0.01, 0.01, 0.01, 0.001, 0.001, 0.001 } },
    { "MultiStepLR{milestones = {2, 5}}", function(o) return optim.MultiStepLR(o, { milestones = { 2, 5 } }) end,
      { 0.1, 0.1, 0.01, 0.01, 0.01, 0.001, 0.001, 0.001 } },
    { "ExponentialLR(0.9)", function(o) return optim.ExponentialLR(o, 0.9) end,
      { 0.1, 0.09, 0.081, 0.0729, 0.06561, 0.059049, 0.0531441, 0.04782969 } },
    { "CosineAnnealingLR(4, 0.01)", function(o) return optim.CosineAnnealingLR(o, 4, 0.01) end,
      { 0.1, 0.08681980515339464, 0.055, 0.023180194846605363, 0.01, 0.023180194846605363, 0.055,
        0.08681980515339469, 0.1, 0.0868198051533947 } },
    { "LambdaLR(1 / (epoch + 1))", function(o) return optim.LambdaLR(o, function(e) return 1 / (e + 1) end) end,
      { 0.1, 0.05, 0.1 / 3, 0.025, 0.02, 0.1 / 6, 0.1 / 7, 0.0125 } },
  }
  for _, c in ipairs(TORCH) do
    it(c[1] .. " gives torch.optim.lr_scheduler's lrs", function()
      local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 0.1 })
      local s = c[2](opt)
      for i, want in ipairs(c[3]) do
        if i > 1 then s:step() end
        assert.are.near(want, opt.param_groups[1].lr, 1e-15)
      end
    end)
  end

  it("ReduceLROnPlateau gives torch's lrs (patience, threshold, cooldown, per-group min_lr, max/abs)", function()
    local opt = optim.SGD({ { params = { ember.zeros(1, { requires_grad = true }) } },
                            { params = { ember.zeros(1, { requires_grad = true }) }, lr = 0.05 } }, { lr = 0.1 })
    local s = optim.ReduceLROnPlateau(opt, { mode = "min", factor = 0.5, patience = 2, threshold = 0.01, cooldown = 1,
                                            min_lr = { 0.02, 0.001 } })
    local metrics = { 1.0, 0.995, 0.9, 0.9, 0.9, 0.9, 0.89, 0.95, 0.95, 0.95, 0.95, 0.95, 0.5, 0.5, 0.5, 0.5, 0.5 }
    -- torch.optim.lr_scheduler.ReduceLROnPlateau, the same calls (PyTorch 1.13)
    local want = { { 0.1, 0.05 }, { 0.1, 0.05 }, { 0.1, 0.05 }, { 0.1, 0.05 }, { 0.1, 0.05 }, { 0.05, 0.025 },
                   { 0.05, 0.025 }, { 0.05, 0.025 }, { 0.05, 0.025 }, { 0.025, 0.0125 }, { 0.025, 0.0125 },
                   { 0.025, 0.0125 }, { 0.025, 0.0125 }, { 0.025, 0.0125 }, { 0.025, 0.0125 }, { 0.02, 0.00625 },
                   { 0.02, 0.00625 } }
    local saved
    for i, m in ipairs(metrics) do
      s:step(m)
      assert.are.near(want[i][1], opt.param_groups[1].lr, 1e-15)
      assert.are.near(want[i][2], opt.param_groups[2].lr, 1e-15)
      if i == 8 then saved = s:state_dict() end
    end
    -- a copy restored at step 8 goes on as the original did
    local opt2 = optim.SGD({ { params = { ember.zeros(1, { requires_grad = true }) } },
                             { params = { ember.zeros(1, { requires_grad = true }) }, lr = 0.05 } }, { lr = 0.1 })
    local s2 = optim.ReduceLROnPlateau(opt2, { factor = 0.5, patience = 2, threshold = 0.01, cooldown = 1,
                                              min_lr = { 0.02, 0.001 } }):load_state_dict(saved)
    for i = 9, #metrics do s2:step(metrics[i]) end
    assert.are.near(0.02, opt2.param_groups[1].lr, 1e-15)
    assert.are.near(0.00625, opt2.param_groups[2].lr, 1e-15)
    local o3 = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 1 })
    local s3 = optim.ReduceLROnPlateau(o3, { mode = "max", factor = 0.1, patience = 1, threshold = 0.5, threshold_mode = "abs" })
    local lrs = {}
    for _, m in ipairs { 1, 1.4, 1.6, 2.2, 2.3, 2.4, 3.0 } do s3:step(ember.tensor(m)); lrs[#lrs + 1] = o3.param_groups[1].lr end
    for i, w in ipairs { 1, 1, 1, 1, 1, 0.1, 0.1 } do assert.are.near(w, lrs[i], 1e-15) end
    assert.has_error(function() s3:step() end, "ReduceLROnPlateau: step needs the metric (a number), got nil")
    assert.has_error(function() optim.ReduceLROnPlateau(o3, { patience = -1 }) end,
      "ReduceLROnPlateau: patience must be an integer >= 0, got -1")
    assert.has_error(function() optim.ReduceLROnPlateau(o3, { min_lr = { 1, 2 } }) end,
      "ReduceLROnPlateau: min_lr lists 2 lrs for 1 parameter groups")
  end)

  it("PyTorch's schedules keep each group's base lr, save their position, and check their options", function()
    local opt = optim.SGD({ { params = { ember.zeros(1, { requires_grad = true }) }, lr = 1 },
                            { params = { ember.zeros(1, { requires_grad = true }) }, lr = 0.5 } }, { lr = 1 })
    local s = optim.CosineAnnealingLR(opt, { T_max = 2, eta_min = 0.1 })
    s:step()
    assert.are.near(0.55, opt.param_groups[1].lr, 1e-15) -- eta_min + (1 - eta_min) / 2
    assert.are.near(0.3, opt.param_groups[2].lr, 1e-15)  -- eta_min + (0.5 - eta_min) / 2
    local s2 = optim.CosineAnnealingLR(optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 1 }), 2, 0.1)
    local sd = optim.StepLR(optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 1 }), 1, 0.5)
    for _ = 1, 3 do sd:step() end
    local o3 = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 1 })
    optim.StepLR(o3, 1, 0.5):load_state_dict(sd:state_dict())
    assert.are.equal(0.125, o3.param_groups[1].lr)
    assert.is_not_nil(s2)
    local o = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 1 })
    assert.has_error(function() optim.StepLR(o, 0) end, "StepLR: step_size must be a positive integer, got 0")
    assert.has_error(function() optim.StepLR(o, 2, -1) end, "StepLR: gamma must be a number > 0, got -1")
    assert.has_error(function() optim.StepLR(o, { step = 2 }) end,
      "StepLR: unknown option 'step' (expected step_size, gamma)")
    assert.has_error(function() optim.MultiStepLR(o, { 5, 0 }) end,
      "MultiStepLR: milestones must be positive integers, got 0 at 2")
    assert.has_error(function() optim.ExponentialLR(o) end, "ExponentialLR: gamma must be a number > 0, got nil")
    assert.has_error(function() optim.CosineAnnealingLR(o, 10, -1) end, "CosineAnnealingLR: eta_min must be a number >= 0, got -1")
    assert.has_error(function() optim.LambdaLR(o, 3) end, "LambdaLR: lr_lambda must be a function of the step, got number")
    local bad = optim.LambdaLR(o, function(e) return e == 0 and 1 or "x" end)
    assert.has_error(function() bad:step() end, "LambdaLR: lr_lambda(1) returned string, expected a number")
  end)

  it("save and restore their position", function()
    local opt = optim.AdamW({ ember.zeros(1, { requires_grad = true }) }, { lr = 1 })
    local s = optim.WarmupCosine(opt, { warmup_steps = 2, total_steps = 10 })
    for _ = 1, 4 do s:step() end
    local sd = s:state_dict()
    local lr = opt.param_groups[1].lr
    local opt2 = optim.AdamW({ ember.zeros(1, { requires_grad = true }) }, { lr = 1 })
    local s2 = optim.WarmupCosine(opt2, { warmup_steps = 2, total_steps = 10 })
    s2:load_state_dict(sd)
    assert.are.equal(lr, opt2.param_groups[1].lr)
    s:step()
    s2:step()
    assert.are.equal(opt.param_groups[1].lr, opt2.param_groups[1].lr)
  end)

  it("check their options", function()
    local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 1 })
    assert.has_error(function() optim.WarmupLinear(opt, { warmup_steps = 5, total_steps = 3 }) end,
      "WarmupLinear: warmup_steps (5) exceeds total_steps (3)")
    assert.has_error(function() optim.WarmupCosine(opt, {}) end,
      "WarmupCosine: total_steps must be a positive integer, got nil")
  end)
end)

-- ---------------------------------------------------------------------------
-- NAdam, RAdam, Adamax, Adadelta, amsgrad and the schedules of
-- tests/fixtures/nn_optim_more.lua (optim_more_cases / schedule_more_cases)

local M = dofile("tests/fixtures/nn_optim_more.lua")

-- As run(), on nn_optim_more.lua's loss.
local function run_more(make, steps, dtype, p0) return run(make, steps, dtype, nil, p0, M.optim) end

describe("NAdam, RAdam, Adamax, Adadelta, amsgrad:", function()
  for _, c in ipairs(M.optim.cases) do
    for _, dtype in ipairs { "float64", "float32" } do
      it(("%s %s %s matches PyTorch"):format(c.optimizer, describe_options(c.options), dtype), function()
        local traj = run_more(function(ps) return optim[c.optimizer](ps, options_of(c)) end, M.optim.steps, dtype)
        local tol = dtype == "float64" and 1e-12 or 2e-5
        for i, want in ipairs(c.trajectory) do
          local e = max_rel(traj[i], T(want))
          assert(e <= tol, ("step %d: relative error %.3g > %.1g"):format(i, e, tol))
        end
      end)
    end
  end

  local STATE = {
    NAdam = { "exp_avg", "exp_avg_sq", "mu_product", "step" },
    RAdam = { "exp_avg", "exp_avg_sq", "step" },
    Adamax = { "exp_avg", "exp_inf", "step" },
    Adadelta = { "acc_delta", "square_avg", "step" },
    Adam = { "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step" },
    AdamW = { "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step" },
  }
  for _, name in ipairs { "NAdam", "RAdam", "Adamax", "Adadelta", "Adam", "AdamW" } do
    it(name .. ": state_dict has PyTorch's names; load_state_dict resumes the same trajectory", function()
      local o = { lr = 0.05, weight_decay = 0.01 }
      if name == "Adam" or name == "AdamW" then o.amsgrad = true end
      if name == "RAdam" then o.betas = { 0.9, 0.9 } end -- the rectified branch from step 6
      local full = run_more(function(ps) return optim[name](ps, o) end, 9)
      local _, opt, p = run_more(function(ps) return optim[name](ps, o) end, 4)
      local sd = opt:state_dict()
      local names = {}
      for k in pairs(sd.state[1]) do names[#names + 1] = k end
      table.sort(names)
      assert.are.same(STATE[name], names)
      assert.are.equal(4, sd.state[1].step)
      if name == "Adam" then assert.is_true(sd.param_groups[1].amsgrad) end
      local resumed = run_more(function(ps)
        local fresh = optim[name](ps, o)
        fresh:load_state_dict(sd)
        return fresh
      end, 5, nil, p:detach():clone())
      assert.is_true(resumed[5] == full[9], name)
    end)
  end

  it("a checkpoint file round-trips NAdam's state (mu_product a number)", function()
    local checkpoint = require "ember.checkpoint"
    local path = os.tmpname()
    local _, opt, p = run_more(function(ps) return optim.NAdam(ps, { lr = 0.05 }) end, 3)
    checkpoint.save(path, { optimizer = opt })
    local fresh = optim.NAdam({ p }, { lr = 0.05 })
    checkpoint.load(path, { optimizer = fresh })
    os.remove(path)
    assert.are.equal(opt.state[1].mu_product, fresh.state[1].mu_product)
    assert.is_true(fresh.state[1].exp_avg == opt.state[1].exp_avg)
  end)

  it("print their options", function()
    local p = { ember.zeros(2, { requires_grad = true }) }
    local s = tostring(optim.NAdam(p))
    assert.truthy(s:find("^NAdam %(\n  group 1: 1 tensors\n"), s)
    assert.truthy(s:find("    betas: {0.9, 0.999}\n", 1, true), s)
    assert.truthy(s:find("    momentum_decay: 0.004\n", 1, true), s)
    assert.truthy(tostring(optim.Adadelta(p)):find("    rho: 0.9\n", 1, true))
    assert.truthy(tostring(optim.Adamax(p)):find("    maximize: false\n", 1, true))
    assert.truthy(tostring(optim.RAdam(p)):find("^RAdam %("))
    assert.truthy(tostring(optim.AdamW(p, { amsgrad = true })):find("    amsgrad: true\n", 1, true))
  end)

  it("check their options with clear errors", function()
    local p = { ember.zeros(2, { requires_grad = true }) }
    assert.has_error(function() optim.NAdam(p, { momentum = 0.9 }) end,
      "NAdam: unknown option 'momentum' (options: betas, eps, foreach, lr, momentum_decay, weight_decay)")
    assert.has_error(function() optim.NAdam(p, { momentum_decay = -1 }) end,
      "NAdam: momentum_decay must be a number >= 0, got -1")
    assert.has_error(function() optim.NAdam(p, { betas = { 1, 0.9 } }) end,
      "NAdam: betas must be {beta1, beta2} with each in [0, 1), got {1, 0.9}")
    assert.has_error(function() optim.RAdam(p, { amsgrad = true }) end,
      "RAdam: unknown option 'amsgrad' (options: betas, eps, foreach, lr, weight_decay)")
    assert.has_error(function() optim.RAdam(p, { eps = -1 }) end, "RAdam: eps must be a number >= 0, got -1")
    assert.has_error(function() optim.Adamax(p, { maximize = 1 }) end, "Adamax: maximize must be a boolean, got 1")
    assert.has_error(function() optim.Adamax(p, { lr = -0.1 }) end, "Adamax: lr must be a number >= 0, got -0.1")
    assert.has_error(function() optim.Adadelta(p, { rho = 1.5 }) end, "Adadelta: rho must be a number in [0, 1], got 1.5")
    assert.has_error(function() optim.Adadelta(p, { weight_decay = 0 / 0 }) end,
      "Adadelta: weight_decay must be a number >= 0, got " .. tostring(0 / 0))
    assert.has_error(function() optim.Adadelta(p, { betas = { 0.9, 0.99 } }) end,
      "Adadelta: unknown option 'betas' (options: eps, foreach, lr, maximize, rho, weight_decay)")
    assert.has_error(function() optim.Adam(p, { amsgrad = "yes" }) end, "Adam: amsgrad must be a boolean, got yes")
    assert.has_error(function() optim.AdamW({ { params = p, amsgrad = 1 } }) end, "AdamW: amsgrad must be a boolean, got 1")
  end)
end)

-- The schedules' cases: two groups (lr 0.1, 0.05) of SGD (momentum as the
-- case gives) or Adam (betas {0.9, 0.99}).
local SCALE_FNS = { inv = function(x) return 1 / (x + 1) end }

local function make_sched(opt, spec)
  if spec.scheduler == "SequentialLR" then
    local subs = {}
    for i, s in ipairs(spec.schedulers) do subs[i] = make_sched(opt, s) end
    return optim.SequentialLR(opt, subs, spec.milestones)
  end
  local o = {}
  for k, v in pairs(spec.options or {}) do o[k] = v end
  if o.scale_fn then o.scale_fn = SCALE_FNS[o.scale_fn] end
  return optim[spec.scheduler](opt, o)
end

local function sched_optimizer(c)
  local groups = { { params = { ember.zeros(1, { requires_grad = true }) } },
                   { params = { ember.zeros(1, { requires_grad = true }) }, lr = 0.05 } }
  if c.optimizer == "Adam" then return optim.Adam(groups, { lr = 0.1, betas = { 0.9, 0.99 } }) end
  return optim.SGD(groups, { lr = 0.1, momentum = c.momentum or 0 })
end

local function near(want, got, what)
  assert(type(got) == "number" and math.abs(got - want) <= 1e-12 * math.abs(want) + 1e-18,
    ("%s: got %s, want %s"):format(what, tostring(got), tostring(want)))
end

local function check_groups(c, opt, k)
  for gi, g in ipairs(opt.param_groups) do
    near(c.lrs[k][gi], g.lr, ("lr of group %d after %d steps"):format(gi, k - 1))
    local mom = c.optimizer == "Adam" and g.betas[1] or g.momentum
    near(c.momentums[k][gi], mom, ("momentum of group %d after %d steps"):format(gi, k - 1))
    if c.beta2 then assert.are.equal(c.beta2[k][gi], g.betas[2]) end
  end
end

local function describe_case(c)
  if c.scheduler == "SequentialLR" then
    local names = {}
    for i, s in ipairs(c.schedulers) do names[i] = s.scheduler .. describe_options(s.options or {}) end
    return ("SequentialLR({%s}, {%s})"):format(table.concat(names, ", "), table.concat(c.milestones, ", "))
  end
  return c.scheduler .. describe_options(c.options or {}) .. (c.epochs and " stepped to epochs" or "")
    .. (c.optimizer == "Adam" and " on Adam" or "")
end

describe("LinearLR, ConstantLR, PolynomialLR, CosineAnnealingWarmRestarts, OneCycleLR, CyclicLR, SequentialLR", function()
  for _, c in ipairs(M.schedules) do
    it(describe_case(c) .. " gives torch.optim.lr_scheduler's lrs and momentums", function()
      local opt = sched_optimizer(c)
      local s = make_sched(opt, c)
      check_groups(c, opt, 1)
      for k = 2, #c.lrs do
        if c.epochs then s:step(c.epochs[k - 1]) else s:step() end
        check_groups(c, opt, k)
        assert.are.same({ opt.param_groups[1].lr, opt.param_groups[2].lr }, s:get_last_lr())
      end
    end)
  end

  it("take PyTorch's positional arguments", function()
    local function lrs(make, n)
      local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 0.1, momentum = 0.9 })
      local s, out = make(opt), { opt.param_groups[1].lr }
      for _ = 1, n do s:step(); out[#out + 1] = opt.param_groups[1].lr end
      return out
    end
    assert.are.same(lrs(function(o) return optim.LinearLR(o, { start_factor = 0.25, end_factor = 0.75, total_iters = 4 }) end, 6),
      lrs(function(o) return optim.LinearLR(o, 0.25, 0.75, 4) end, 6))
    assert.are.same(lrs(function(o) return optim.ConstantLR(o, { factor = 0.5, total_iters = 3 }) end, 5),
      lrs(function(o) return optim.ConstantLR(o, 0.5, 3) end, 5))
    assert.are.same(lrs(function(o) return optim.PolynomialLR(o, { total_iters = 4, power = 2 }) end, 5),
      lrs(function(o) return optim.PolynomialLR(o, 4, 2) end, 5))
    assert.are.same(lrs(function(o) return optim.CosineAnnealingWarmRestarts(o, { T_0 = 2, T_mult = 2 }) end, 9),
      lrs(function(o) return optim.CosineAnnealingWarmRestarts(o, 2, 2) end, 9))
    assert.are.same(lrs(function(o) return optim.OneCycleLR(o, { max_lr = { 0.5 }, total_steps = 8 }) end, 8),
      lrs(function(o) return optim.OneCycleLR(o, { 0.5 }, 8) end, 8))
    assert.are.same(lrs(function(o) return optim.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 2 }) end, 9),
      lrs(function(o) return optim.CyclicLR(o, 0.01, 0.1, 2) end, 9))
    assert.are.same(lrs(function(o)
      return optim.SequentialLR(o, { schedulers = { optim.ConstantLR(o, 0.5, 2), optim.ExponentialLR(o, 0.5) },
                                     milestones = { 3 } })
    end, 6), lrs(function(o) return optim.SequentialLR(o, { optim.ConstantLR(o, 0.5, 2), optim.ExponentialLR(o, 0.5) }, { 3 }) end, 6))
    -- the defaults: LinearLR 1/3 -> 1 over 5 steps, ConstantLR 1/3 for 5, PolynomialLR 5 steps, power 1
    assert.are.near(0.1 / 3, lrs(function(o) return optim.LinearLR(o) end, 0)[1], 1e-16)
    assert.are.near(0.1 / 3, lrs(function(o) return optim.ConstantLR(o) end, 4)[5], 1e-16)
    assert.are.equal(0.1, lrs(function(o) return optim.ConstantLR(o) end, 5)[6])
    assert.are.equal(0, lrs(function(o) return optim.PolynomialLR(o) end, 5)[6])
  end)

  it("save and restore their position (SequentialLR its schedules', CosineAnnealingWarmRestarts its cycle)", function()
    local function build(kind)
      local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 0.1, momentum = 0.9 })
      if kind == "seq" then
        return opt, optim.SequentialLR(opt, { optim.LinearLR(opt, 0.1, 1, 3),
          optim.CosineAnnealingWarmRestarts(opt, 2, 2, 0.01), optim.PolynomialLR(opt, 4, 2) }, { 3, 9 })
      elseif kind == "cawr" then
        return opt, optim.CosineAnnealingWarmRestarts(opt, { T_0 = 2, T_mult = 3 })
      elseif kind == "one" then
        return opt, optim.OneCycleLR(opt, { max_lr = 0.5, total_steps = 12, three_phase = true })
      end
      return opt, optim.CyclicLR(opt, { base_lr = 0.01, max_lr = 0.1, step_size_up = 2, mode = "triangular2" })
    end
    for _, kind in ipairs { "seq", "cawr", "one", "cyclic" } do
      for cut = 0, 11 do
        local opt, s = build(kind)
        local want = {}
        for i = 1, 12 do s:step(); want[i] = { opt.param_groups[1].lr, opt.param_groups[1].momentum } end
        local opt1, s1 = build(kind)
        for _ = 1, cut do s1:step() end
        local sd = s1:state_dict()
        local opt2, s2 = build(kind)
        s2:load_state_dict(sd)
        assert.are.equal(opt1.param_groups[1].lr, opt2.param_groups[1].lr, kind)
        assert.are.equal(opt1.param_groups[1].momentum, opt2.param_groups[1].momentum, kind)
        for i = cut + 1, 12 do
          s2:step()
          assert.are.equal(want[i][1], opt2.param_groups[1].lr, ("%s cut at %d, step %d"):format(kind, cut, i))
          assert.are.equal(want[i][2], opt2.param_groups[1].momentum, kind)
        end
      end
    end
    -- through a checkpoint file (nested state dicts flatten to dotted keys)
    local checkpoint = require "ember.checkpoint"
    local path = os.tmpname()
    local opt, s = build("seq")
    for _ = 1, 5 do s:step() end
    checkpoint.save(path, { optimizer = opt, scheduler = s })
    local opt2, s2 = build("seq")
    checkpoint.load(path, { optimizer = opt2, scheduler = s2 })
    os.remove(path)
    assert.are.equal(opt.param_groups[1].lr, opt2.param_groups[1].lr)
    s:step(); s2:step()
    assert.are.equal(opt.param_groups[1].lr, opt2.param_groups[1].lr)
  end)

  it("print their position", function()
    local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 0.1, momentum = 0.9 })
    local s = optim.OneCycleLR(opt, { max_lr = 0.5, total_steps = 10 })
    s:step()
    assert.are.equal("OneCycleLR(step=1, lr=" .. opt.param_groups[1].lr .. ")", tostring(s))
    assert.are.equal("LinearLR(step=0, lr=0.025)", tostring(optim.LinearLR(
      optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 0.1 }), 0.25)))
  end)

  it("OneCycleLR cycles Adam's beta1 without touching the defaults; stops at total_steps", function()
    local p = { ember.zeros(1, { requires_grad = true }) }
    local opt = optim.AdamW(p, { lr = 1 })
    local s = optim.OneCycleLR(opt, { max_lr = 0.01, total_steps = 4 })
    assert.are.same({ 0.95, 0.999 }, opt.param_groups[1].betas)
    assert.are.same({ 0.9, 0.999 }, optim.AdamW(p).param_groups[1].betas)
    assert.are.same({ 0.9, 0.999 }, optim.AdamW.DEFAULTS.betas)
    for _ = 1, 4 do s:step() end -- step 4 (= total_steps) is allowed, as PyTorch
    assert.has_error(function() s:step() end, "OneCycleLR: tried to step 5 times; total_steps is 4")
    assert.are.equal(4, s.last_step)
  end)

  it("check their options with clear errors", function()
    local p = { ember.zeros(1, { requires_grad = true }) }
    local sgd = optim.SGD(p, { lr = 0.1, momentum = 0.9 })
    local function err(f, msg) assert.has_error(f, msg) end
    err(function() optim.LinearLR(sgd, 0) end, "LinearLR: start_factor must be a number in (0, 1], got 0")
    err(function() optim.LinearLR(sgd, 0.5, 1.5) end, "LinearLR: end_factor must be a number in [0, 1], got 1.5")
    err(function() optim.LinearLR(sgd, { total_iters = 2.5 }) end, "LinearLR: total_iters must be a positive integer, got 2.5")
    err(function() optim.LinearLR(sgd, { start = 0.1 }) end,
      "LinearLR: unknown option 'start' (expected start_factor, end_factor, total_iters)")
    err(function() optim.ConstantLR(sgd, 2) end, "ConstantLR: factor must be a number in [0, 1], got 2")
    err(function() optim.ConstantLR(sgd, 0.5, 0) end, "ConstantLR: total_iters must be a positive integer, got 0")
    err(function() optim.PolynomialLR(sgd, 4, -1) end, "PolynomialLR: power must be a finite number >= 0, got -1")
    err(function() optim.PolynomialLR(sgd, { gamma = 1 }) end,
      "PolynomialLR: unknown option 'gamma' (expected total_iters, power)")
    err(function() optim.CosineAnnealingWarmRestarts(sgd) end,
      "CosineAnnealingWarmRestarts: T_0 must be a positive integer, got nil")
    err(function() optim.CosineAnnealingWarmRestarts(sgd, 2, 1.5) end,
      "CosineAnnealingWarmRestarts: T_mult must be an integer >= 1, got 1.5")
    err(function() optim.CosineAnnealingWarmRestarts(sgd, 2):step(-1) end,
      "CosineAnnealingWarmRestarts: step(epoch): epoch must be a number >= 0, got -1")
    err(function() optim.OneCycleLR(sgd, { total_steps = 10 }) end,
      "OneCycleLR: max_lr is required (a number, or one per parameter group)")
    err(function() optim.OneCycleLR(sgd, { max_lr = 0.1 }) end, "OneCycleLR: give total_steps, or epochs and steps_per_epoch")
    err(function() optim.OneCycleLR(sgd, { max_lr = 0.1, epochs = 2 }) end,
      "OneCycleLR: steps_per_epoch must be a positive integer, got nil")
    err(function() optim.OneCycleLR(sgd, { max_lr = { 0.1, 0.2 }, total_steps = 10 }) end,
      "OneCycleLR: max_lr lists 2 values for 1 parameter groups")
    err(function() optim.OneCycleLR(sgd, { max_lr = 0.1, total_steps = 10, anneal_strategy = "exp" }) end,
      "OneCycleLR: anneal_strategy must be \"cos\" or \"linear\", got exp")
    err(function() optim.OneCycleLR(sgd, { max_lr = 0.1, total_steps = 10, pct_start = 0.1 }) end,
      "OneCycleLR: phase 1 of the cycle has no steps (pct_start = 0.1, total_steps = 10): change pct_start")
    err(function() optim.OneCycleLR(sgd, { max_lr = 0.1, total_steps = 10, max_momentum = -1 }) end,
      "OneCycleLR: max_momentum must be a number >= 0 (or a list of one per parameter group), got -1")
    err(function() optim.OneCycleLR(sgd, { max_lr = 0.1, total_steps = 10, max_lrs = 1 }) end,
      "OneCycleLR: unknown option 'max_lrs' (expected max_lr, total_steps, epochs, steps_per_epoch, pct_start, "
      .. "anneal_strategy, cycle_momentum, base_momentum, max_momentum, div_factor, final_div_factor, three_phase)")
    err(function() optim.OneCycleLR(optim.Adagrad(p), { max_lr = 0.1, total_steps = 10 }) end,
      "OneCycleLR: cycle_momentum needs an optimizer with a momentum option or betas (Adagrad has none): "
      .. "give cycle_momentum = false")
    err(function() optim.CyclicLR(optim.Adam(p), { base_lr = 0.01, max_lr = 0.1 }) end,
      "CyclicLR: cycle_momentum needs an optimizer with a momentum option (Adam has none): give cycle_momentum = false")
    err(function() optim.CyclicLR(sgd, { base_lr = 0.01 }) end,
      "CyclicLR: max_lr is required (a number, or one per parameter group)")
    err(function() optim.CyclicLR(sgd, { base_lr = 0.01, max_lr = 0.1, mode = "sine" }) end,
      "CyclicLR: mode must be \"triangular\", \"triangular2\" or \"exp_range\" (or give scale_fn), got sine")
    err(function() optim.CyclicLR(sgd, { base_lr = 0.01, max_lr = 0.1, step_size_up = 0 }) end,
      "CyclicLR: step_size_up must be a number > 0, got 0")
    err(function() optim.CyclicLR(sgd, { base_lr = 0.01, max_lr = 0.1, scale_fn = function() end }) end,
      "CyclicLR: scale_fn(1) returned nil, expected a number")
    local other = optim.SGD(p, { lr = 0.1 })
    local a, b = optim.LinearLR(sgd), optim.ExponentialLR(sgd, 0.9)
    err(function() optim.SequentialLR(sgd, { a, b }, { 2, 3 }) end,
      "SequentialLR: expects one milestone fewer than schedules: 2 schedules, 2 milestones")
    err(function() optim.SequentialLR(sgd, { a, optim.StepLR(other, 2) }, { 2 }) end,
      "SequentialLR: schedulers[2] belongs to another optimizer")
    err(function() optim.SequentialLR(sgd, { a, optim.ReduceLROnPlateau(sgd) }, { 2 }) end,
      "SequentialLR: schedulers[2] is a ReduceLROnPlateau, which cannot run inside SequentialLR")
    err(function() optim.SequentialLR(sgd, { a, 3 }, { 2 }) end, "SequentialLR: schedulers[2] is not a schedule (a number)")
    err(function() optim.SequentialLR(sgd, { a, b }, { 0 }) end,
      "SequentialLR: milestones must be increasing positive integers, got 0 at 1")
    err(function() optim.SequentialLR(sgd, {}) end, "SequentialLR: schedulers must be a non-empty list of schedules, got nil")
  end)
end)
