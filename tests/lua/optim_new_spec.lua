-- The optimizers past torch 1.13's set -- optim.Muon, optim.Lion,
-- optim.Adafactor -- against the reference implementations of
-- tests/gen_optim_new.py (tests/fixtures/optim_new.lua: torch.optim.Muon
-- and torch.optim.Adafactor as PyTorch 2.9 / 2.5 define them, Lion as the
-- paper's Algorithm 2, written with PyTorch 1.13's ops): 20 float64 steps
-- on raw parameters, the last one without a gradient every 4th step, each
-- step within 1e-12 (Muon's Newton-Schulz in float64; in float32 and in
-- bfloat16 with the tolerances their roundings leave); a state_dict round
-- trip mid-run (through a file) goes on the same; the options each
-- refuses, at the caller's line; Muon (the hidden matrices) with AdamW
-- (the rest) trains an MLP, the same way twice.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local parity = require "tests.lua.helpers.parity"
local T, max_rel, raises_here = parity.T, parity.max_rel, parity.raises_here

local F = dofile("tests/fixtures/optim_new.lua")
local TMP = os.tmpname()

local function copy(t)
  local o = {}
  for k, v in pairs(t) do o[k] = type(v) == "table" and copy(v) or v end
  return o
end

local function label(c)
  local keys, parts = {}, {}
  local function fmt(o)
    keys, parts = {}, {}
    for k in pairs(o) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = o[k]
      if type(v) == "table" then v = "{" .. tostring(v[1]) .. "," .. table.concat(v, ",", 2) .. "}" end
      parts[#parts + 1] = k .. "=" .. tostring(v)
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  local s = c.optimizer .. fmt(c.options) .. " on " .. table.concat(c.params, ", ")
  if c.group2 then s = s .. " + group " .. fmt(c.group2) end
  return s
end

-- The tolerance of a case: Muon's iteration in float32 or bfloat16 rounds
-- where the float64 reference does not (bfloat16: ember's and torch's
-- products round differently too, so the trajectories part by a few
-- bfloat16 steps).
local function tolerance(c)
  if c.optimizer ~= "Muon" then return 1e-12 end
  local dt = c.options.ns_dtype or "bfloat16"
  return ({ float64 = 1e-12, float32 = 1e-6, bfloat16 = 2e-2 })[dt]
end

-- The case's optimizer on fresh copies of its parameters (one group, or the last in a second).
local function make(c)
  local ps = {}
  for i, n in ipairs(c.params) do ps[i] = T(F.P[n]):requires_grad_(true) end
  local params = ps
  if c.group2 then
    local g2 = copy(c.group2)
    g2.params = { ps[#ps] }
    local first = {}
    for i = 1, #ps - 1 do first[i] = ps[i] end
    params = { { params = first }, g2 }
  end
  return optim[c.optimizer](params, copy(c.options)), ps
end

-- Step t of the generator's run: its gradients (none for the last parameter every 4th step), then opt:step().
local function step(opt, c, ps, t)
  opt:zero_grad()
  local cs = math.cos(0.9 * t)
  for i, p in ipairs(ps) do
    local n = c.params[i]
    if not (i == #ps and t % 4 == 0) then p.grad = T(F.A[n]) * p:detach() + T(F.B[n]) * cs end
  end
  opt:step()
end

local function check_step(c, t, ps, what)
  local tol = tolerance(c)
  for i, p in ipairs(ps) do
    local e = max_rel(p:detach(), T(c.trajectory[t][i]))
    assert(e <= tol, ("%s%s after step %d: relative error %.3g > %.1g"):format(what or "", c.params[i], t, e, tol))
  end
end

describe("Muon, Lion and Adafactor match their references step by step (float64, 20 steps)", function()
  for _, c in ipairs(F.cases) do
    it(label(c), function()
      local opt, ps = make(c)
      for t = 1, F.steps do
        step(opt, c, ps, t)
        check_step(c, t, ps)
      end
      local names = {}
      for k in pairs(opt.state[1]) do names[#names + 1] = k end
      table.sort(names)
      assert.are.same(c.state, names, "the state's names are torch's")
    end)
  end

  it("Muon's bfloat16 iteration stays near the float64 one (the same run, ember against ember)", function()
    local c
    for _, k in ipairs(F.cases) do if k.optimizer == "Muon" and k.options.ns_dtype == nil then c = k end end
    local o64 = copy(c.options)
    o64.ns_dtype = "float64"
    local ps16, ps64 = {}, {}
    for i, n in ipairs(c.params) do
      ps16[i], ps64[i] = T(F.P[n]):requires_grad_(true), T(F.P[n]):requires_grad_(true)
    end
    local a, b = optim.Muon(ps16, copy(c.options)), optim.Muon(ps64, o64)
    step(a, c, ps16, 1)
    step(b, c, ps64, 1)
    local moved = max_rel(ps16[1]:detach() - T(F.P.w1), ps64[1]:detach() - T(F.P.w1))
    assert(moved > 1e-4 and moved < 5e-2, ("first bf16 step against the float64 one: %.3g"):format(moved))
  end)
end)

describe("a state_dict round trip mid-run (through a file) goes on the same", function()
  for _, c in ipairs(F.cases) do
    it(label(c), function()
      local opt, ps = make(c)
      for t = 1, 10 do step(opt, c, ps, t) end
      local fresh, qs = make(c)
      ember.no_grad(function() for i, q in ipairs(qs) do q:copy_(ps[i]) end end)
      ember.save(opt:state_dict(), TMP)
      fresh:load_state_dict(ember.load(TMP))
      for t = 11, F.steps do
        step(opt, c, ps, t)
        step(fresh, c, qs, t)
        check_step(c, t, ps, "the saved one: ")
        check_step(c, t, qs, "the loaded one: ")
      end
    end)
  end

  it("Adafactor refuses factored moments of the wrong shape, naming the one it wants", function()
    local p = ember.randn(3, 4):requires_grad_()
    local opt = optim.Adafactor({ p })
    p.grad = ember.ones(3, 4)
    opt:step()
    local sd = opt:state_dict()
    sd.state[1].row_var = ember.zeros(1, 4)
    raises_here(function() optim.Adafactor({ p }):load_state_dict(sd) end,
      "Adafactor: load_state_dict: state 'row_var' of parameter 1 has shape [1, 4], the parameter's row_var is [3, 1]")
  end)
end)

describe("options", function()
  it("are registered in ember.optim, with torch's positional order after lr", function()
    assert.are.equal(require "ember.optim.Muon", optim.Muon)
    assert.are.equal(require "ember.optim.Lion", optim.Lion)
    assert.are.equal(require "ember.optim.Adafactor", optim.Adafactor)
    local w = ember.zeros(3, 2):requires_grad_()
    local g = optim.Muon({ w }, 0.02, 0, 0.9, false).param_groups[1]
    assert.are.same({ 0.02, 0, 0.9, false }, { g.lr, g.weight_decay, g.momentum, g.nesterov })
    g = optim.Lion({ w }, 3e-4, { 0.95, 0.98 }, 0.1).param_groups[1]
    assert.are.same({ 3e-4, { 0.95, 0.98 }, 0.1 }, { g.lr, g.betas, g.weight_decay })
    g = optim.Adafactor({ w }, 0.05, -0.5, { 1e-30, 1e-3 }, 2.0, 0.1, { maximize = true }).param_groups[1]
    assert.are.same({ 0.05, -0.5, { 1e-30, 1e-3 }, 2.0, 0.1, true },
      { g.lr, g.beta2_decay, g.eps, g.d, g.weight_decay, g.maximize })
  end)

  it("have torch's defaults (torch.optim.Muon's, lucidrains' Lion, torch.optim.Adafactor's)", function()
    local w = ember.zeros(3, 2):requires_grad_()
    local g = optim.Muon({ w }).param_groups[1]
    assert.are.same({ 1e-3, 0.1, 0.95, true, { 3.4445, -4.7750, 2.0315 }, 1e-7, 5, "original", "bfloat16" },
      { g.lr, g.weight_decay, g.momentum, g.nesterov, g.ns_coefficients, g.eps, g.ns_steps, g.adjust_lr_fn,
        g.ns_dtype })
    g = optim.Lion({ w }).param_groups[1]
    assert.are.same({ 1e-4, { 0.9, 0.99 }, 0, false }, { g.lr, g.betas, g.weight_decay, g.maximize })
    g = optim.Adafactor({ w }).param_groups[1]
    assert.are.same({ 1e-2, -0.8, { "auto", 1e-3 }, 1.0, 0, false },
      { g.lr, g.beta2_decay, g.eps, g.d, g.weight_decay, g.maximize })
  end)

  it("that are wrong are refused at the caller's line, naming the optimizer", function()
    local w, v = ember.zeros(4, 3):requires_grad_(), ember.zeros(4):requires_grad_()
    raises_here(function() optim.Muon({ w }, { lr = -0.1 }) end, "Muon: lr must be a number >= 0, got -0.1")
    raises_here(function() optim.Lion({ w }, { lr = -1e-4 }) end, "Lion: lr must be a number >= 0, got -0.0001")
    raises_here(function() optim.Adafactor({ w }, { lr = -1 }) end, "Adafactor: lr must be a number >= 0, got -1")
    raises_here(function() optim.Muon({ v }) end,
      "Muon: group 1, parameter 1 has shape [4] (1-D): Muon takes only the 2-D weight matrices of hidden layers; "
      .. "give biases, norm weights, embeddings and the output layer to another optimizer (optim.AdamW) and step both")
    raises_here(function() optim.Muon({ { params = { w } }, { params = { ember.zeros(2, 3, 3):requires_grad_() } } }) end,
      "Muon: group 2, parameter 1 has shape [2, 3, 3] (3-D)")
    raises_here(function() optim.Muon(nn.Linear(3, 4)) end, "Muon: group 1, parameter 2 has shape [4] (1-D)")
    raises_here(function() optim.Muon({ w }, { momentum = 1 }) end, "Muon: momentum must be a number in [0, 1), got 1")
    raises_here(function() optim.Muon({ w }, { momentum = -0.5 }) end, "Muon: momentum must be a number in [0, 1), got -0.5")
    raises_here(function() optim.Muon({ w }, { weight_decay = -0.1 }) end, "Muon: weight_decay must be a number >= 0, got -0.1")
    raises_here(function() optim.Muon({ w }, { nesterov = 1 }) end, "Muon: nesterov must be a boolean, got 1")
    raises_here(function() optim.Muon({ w }, { ns_steps = 2.5 }) end, "Muon: ns_steps must be an integer in [0, 100), got 2.5")
    raises_here(function() optim.Muon({ w }, { ns_steps = 100 }) end, "Muon: ns_steps must be an integer in [0, 100), got 100")
    raises_here(function() optim.Muon({ w }, { ns_coefficients = { 1, 2 } }) end,
      "Muon: ns_coefficients must be {a, b, c}, three numbers, got {1, 2}")
    raises_here(function() optim.Muon({ w }, { adjust_lr_fn = "adamw" }) end,
      "Muon: adjust_lr_fn must be \"original\" or \"match_rms_adamw\", got adamw")
    raises_here(function() optim.Muon({ w }, { ns_dtype = "float16" }) end,
      "Muon: ns_dtype must be \"bfloat16\", \"float32\" or \"float64\", got float16")
    raises_here(function() optim.Muon({ w }, { betas = { 0.9, 0.99 } }) end, "Muon: unknown option 'betas'")
    raises_here(function() optim.Lion({ w }, { betas = { 0.9, 1.0 } }) end,
      "Lion: betas must be {beta1, beta2} with each in [0, 1), got {0.9, 1.0}")
    raises_here(function() optim.Lion({ w }, { betas = { -0.1, 0.99 } }) end,
      "Lion: betas must be {beta1, beta2} with each in [0, 1), got {-0.1, 0.99}")
    raises_here(function() optim.Lion({ w }, { betas = { 0.9, 0 / 0 } }) end, "Lion: betas must be {beta1, beta2}")
    raises_here(function() optim.Lion({ w }, { weight_decay = -1 }) end, "Lion: weight_decay must be a number >= 0, got -1")
    raises_here(function() optim.Lion({ w }, { eps = 1e-8 }) end, "Lion: unknown option 'eps'")
    raises_here(function() optim.Adafactor({ w }, { beta2_decay = 0.5 }) end,
      "Adafactor: beta2_decay must be a number <= 0, got 0.5")
    raises_here(function() optim.Adafactor({ w }, { eps = { -1, 1e-3 } }) end,
      "Adafactor: eps must be {eps1, eps2}, eps1 >= 0 or nil (the dtype's machine epsilon) and eps2 >= 0, got {-1, 0.001}")
    raises_here(function() optim.Adafactor({ w }, { eps = 1e-3 }) end, "Adafactor: eps must be {eps1, eps2}")
    raises_here(function() optim.Adafactor({ w }, { d = 0.9 }) end,
      "Adafactor: d (the update clipping threshold) must be a number >= 1, got 0.9")
    raises_here(function() optim.Adafactor({ w }, { weight_decay = -0.1 }) end,
      "Adafactor: weight_decay must be a number >= 0, got -0.1")
  end)

  it("eps1 nil or \"auto\" is the dtype's machine epsilon; the caller's table is left as it was", function()
    local e = { nil, 1e-3 }
    local g = optim.Adafactor({ ember.zeros(2, 2):requires_grad_() }, { eps = e }).param_groups[1]
    assert.are.same({ "auto", 1e-3 }, g.eps)
    assert.is_nil(e[1])
    -- float32: eps1 = 2^-23; a gradient of zeros then moves nothing (U = 0 / sqrt(eps1^2))
    local p = ember.ones(2, 2):requires_grad_()
    local opt = optim.Adafactor({ p })
    p.grad = ember.zeros(2, 2)
    opt:step()
    assert.are.same({ { 1, 1 }, { 1, 1 } }, p:tolist())
  end)
end)

describe("Muon trains", function()
  -- an MLP on y = sin(2 x1) * x2: Muon for the hidden 32x32 matrix, AdamW for the rest
  local function train(steps)
    ember.manual_seed(11)
    local model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
    local x = ember.rand(256, 2) * 4 - 2
    local y = (x:narrow(2, 1, 1) * 2):sin() * x:narrow(2, 2, 1)
    local muon = optim.Muon({ model[3].weight }, { lr = 0.02, weight_decay = 0 })
    local rest = { model[1].weight, model[1].bias, model[3].bias, model[5].weight, model[5].bias }
    local adamw = optim.AdamW(rest, { lr = 1e-2, weight_decay = 0 })
    local losses = {}
    for s = 1, steps do
      muon:zero_grad()
      adamw:zero_grad()
      local loss = nn.functional.mse_loss(model(x), y)
      loss:backward()
      muon:step()
      adamw:step()
      losses[s] = loss:item()
    end
    return losses
  end

  it("an MLP with AdamW for the rest to a loss of 0.02 in 300 steps, the same way twice", function()
    local a = train(300)
    assert(a[1] > 0.3, ("the first loss %.4g"):format(a[1]))
    assert(a[300] < 0.02, ("the loss after 300 steps: %.4g"):format(a[300]))
    assert.are.same(a, train(300))
  end)
end)
