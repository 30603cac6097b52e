-- Optimizer and scheduler state dicts that torch 1.13 saved (torch.save,
-- tests/fixtures/optim_torch_state.pt, read by ember.load), loaded into a
-- fresh ember optimizer and scheduler over fresh parameters: the run goes
-- on as torch's did after the same load (tests/fixtures/optim_torch_state.lua,
-- made by tests/gen_optim_torch_files.py). Also torch's MultiStepLR
-- milestones in any order, one listed twice (its Counter).
local ember = require "ember"
local optim = require "ember.optim"
local parity = require "tests.lua.helpers.parity"

local F = dofile("tests/fixtures/optim_torch_state.lua")
local SAVED = ember.load("tests/fixtures/optim_torch_state.pt")
local L = optim.lr_scheduler

-- The generator's SGD: two groups, lr 0.1 and 0.05, momentum 0.9.
local function sgd2()
  local a, b = ember.zeros(2, { requires_grad = true }), ember.zeros(2, { requires_grad = true })
  return optim.SGD({ { params = { a } }, { params = { b }, lr = 0.05 } }, { lr = 0.1, momentum = 0.9 })
end

-- The generator's schedulers, made the same way.
local SCHEDULERS = {
  StepLR = function(o) return L.StepLR(o, 4, 0.5) end,
  MultiStepLR = function(o) return L.MultiStepLR(o, { 3, 12, 20 }, 0.5) end,
  ExponentialLR = function(o) return L.ExponentialLR(o, 0.9) end,
  CosineAnnealingLR = function(o) return L.CosineAnnealingLR(o, 12, 0.001) end,
  LambdaLR = function(o) return L.LambdaLR(o, function(e) return 0.9 ^ e end) end,
  MultiplicativeLR = function(o) return L.MultiplicativeLR(o, function() return 0.95 end) end,
  LinearLR = function(o) return L.LinearLR(o, 0.1, 1.0, 20) end,
  ConstantLR = function(o) return L.ConstantLR(o, 0.5, 15) end,
  PolynomialLR = function(o) return L.PolynomialLR(o, 25, 2.0) end,
  CosineAnnealingWarmRestarts = function(o) return L.CosineAnnealingWarmRestarts(o, 3, 2, 0.001) end,
  SequentialLR = function(o)
    return L.SequentialLR(o, { L.LinearLR(o, 0.2, nil, 5), L.ExponentialLR(o, 0.9) }, { 5 })
  end,
  ChainedScheduler = function(o) return L.ChainedScheduler({ L.StepLR(o, 4, 0.5), L.ExponentialLR(o, 0.95) }) end,
  ReduceLROnPlateau = function(o) return L.ReduceLROnPlateau(o, { patience = 1, cooldown = 1 }) end,
}

local function near_lrs(want, o, what)
  for g = 1, 2 do
    local got = o.param_groups[g].lr
    assert(math.abs(want[g] - got) <= 1e-12 * math.max(1, math.abs(want[g])),
      ("%s, group %d: torch %.17g, ember %.17g"):format(what, g, want[g], got))
  end
end

describe("a scheduler's state_dict saved by torch 1.13 loads and goes on as torch's", function()
  local names = parity.sorted_keys(SCHEDULERS)
  it("(every case of the generator is here)", function()
    assert.are.same(parity.sorted_keys(F.schedulers), names)
  end)
  for _, name in ipairs(names) do
    it(name, function()
      local o = sgd2()
      local s = SCHEDULERS[name](o)
      o:load_state_dict(SAVED[name].opt)
      s:load_state_dict(SAVED[name].sched)
      for k, want in ipairs(F.schedulers[name]) do
        local i = F.cut + k
        o:step()
        if name == "ReduceLROnPlateau" then s:step(F.metrics[i]) else s:step() end
        near_lrs(want, o, ("%s step %d"):format(name, i))
      end
    end)
  end
end)

describe("an Adam state_dict saved by torch 1.13 (two groups, per-group betas, amsgrad, weight decay)", function()
  it("loads into a fresh optimizer over fresh parameters and goes on as torch's", function()
    local saved = SAVED.Adam
    local ps = {}
    for i, p in ipairs(saved.params) do ps[i] = p:detach():clone():requires_grad_(true) end
    local w1, b1, w2 = ps[1], ps[2], ps[3]
    local opt = optim.Adam({ { params = { w1, b1 }, betas = { 0.8, 0.99 }, amsgrad = true },
                             { params = { w2 }, lr = 0.05, weight_decay = 0.1 } }, { lr = 0.01 })
    opt:load_state_dict(saved.opt)
    local x = saved.x
    local function closure()
      opt:zero_grad()
      local loss = (ember.tanh(x:matmul(w1:t()) + b1):matmul(w2:t())):pow(2):sum()
      loss:backward()
      return loss
    end
    for _ = 1, F.cut do opt:step(closure) end
    for i, p in ipairs(ps) do
      local want = ember.tensor(F.adam_after[i], { dtype = "float64" })
      assert(parity.max_rel(p:detach():flatten(), want) < 1e-10, "parameter " .. i)
    end
  end)
end)

describe("MultiStepLR's milestones as torch's Counter", function()
  it("in any order, one listed twice multiplying twice", function()
    local o = sgd2()
    local s = L.MultiStepLR(o, { 10, 5, 5 }, 0.5)
    near_lrs(F.multistep_counter[1], o, "step 0")
    for k = 2, #F.multistep_counter do
      o:step()
      s:step()
      near_lrs(F.multistep_counter[k], o, "step " .. (k - 1))
    end
  end)
end)
