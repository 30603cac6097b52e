-- The differential sweep of ember.optim against PyTorch 1.13's torch.optim
-- (tests/fixtures/optim_sweep.lua, made by tests/gen_optim_sweep.py): every
-- optimizer over torch's option combinations (maximize, foreach, amsgrad,
-- nesterov, centered, lr_decay, ...) for 20 float64 steps on two raw
-- parameters, one of them without a gradient every 4th step, each step
-- within 1e-12; the same run interrupted by a state_dict round trip into a
-- fresh optimizer; every lr scheduler's lrs and momentums over 50 steps,
-- and interrupted by a state_dict round trip; options torch refuses.
-- What optim_spec.lua holds (the fused kernels against composed ops,
-- float32, clip_grad_*) is not repeated here.
local ember = require "ember"
local optim = require "ember.optim"
local parity = require "tests.lua.helpers.parity"
local T, max_rel, raises_here = parity.T, parity.max_rel, parity.raises_here

local F = dofile("tests/fixtures/optim_sweep.lua")
local TMP = os.tmpname()

-- A state dict through a file, as a checkpoint takes it (ember.save / ember.load).
local function through_file(sd)
  ember.save(sd, TMP)
  return ember.load(TMP)
end
local O = F.optimizers

local function copy(t)
  local o = {}
  for k, v in pairs(t) do o[k] = type(v) == "table" and copy(v) or v end
  return o
end

local function label(name, o, o2)
  local keys, parts = {}, {}
  for k in pairs(o) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = o[k]
    if type(v) == "table" then v = "{" .. table.concat(v, ",") .. "}" end
    parts[#parts + 1] = k .. "=" .. tostring(v)
  end
  local s = name .. "{" .. table.concat(parts, ", ") .. "}"
  if o2 then s = s .. " + group " .. label("", o2) end
  return s
end

-- The case's optimizer on fresh copies of p1, p2 (one group, or two).
local function make(c)
  local p1 = T(O.p1):requires_grad_(true)
  local p2 = T(O.p2):requires_grad_(true)
  local params = { p1, p2 }
  if c.add_group_at then
    params = { p1 }
  elseif c.group2 then
    local g2 = copy(c.group2)
    g2.params = { p2 }
    params = { { params = { p1 } }, g2 }
  end
  return optim[c.optimizer](params, copy(c.options)), p1, p2
end

local A1, A2, B1, B2 = T(O.A1), T(O.A2), T(O.B1), T(O.B2)

-- Step t of the generator's run: its gradients, then opt:step(); the case's
-- second group added after step add_group_at (p2's gradients before it are
-- set and not used).
local function step(opt, p1, p2, t, set_to_none, case)
  opt:zero_grad(set_to_none)
  local c = math.cos(0.9 * t)
  p1.grad = A1 * p1:detach() + B1 * c
  if t % 4 ~= 0 then p2.grad = A2 * p2:detach() + B2 * c end
  opt:step()
  if case and t == case.add_group_at then
    local g = copy(case.group2)
    g.params = { p2 }
    opt:add_param_group(g)
  end
end

local function check_step(c, t, p1, p2, what)
  local want = c.trajectory[t]
  for i, p in ipairs { p1, p2 } do
    local e = max_rel(p:detach(), T(want[i]))
    assert(e <= 1e-12, ("%s: p%d after step %d: relative error %.3g"):format(what or "", i, t, e))
  end
end

describe("optimizers match torch.optim step by step (float64, 20 steps)", function()
  for _, c in ipairs(O.cases) do
    it(label(c.optimizer, c.options, c.group2) .. (c.set_to_none == false and " zero_grad(false)" or ""), function()
      local opt, p1, p2 = make(c)
      for t = 1, O.steps do
        step(opt, p1, p2, t, c.set_to_none, c)
        check_step(c, t, p1, p2)
      end
      local names = {}
      for k in pairs(opt.state[1]) do names[#names + 1] = k end
      table.sort(names)
      assert.are.same(c.state, names, "the state's names are torch's")
    end)
  end
end)

describe("SGD, Adam and AdamW composed of tensor ops (a backend without the fused kernel) match too", function()
  for _, c in ipairs(O.cases) do
    if c.optimizer == "SGD" or c.optimizer == "Adam" or c.optimizer == "AdamW" then
      it(label(c.optimizer, c.options, c.group2) .. (c.set_to_none == false and " zero_grad(false)" or ""), function()
        local opt, p1, p2 = make(c)
        opt.composed = true
        for t = 1, O.steps do
          step(opt, p1, p2, t, c.set_to_none, c)
          check_step(c, t, p1, p2)
        end
      end)
    end
  end
end)

describe("a state_dict round trip mid-run (through a file) continues torch's trajectory", function()
  for _, c in ipairs(O.cases) do
    it(label(c.optimizer, c.options, c.group2), function()
      local opt, p1, p2 = make(c)
      for t = 1, 10 do step(opt, p1, p2, t, c.set_to_none, c) end
      -- a fresh optimizer on copies of the parameters takes the state; both go on
      local fresh, q1, q2 = make(c)
      if c.add_group_at and c.add_group_at <= 10 then
        local g = copy(c.group2)
        g.params = { q2 }
        fresh:add_param_group(g)
      end
      ember.no_grad(function()
        q1:copy_(p1)
        q2:copy_(p2)
      end)
      if c.set_to_none == false then q2.grad = p2.grad:clone() end -- a zero gradient kept
      fresh:load_state_dict(through_file(opt:state_dict()))
      for t = 11, O.steps do
        step(opt, p1, p2, t, c.set_to_none, c)
        step(fresh, q1, q2, t, c.set_to_none, c)
        check_step(c, t, p1, p2, "the saved one")
        check_step(c, t, q1, q2, "the loaded one")
      end
    end)
  end
end)

describe("PyTorch's positional options", function()
  -- each as torch.optim's signature orders them after lr, against the fixture's case given by name
  local function named(name, o)
    local want = label(name, o)
    for _, c in ipairs(O.cases) do
      if c.group2 == nil and c.set_to_none == nil and label(c.optimizer, c.options) == want then return c end
    end
    error("no fixture case " .. want)
  end
  local CASES = {
    { "SGD", { lr = 0.05, momentum = 0.9, dampening = 0.1, weight_decay = 0.05 },
      function(ps) return optim.SGD(ps, 0.05, 0.9, 0.1, 0.05) end },
    { "SGD", { lr = 0.05, momentum = 0.8, nesterov = true },
      function(ps) return optim.SGD(ps, 0.05, 0.8, 0, 0, true) end },
    { "SGD", { lr = 0.05, momentum = 0.7, nesterov = true, weight_decay = 0.02, maximize = true },
      function(ps) return optim.SGD(ps, 0.05, 0.7, { nesterov = true, weight_decay = 0.02, maximize = true }) end },
    { "Adam", { lr = 0.02, betas = { 0.8, 0.99 }, eps = 1e-6 },
      function(ps) return optim.Adam(ps, 0.02, { 0.8, 0.99 }, 1e-6) end },
    { "Adam", { lr = 0.05, betas = { 0.5, 0.9 }, weight_decay = 0.2, amsgrad = true },
      function(ps) return optim.Adam(ps, 0.05, { 0.5, 0.9 }, 1e-8, 0.2, true) end },
    { "AdamW", { lr = 0.05, betas = { 0.8, 0.9 }, eps = 1e-5, weight_decay = 0.5, amsgrad = true },
      function(ps) return optim.AdamW(ps, 0.05, { 0.8, 0.9 }, 1e-5, 0.5, true) end },
    { "Adamax", { lr = 0.05, betas = { 0.8, 0.95 }, eps = 1e-4, weight_decay = 0.1 },
      function(ps) return optim.Adamax(ps, 0.05, { 0.8, 0.95 }, 1e-4, 0.1) end },
    { "Adagrad", { lr = 0.1, weight_decay = 0.1, initial_accumulator_value = 0.5, eps = 1e-6 },
      function(ps) return optim.Adagrad(ps, 0.1, 0, 0.1, 0.5, 1e-6) end },
    { "Adadelta", { lr = 0.5, rho = 0.8, eps = 1e-4 },
      function(ps) return optim.Adadelta(ps, 0.5, 0.8, 1e-4) end },
    { "RMSprop", { lr = 0.01, centered = true, momentum = 0.5, weight_decay = 0.1 },
      function(ps) return optim.RMSprop(ps, 0.01, 0.99, 1e-8, 0.1, 0.5, true) end },
    { "NAdam", { lr = 0.02, betas = { 0.8, 0.95 }, weight_decay = 0.1 },
      function(ps) return optim.NAdam(ps, 0.02, { 0.8, 0.95 }, 1e-8, 0.1) end },
    { "RAdam", { lr = 0.05, betas = { 0.9, 0.9 }, eps = 1e-6, weight_decay = 0.1 },
      function(ps) return optim.RAdam(ps, 0.05, { 0.9, 0.9 }, 1e-6, 0.1) end },
  }
  for _, k in ipairs(CASES) do
    local c = named(k[1], k[2])
    it(label(c.optimizer, c.options), function()
      local p1, p2 = T(O.p1):requires_grad_(true), T(O.p2):requires_grad_(true)
      local opt = k[3]({ p1, p2 })
      for t = 1, O.steps do
        step(opt, p1, p2, t)
        check_step(c, t, p1, p2)
      end
    end)
  end

  it("are checked: too many, one given twice, a table not last", function()
    local p = ember.zeros(2, { requires_grad = true })
    raises_here(function() optim.SGD({ p }, 0.1, 0.9, 0, 0, false, 1) end,
      "SGD: takes at most 5 positional options (lr, momentum, dampening, weight_decay, nesterov) and a table of "
      .. "the rest, got 6")
    raises_here(function() optim.SGD({ p }, 0.1, 0.9, { momentum = 0.5 }) end,
      "SGD: momentum is given twice (by position and by name)")
    raises_here(function() optim.SGD({ p }, { lr = 0.1 }, 0.9) end,
      "SGD: takes its options as one table {lr = ...} (or PyTorch's positional lr, ...), got a number after it")
    raises_here(function() optim.Adam({ p }, 0.1, 0.9) end, "Adam: betas must be {beta1, beta2} with each in [0, 1), got 0.9")
  end)
end)

describe("what a new user gets wrong is named", function()
  it("one tensor for params, an lr string, betas of three, nesterov = 1", function()
    local p = ember.zeros(2, { requires_grad = true })
    raises_here(function() optim.SGD(p, 0.1) end,
      "SGD: params must be a list of tensors, a module or a list of groups, got one tensor: give {p}")
    raises_here(function() optim.SGD({ p }, { lr = "0.1" }) end, 'SGD: lr must be a number >= 0, got the string "0.1"')
    raises_here(function() optim.SGD(require("ember.nn").Linear(2, 2):named_parameters(), 0.1) end,
      "SGD: params must be a list, got a table keyed by string")
    raises_here(function() optim.SGD({ params = { p }, lr = 0.1 }) end,
      "SGD: params must be a list of groups: wrap the group in one, {{params = {...}, lr = ...}}")
    raises_here(function() optim.Adam({ p }, { betas = { 0.9, 0.99, 0.1 } }) end,
      "Adam: betas must be {beta1, beta2} with each in [0, 1), got {0.9, 0.99, 0.1}")
    raises_here(function() optim.SGD({ p }, { lr = 0.1, momentum = 0.9, nesterov = 1 }) end,
      "SGD: nesterov must be a boolean, got 1")
  end)

  it("SparseAdam is refused naming what to use (ember has no sparse gradients)", function()
    local p = ember.zeros(2, { requires_grad = true })
    raises_here(function() optim.SparseAdam({ p }, { lr = 0.01 }) end,
      "optim.SparseAdam: ember has no sparse gradients (nn.Embedding refuses sparse = true): use optim.Adam")
  end)

  it("clip_grad_norm_ and clip_grad_value_ take one tensor, as torch's", function()
    local a, b = ember.tensor({ 3.0, -4.0 }):requires_grad_(), ember.tensor({ 3.0, -4.0 }):requires_grad_()
    a.grad, b.grad = ember.tensor({ 3.0, -4.0 }), ember.tensor({ 3.0, -4.0 })
    assert.are.equal(optim.clip_grad_norm_({ a }, 1.0), optim.clip_grad_norm_(b, 1.0))
    assert.are.same(a.grad:tolist(), b.grad:tolist())
    optim.clip_grad_value_(b, 0.5)
    assert.are.same({ 0.5, -0.5 }, b.grad:tolist())
  end)
end)

describe("LBFGS matches torch.optim.LBFGS call by call", function()
  local function loss_of(p1, p2)
    return (A1 * p1 * p1 * 0.5 + B1 * p1):sum() + (p1 * p1 * p1 * p1):sum() * 0.1
      + (A2 * p2 * p2 * 0.5 + B2 * p2):sum() + (p2 * p2 * p2 * p2):sum() * 0.1
  end
  local function build(c)
    local p1, p2 = T(O.p1):requires_grad_(true), T(O.p2):requires_grad_(true)
    local opt = optim.LBFGS({ p1, p2 }, copy(c.options))
    local function closure()
      opt:zero_grad()
      local loss = loss_of(p1, p2)
      loss:backward()
      return loss
    end
    return opt, p1, p2, closure
  end
  local function check(w, opt, p1, p2, loss, what)
    for i, p in ipairs { p1, p2 } do
      local e = max_rel(p:detach(), T(w.p[i]))
      assert(e <= 1e-10, ("%s p%d: relative error %.3g"):format(what, i, e))
    end
    assert(math.abs(loss:item() - w.loss) <= 1e-10 * math.abs(w.loss), what .. " loss")
    assert.are.equal(w.n_iter, opt.state[1].n_iter, what .. " n_iter")
    assert.are.equal(w.func_evals, opt.state[1].func_evals, what .. " func_evals")
  end
  for _, c in ipairs(F.lbfgs) do
    it(label("LBFGS", c.options), function()
      local opt, p1, p2, closure = build(c)
      for k, w in ipairs(c.steps) do check(w, opt, p1, p2, opt:step(closure), "call " .. k) end
    end)
    it(label("LBFGS", c.options) .. " through a state_dict round trip", function()
      local opt, p1, p2, closure = build(c)
      opt:step(closure)
      local fresh, q1, q2, closure2 = build(c)
      ember.no_grad(function()
        q1:copy_(p1)
        q2:copy_(p2)
      end)
      fresh:load_state_dict(through_file(opt:state_dict()))
      for k = 2, #c.steps do check(c.steps[k], fresh, q1, q2, fresh:step(closure2), "loaded, call " .. k) end
    end)
  end

  it("checks its options and needs a closure", function()
    local p = ember.zeros(2, { requires_grad = true })
    raises_here(function() optim.LBFGS({ p }, { line_search_fn = "backtracking" }) end,
      'LBFGS: line_search_fn must be nil or "strong_wolfe"')
    raises_here(function() optim.LBFGS({ { params = { p } }, { params = { ember.zeros(1, { requires_grad = true }) } } }) end,
      "LBFGS: doesn't support per-parameter options (parameter groups)")
    raises_here(function() optim.LBFGS({ p }, { max_iter = 0 }) end, "LBFGS: max_iter must be a positive integer, got 0")
    raises_here(function() optim.LBFGS({ p }):step() end, "LBFGS: step needs a closure")
    assert.are.equal(25, optim.LBFGS({ p }).param_groups[1].max_eval) -- max_iter * 5 // 4
  end)
end)

describe("PyTorch's attributes", function()
  it("opt.state[p] by the parameter, opt.defaults with every default, sched.last_epoch", function()
    local nn = require "ember.nn"
    local m = nn.Linear(2, 2)
    local opt = optim.Adam(m:parameters(), 0.01)
    ;(m(ember.ones(1, 2)):sum()):backward()
    opt:step()
    assert.are.equal(opt.state[1], opt.state[m.weight])
    assert.are.equal(opt.state[2], opt.state[m.bias])
    assert.are.equal(1, opt.state[m.bias].step)
    assert.is_nil(opt.state[ember.zeros(1)])
    assert.are.same({ 0.9, 0.999 }, opt.defaults.betas)
    assert.are.equal(0.01, opt.defaults.lr)
    assert.is_false(opt.defaults.amsgrad)
    local fresh = optim.Adam(m:parameters(), 0.01)
    fresh:load_state_dict(opt:state_dict())
    assert.are.equal(1, fresh.state[m.weight].step)
    local s = optim.StepLR(opt, 2)
    s:step(); s:step()
    assert.are.equal(2, s.last_epoch)
    assert.are.equal(2, s:state_dict().last_epoch)
    local r = optim.ReduceLROnPlateau(opt)
    r:step(1.0); r:step(2.0)
    assert.are.equal(1, r.num_bad_epochs)
  end)
end)

-- ---------------------------------------------------------------- schedulers

local FNS = {
  inv = function(x) return 1 / (x + 1) end,
  decay95 = function(e) return 0.95 ^ e end,
  mul98 = function() return 0.98 end,
  step_mul = function(e) return e % 10 == 0 and 0.5 or 1.0 end,
}

local function sched_optimizer(c)
  local a, b = ember.zeros(1, { requires_grad = true }), ember.zeros(1, { requires_grad = true })
  local groups = { { params = { a } }, { params = { b }, lr = 0.05 } }
  if c.optimizer == "Adam" then return optim.Adam(groups, { lr = 0.1, betas = { 0.9, 0.99 } }) end
  return optim.SGD(groups, { lr = 0.1, momentum = c.momentum or 0.0 })
end

local function make_sched(opt, c)
  if c.scheduler == "SequentialLR" or c.scheduler == "ChainedScheduler" then
    local subs = {}
    for i, s in ipairs(c.schedulers) do subs[i] = make_sched(opt, s) end
    if c.scheduler == "ChainedScheduler" then return optim.ChainedScheduler(subs) end
    return optim.SequentialLR(opt, subs, c.milestones)
  end
  local o = copy(c.options or {})
  for _, k in ipairs { "scale_fn", "lr_lambda" } do
    if o[k] then o[k] = FNS[o[k]] end
  end
  return optim[c.scheduler](opt, o)
end

local function near(want, got, what)
  assert(type(got) == "number", what .. " is not a number")
  assert(math.abs(got - want) <= 1e-12 * math.max(math.abs(want), 1e-3),
    ("%s: %.17g, torch %.17g"):format(what, got, want))
end

-- (a case whose momentum ember documents as different, known_momentum, checks the lrs)
local function check_groups(c, opt, k)
  for gi, g in ipairs(opt.param_groups) do
    near(c.lrs[k][gi], g.lr, ("lr of group %d after %d steps"):format(gi, k - 1))
    local mom = c.optimizer == "Adam" and g.betas[1] or g.momentum
    if not c.known_momentum then
      near(c.momentums[k][gi], mom, ("momentum of group %d after %d steps"):format(gi, k - 1))
    end
  end
end

-- Step k of the generator's run (1-based): step(epoch) through c.epochs
-- first, the metric's step, or a plain step; then the lr halved by hand
-- at c.override_at.
local function sched_step(s, c, k, opt)
  local ne = c.epochs and #c.epochs or 0
  if k <= ne then
    s:step(c.epochs[k])
  elseif c.metrics then
    s:step(c.metrics[k])
  else
    s:step()
  end
  if k == c.override_at then
    for _, g in ipairs(opt.param_groups) do g.lr = g.lr * 0.5 end
  end
  if k == c.add_group_at then opt:add_param_group({ params = { ember.zeros(1, { requires_grad = true }) }, lr = 0.2 }) end
end

local function sched_label(c)
  if c.schedulers then
    local names = {}
    for i, s in ipairs(c.schedulers) do names[i] = label(s.scheduler, s.options or {}) end
    return ("%s({%s}%s)"):format(c.scheduler, table.concat(names, ", "),
      c.milestones and (", {" .. table.concat(c.milestones, ", ") .. "}") or "")
  end
  return label(c.scheduler, c.options or {}) .. (c.optimizer == "Adam" and " on Adam" or "")
end

describe("lr schedulers match torch.optim.lr_scheduler over 50 steps", function()
  for _, c in ipairs(F.schedulers) do
    it(sched_label(c), function()
      local opt = sched_optimizer(c)
      local s = make_sched(opt, c)
      check_groups(c, opt, 1)
      for k = 2, #c.lrs do
        sched_step(s, c, k - 1, opt)
        check_groups(c, opt, k)
        if k - 1 ~= c.override_at then
          local last = s:get_last_lr()
          near(c.lrs[k][1], last[1], "get_last_lr()[1]")
          near(c.lrs[k][2], last[2], "get_last_lr()[2]")
        end
      end
    end)
  end
end)

describe("a scheduler's state_dict round trip mid-run (with its optimizer's, through a file) continues torch's lrs",
  function()
  for _, c in ipairs(F.schedulers) do
    it(sched_label(c), function()
      local opt = sched_optimizer(c)
      local s = make_sched(opt, c)
      local cut = math.min(26, #c.lrs - 2)
      for k = 2, cut do sched_step(s, c, k - 1, opt) end
      local osd, ssd = through_file(opt:state_dict()), through_file(s:state_dict())
      -- as a training script resumes: build both, then load both
      local opt2 = sched_optimizer(c)
      local s2 = make_sched(opt2, c)
      if c.add_group_at and c.add_group_at < cut then
        opt2:add_param_group({ params = { ember.zeros(1, { requires_grad = true }) }, lr = 0.2 })
      end
      opt2:load_state_dict(osd)
      s2:load_state_dict(ssd)
      check_groups(c, opt2, cut)
      for k = cut + 1, #c.lrs do
        sched_step(s2, c, k - 1, opt2)
        check_groups(c, opt2, k)
      end
    end)
  end
end)

describe("last_epoch resumes a schedule as torch's does", function()
  for _, c in ipairs(F.resume) do
    it(sched_label(c) .. (" made again with last_epoch = %d"):format(c.done), function()
      local opt = sched_optimizer(c)
      local s = make_sched(opt, c)
      for _ = 1, c.done do s:step() end
      local saved = opt:state_dict()
      local opt2 = sched_optimizer(c)
      opt2:load_state_dict(saved)
      local o = copy(c.options)
      o.last_epoch = c.done
      local s2 = make_sched(opt2, { scheduler = c.scheduler, options = o })
      check_groups(c, opt2, 1)
      for k = 2, #c.lrs do
        s2:step()
        check_groups(c, opt2, k)
      end
    end)
  end

  it("needs the groups' initial_lr, which the optimizer's state_dict carries", function()
    local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, 0.1)
    raises_here(function() optim.StepLR(opt, { step_size = 3, last_epoch = 5 }) end,
      "StepLR: last_epoch = 5 resumes a schedule, but param_groups[1] has no initial_lr")
    raises_here(function() optim.StepLR(opt, 3, 0.1, -2) end, "StepLR: last_epoch must be an integer >= -1")
    raises_here(function() optim.ExponentialLR(opt, { gamma = 0.9, verbose = 1 }) end,
      "ExponentialLR: verbose must be a boolean, got 1")
    optim.ExponentialLR(opt, 0.5)
    assert.are.equal(0.1, opt.param_groups[1].initial_lr)
    assert.are.equal(0.1, opt:state_dict().param_groups[1].initial_lr)
    local s = optim.ExponentialLR(opt, 0.5, 3) -- positional last_epoch: step 4 from the lr the optimizer has
    assert.are.equal(4, s.last_step)
    assert.are.equal(0.05, opt.param_groups[1].lr)
  end)
end)

describe("get_lr() gives torch's values (its formula once more, for a chainable schedule)", function()
  for _, c in ipairs(F.get_lr) do
    it(sched_label(c), function()
      local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, { lr = 0.1, momentum = c.momentum or 0 })
      local s = make_sched(opt, c)
      for k, want in ipairs(c.get_lr) do
        s:step()
        near(want, s:get_lr()[1], ("get_lr() after %d steps"):format(k))
      end
    end)
  end
end)

describe("verbose", function()
  it("prints each change as PyTorch's does (groups numbered from 1)", function()
    local printed, print0 = {}, _G.print
    _G.print = function(s) printed[#printed + 1] = s end
    local ok, err = pcall(function()
      local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, 0.1)
      local s = optim.StepLR(opt, { step_size = 1, gamma = 0.5, verbose = true })
      s:step()
      s:step(5)
      local r = optim.ReduceLROnPlateau(opt, { patience = 0, verbose = true })
      r:step(1.0); r:step(1.0)
    end)
    _G.print = print0
    assert(ok, err)
    assert.are.same({ "Adjusting learning rate of group 1 to 1.0000e-01.",
      "Adjusting learning rate of group 1 to 5.0000e-02.",
      "Epoch 00005: adjusting learning rate of group 1 to 3.1250e-03.",
      "Epoch 00002: reducing learning rate of group 1 to 3.1250e-04." }, printed)
  end)
end)

describe("ChainedScheduler and schedules stepped together", function()
  it("two schedules stepped by hand multiply, as ChainedScheduler's", function()
    local function build()
      local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, 0.1)
      return opt, optim.LinearLR(opt, 0.2, 1.0, 8), optim.StepLR(opt, 10, 0.5)
    end
    local o1, a1, b1 = build()
    local o2, a2, b2 = build()
    local chained = optim.ChainedScheduler({ a2, b2 })
    for _ = 1, 30 do
      a1:step(); b1:step(); chained:step()
      assert.are.equal(o1.param_groups[1].lr, o2.param_groups[1].lr)
      assert.are.equal(o1.param_groups[1].lr, chained:get_last_lr()[1])
    end
  end)

  it("checks its schedules", function()
    local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, 0.1)
    local other = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, 0.1)
    local a = optim.ExponentialLR(opt, 0.9)
    raises_here(function() optim.ChainedScheduler({}) end, "ChainedScheduler: expected a non-empty list of schedules")
    raises_here(function() optim.ChainedScheduler(opt, { a }) end, "ChainedScheduler: takes the list of schedules only")
    raises_here(function() optim.ChainedScheduler({ a, 3 }) end, "ChainedScheduler: schedulers[2] is not a schedule")
    raises_here(function() optim.ChainedScheduler({ a, optim.StepLR(other, 2) }) end,
      "ChainedScheduler: expects every schedule on the same optimizer: schedulers[2]")
    raises_here(function() optim.ChainedScheduler({ a, optim.ReduceLROnPlateau(opt) }) end,
      "ChainedScheduler: schedulers[2] is a ReduceLROnPlateau")
    raises_here(function() optim.ChainedScheduler({ a }):step(3) end, "ChainedScheduler: step takes no epoch")
    raises_here(function() optim.SequentialLR(opt, { a, optim.ChainedScheduler({ a }) }, { 2 }) end,
      "SequentialLR: schedulers[2] is a ChainedScheduler")
  end)
end)

describe("ReduceLROnPlateau", function()
  it("takes PyTorch's positional options and verbose", function()
    local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, 0.1)
    local s = optim.ReduceLROnPlateau(opt, "max", 0.5, 1)
    assert.are.same({ "max", 0.5, 1 }, { s.mode, s.factor, s.patience })
    for _, v in ipairs { 1, 1, 1 } do s:step(v) end
    assert.are.equal(0.05, opt.param_groups[1].lr)
    raises_here(function() optim.ReduceLROnPlateau(opt, { last_epoch = 3 }) end, "ReduceLROnPlateau: takes no last_epoch")
    raises_here(function() optim.ReduceLROnPlateau(opt, { mode = "min", patient = 3 }) end,
      "ReduceLROnPlateau: unknown option 'patient'")
    raises_here(function() optim.ReduceLROnPlateau(opt, 3) end, "ReduceLROnPlateau: options must be a table")
  end)
end)

-- ---------------------------------------------------------------- swa_utils

describe("optim.swa_utils matches torch.optim.swa_utils", function()
  local nn = require "ember.nn"
  local W = F.swa
  local function set(m, st)
    ember.no_grad(function()
      m.weight:copy_(T(st.weight))
      m.bias:copy_(T(st.bias))
    end)
  end

  for _, c in ipairs(W.averaged) do
    it("AveragedModel, " .. c.avg_fn .. " (4 updates)", function()
      local m = nn.Linear(3, 2, { dtype = "float64" })
      local fn = c.avg_fn == "ema" and function(a, p) return a * 0.25 + p * 0.75 end or nil
      local swa = optim.swa_utils.AveragedModel(m, { avg_fn = fn })
      for k, st in ipairs(W.states) do
        set(m, st)
        swa:update_parameters(m)
        local want = c.steps[k]
        parity.check("weight after " .. k, swa.module.weight:detach(), T(want.weight), 1e-12)
        parity.check("bias after " .. k, swa.module.bias:detach(), T(want.bias), 1e-12)
        assert.are.equal(want.n_averaged, swa.n_averaged:item())
      end
      -- its own tensors: the model's are untouched by the average, and it is a module of torch's names
      assert.is_false(rawequal(swa.module.weight, m.weight))
      local names = {}
      for k in pairs(swa:state_dict()) do names[#names + 1] = k end
      table.sort(names)
      assert.are.same({ "module.bias", "module.weight", "n_averaged" }, names)
    end)
  end

  it("AveragedModel with use_buffers averages a BatchNorm's running statistics", function()
    local bn = nn.BatchNorm1d(3, { dtype = "float64" })
    local swa = optim.swa_utils.AveragedModel(bn, { use_buffers = true })
    for k, x in ipairs(W.buffers.xs) do
      bn:train()
      bn(T(x))
      swa:update_parameters(bn)
      local want = W.buffers.steps[k]
      parity.check("running_mean after " .. k, swa.module.running_mean, T(want.running_mean), 1e-12)
      parity.check("running_var after " .. k, swa.module.running_var, T(want.running_var), 1e-12)
      assert.are.equal(want.num_batches_tracked, swa.module.num_batches_tracked:item())
    end
  end)

  for _, c in ipairs(W.swalr) do
    it(label("SWALR", c.options) .. (c.cosine_first > 0 and " after CosineAnnealingLR" or ""), function()
      local opt = sched_optimizer({})
      if c.cosine_first > 0 then
        local cos = optim.CosineAnnealingLR(opt, 10)
        for _ = 1, c.cosine_first do cos:step() end
      end
      local s = optim.swa_utils.SWALR(opt, copy(c.options))
      for k = 1, #c.lrs do
        if k > 1 then s:step() end
        for gi, g in ipairs(opt.param_groups) do near(c.lrs[k][gi], g.lr, ("lr of group %d after %d steps"):format(gi, k - 1)) end
      end
    end)
  end

  it("update_bn recomputes the running statistics over a loader (a [x, y] batch gives x)", function()
    local U = W.update_bn
    local model = nn.Sequential(nn.Linear(3, 4, { dtype = "float64" }), nn.BatchNorm1d(4, { momentum = 0.3, dtype = "float64" }))
    set(model[1], U)
    model:eval()
    local b = U.batches
    optim.swa_utils.update_bn({ T(b[1]), { T(b[2]), ember.zeros(6) }, T(b[3]) }, model)
    parity.check("running_mean", model[2].running_mean, T(U.running_mean), 1e-12)
    parity.check("running_var", model[2].running_var, T(U.running_var), 1e-12)
    assert.are.equal(U.num_batches_tracked, model[2].num_batches_tracked:item())
    assert.are.equal(U.momentum, model[2].momentum)
    assert.are.equal(U.training, model.training)
  end)

  it("checks its arguments", function()
    local opt = optim.SGD({ ember.zeros(1, { requires_grad = true }) }, 0.1)
    raises_here(function() optim.swa_utils.SWALR(opt, { anneal_epochs = 2 }) end, "SWALR: swa_lr is required")
    raises_here(function() optim.swa_utils.SWALR(opt, { swa_lr = 0.1, anneal_strategy = "exp" }) end,
      'SWALR: anneal_strategy must be "cos" or "linear", got exp')
    raises_here(function() optim.swa_utils.SWALR(opt, { swa_lr = 0.1, anneal_epochs = -1 }) end,
      "SWALR: anneal_epochs must be an integer >= 0, got -1")
    raises_here(function() optim.swa_utils.AveragedModel(opt) end, "swa_utils.AveragedModel: expected a module, got table")
    raises_here(function() optim.swa_utils.AveragedModel(nn.Linear(1, 1), { avg = 1 }) end, "avg")
  end)
end)

-- ---------------------------------------------------------------- errors

describe("options torch refuses are refused, naming the option, at the user's line", function()
  for _, c in ipairs(F.errors) do
    it(label(c.optimizer, c.options) .. " (torch: " .. c.torch .. ")", function()
      local p = ember.zeros(2, { requires_grad = true })
      raises_here(function() optim[c.optimizer]({ p }, copy(c.options)) end, c.word)
      raises_here(function() optim[c.optimizer]({ p }, copy(c.options)) end, c.optimizer .. ":")
    end)
  end
end)

describe("torch's flags on how an update runs", function()
  it("foreach, fused, capturable are taken where torch 1.13 takes them and change nothing", function()
    local c = O.cases[2] -- SGD momentum
    local o = copy(c.options)
    o.foreach, o.differentiable = true, false
    local opt, p1, p2 = make({ optimizer = "SGD", options = o })
    for t = 1, 5 do
      step(opt, p1, p2, t)
      check_step(c, t, p1, p2)
    end
    local p = ember.zeros(2, { requires_grad = true })
    optim.Adam({ p }, { fused = false, capturable = false, foreach = false, differentiable = false })
    optim.AdamW({ { params = { p }, foreach = true } }, { capturable = true })
    for _, name in ipairs { "Adamax", "Adagrad", "Adadelta", "RMSprop", "NAdam", "RAdam" } do
      optim[name]({ p }, { foreach = false })
    end
  end)

  it("are refused where torch 1.13 has none, or as true where ember cannot honour them", function()
    local p = ember.zeros(2, { requires_grad = true })
    raises_here(function() optim.SGD({ p }, { lr = 0.1, fused = true }) end, "SGD: unknown option 'fused'")
    raises_here(function() optim.NAdam({ p }, { capturable = false }) end, "NAdam: unknown option 'capturable'")
    raises_here(function() optim.SGD({ p }, { lr = 0.1, differentiable = true }) end,
      "SGD: differentiable = true is not supported")
    raises_here(function() optim.Adam({ p }, { foreach = "yes" }) end, "Adam: foreach must be a boolean or nil, got yes")
    raises_here(function() optim.Adam({ { params = { p }, maximize = 1 } }) end, "Adam: maximize must be a boolean, got 1")
    raises_here(function() optim.SGD({ p }, 0.1):zero_grad("none") end,
      "SGD: zero_grad: set_to_none must be a boolean or nothing, got string")
  end)
end)

teardown(function() os.remove(TMP) end)
