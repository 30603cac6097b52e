--- optim.CyclicLR(optimizer, {base_lr =, max_lr =, step_size_up = 2000,
-- step_size_down = step_size_up, mode = "triangular", gamma = 1, scale_fn =,
-- scale_mode = "cycle", cycle_momentum = true, base_momentum = 0.8,
-- max_momentum = 0.9}) (or PyTorch's positional order):
-- torch.optim.lr_scheduler.CyclicLR, stepped after every batch. The lr goes
-- from base_lr up to max_lr over step_size_up steps and back down over
-- step_size_down, the height scaled per cycle by mode: "triangular" (1),
-- "triangular2" (halved each cycle) or "exp_range" (gamma ^ step), or by
-- scale_fn(x) (x: the cycle, or the step with scale_mode = "iterations").
-- With cycle_momentum (the default) the optimizer's momentum moves the other
-- way, max_momentum to base_momentum: an optimizer without a momentum
-- option (Adam) needs cycle_momentum = false, as in PyTorch 1.13.
-- base_lr, max_lr, base_momentum, max_momentum may list one value per group.
-- Resumed with last_epoch, the momentum cycles from base_momentum as given
-- (PyTorch 1.13 takes each group's momentum at that moment as its
-- base_momentum instead: a deliberate difference).
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1, momentum = 0.9})
-- local sched = optim.CyclicLR(opt, {base_lr = 0.01, max_lr = 0.1, step_size_up = 500})
-- @classmod optim.CyclicLR
local Scheduler = require "ember.optim.Scheduler"

local CyclicLR = Scheduler:extend("CyclicLR")
CyclicLR._own_lrs = true -- base_lr is its own (SequentialLR keeps it)

local NAMES = { "base_lr", "max_lr", "step_size_up", "step_size_down", "mode", "gamma", "scale_fn", "scale_mode",
                "cycle_momentum", "base_momentum", "max_momentum" }

local function nonneg(x) return x >= 0 and x < math.huge end

function CyclicLR:__init(optimizer, ...)
  local o = self:_torch_opts(NAMES, ...)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    self:_error("expected an optimizer, got %s", type(optimizer))
  end
  for _, k in ipairs { "base_lr", "max_lr" } do
    if o[k] == nil then self:_error("%s is required (a number, or one per parameter group)", k) end
  end
  local base = self:_per_group(optimizer, "base_lr", o.base_lr, nil, "a number >= 0", nonneg)
  self.max_lrs = self:_per_group(optimizer, "max_lr", o.max_lr, nil, "a number >= 0", nonneg)
  local up = o.step_size_up == nil and 2000 or o.step_size_up
  if type(up) ~= "number" or not (up > 0 and up < math.huge) then
    self:_error("step_size_up must be a number > 0, got %s", tostring(up))
  end
  local down = o.step_size_down == nil and up or o.step_size_down
  if type(down) ~= "number" or not nonneg(down) then
    self:_error("step_size_down must be a number >= 0, got %s", tostring(down))
  end
  self.total_size = up + down + 0.0
  self.step_ratio = up / self.total_size
  local mode, fn = o.mode or "triangular", o.scale_fn
  if fn ~= nil and type(fn) ~= "function" then self:_error("scale_fn must be a function, got %s", type(fn)) end
  if fn == nil and mode ~= "triangular" and mode ~= "triangular2" and mode ~= "exp_range" then
    self:_error("mode must be \"triangular\", \"triangular2\" or \"exp_range\" (or give scale_fn), got %s", tostring(mode))
  end
  local gamma = o.gamma == nil and 1.0 or o.gamma
  if type(gamma) ~= "number" or not (gamma > 0 and gamma < math.huge) then
    self:_error("gamma must be a number > 0, got %s", tostring(gamma))
  end
  self.mode, self.gamma = mode, gamma
  if fn then
    self.scale_mode = o.scale_mode or "cycle"
    if self.scale_mode ~= "cycle" and self.scale_mode ~= "iterations" then
      self:_error("scale_mode must be \"cycle\" or \"iterations\", got %s", tostring(self.scale_mode))
    end
    self.scale_fn = fn
  else
    self.scale_mode = mode == "exp_range" and "iterations" or "cycle"
  end
  local cyc = o.cycle_momentum
  if cyc == nil then cyc = true end
  if type(cyc) ~= "boolean" then self:_error("cycle_momentum must be a boolean, got %s", tostring(cyc)) end
  self.cycle_momentum = cyc
  if cyc then
    self.momentum_option = self:_momentum_option(optimizer, false)
    self.base_momentums = self:_per_group(optimizer, "base_momentum", o.base_momentum, 0.8, "a number >= 0", nonneg)
    self.max_momentums = self:_per_group(optimizer, "max_momentum", o.max_momentum, 0.9, "a number >= 0", nonneg)
  end
  -- PyTorch sets each group's lr to base_lr first (the initial_lr of a
  -- first schedule); base_lr is its base
  if o.last_epoch == nil or o.last_epoch == -1 then
    for i, g in ipairs(optimizer.param_groups) do g.lr = base[i] end
  end
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose, base)
end

--- The height's scale at cycle `cycle` or step `s`: mode's, or scale_fn's.
-- @tparam integer cycle the cycle (1-based)
-- @tparam integer s the step
function CyclicLR:scale(cycle, s)
  local x = self.scale_mode == "cycle" and cycle or s
  if self.scale_fn then
    local v = self.scale_fn(x)
    if type(v) ~= "number" then self:_error("scale_fn(%s) returned %s, expected a number", tostring(x), type(v)) end
    return v
  end
  if self.mode == "triangular" then return 1.0 end
  if self.mode == "triangular2" then return 1 / (2.0 ^ (x - 1)) end
  return self.gamma ^ x
end

--- The share of (max_lr - base_lr) at step s, before the scale: 0 -> 1 -> 0 over a cycle.
-- @tparam integer s the step
function CyclicLR:factor(s)
  local cycle = math.floor(1 + s / self.total_size)
  local x = 1.0 + s / self.total_size - cycle
  if x <= self.step_ratio then return x / self.step_ratio, cycle end
  return (x - 1) / (self.step_ratio - 1), cycle
end

function CyclicLR:_apply()
  local s = self.last_step
  local f, cycle = self:factor(s)
  local sc = self:scale(cycle, s)
  for i, g in ipairs(self:_groups()) do
    g.lr = self.base_lrs[i] + (self.max_lrs[i] - self.base_lrs[i]) * f * sc
    if self.cycle_momentum then
      Scheduler._set_momentum(g, self.momentum_option,
        self.max_momentums[i] - (self.max_momentums[i] - self.base_momentums[i]) * f * sc)
    end
  end
end

return CyclicLR
