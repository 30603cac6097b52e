--- optim.OneCycleLR(optimizer, {max_lr =, total_steps = | epochs =, steps_per_epoch =,
-- pct_start = 0.3, anneal_strategy = "cos", cycle_momentum = true,
-- base_momentum = 0.85, max_momentum = 0.95, div_factor = 25,
-- final_div_factor = 1e4, three_phase = false}) (or PyTorch's positional
-- order): torch.optim.lr_scheduler.OneCycleLR, the 1cycle policy, stepped
-- after every batch. The lr rises from max_lr / div_factor to max_lr over
-- the first pct_start of total_steps, then anneals ("cos" or "linear") to
-- max_lr / div_factor / final_div_factor at total_steps; three_phase
-- instead comes back down to max_lr / div_factor symmetrically and anneals
-- to the minimum in a third phase. With cycle_momentum the momentum moves
-- the other way, between max_momentum and base_momentum: SGD's (and
-- RMSprop's) momentum, or the Adam family's beta1, as PyTorch does.
-- max_lr, base_momentum and max_momentum may list one value per group.
-- The schedule sets the lr itself: the optimizer's lr is not used. Stepping
-- past total_steps is an error.
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1, momentum = 0.9})
-- local sched = optim.OneCycleLR(opt, {max_lr = 0.1, epochs = 10, steps_per_epoch = 100})
-- @classmod optim.OneCycleLR
local Scheduler = require "ember.optim.Scheduler"

local OneCycleLR = Scheduler:extend("OneCycleLR")
OneCycleLR._own_lrs = true -- max_lr / div_factor is its base (SequentialLR keeps it)

local NAMES = { "max_lr", "total_steps", "epochs", "steps_per_epoch", "pct_start", "anneal_strategy",
                "cycle_momentum", "base_momentum", "max_momentum", "div_factor", "final_div_factor", "three_phase" }

local function pos(x) return x > 0 and x < math.huge end
local function nonneg(x) return x >= 0 and x < math.huge end

function OneCycleLR:__init(optimizer, ...)
  local o = self:_torch_opts(NAMES, ...)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    self:_error("expected an optimizer, got %s", type(optimizer))
  end
  local function posint(k)
    local v = o[k]
    if math.type(v) ~= "integer" or v < 1 then self:_error("%s must be a positive integer, got %s", k, tostring(v)) end
    return v
  end
  if o.total_steps ~= nil then
    self.total_steps = posint("total_steps")
  elseif o.epochs == nil and o.steps_per_epoch == nil then
    self:_error("give total_steps, or epochs and steps_per_epoch")
  else
    self.total_steps = posint("epochs") * posint("steps_per_epoch")
  end
  local pct = o.pct_start == nil and 0.3 or o.pct_start
  if type(pct) ~= "number" or not (pct >= 0 and pct <= 1) then
    self:_error("pct_start must be a number in [0, 1], got %s", tostring(pct))
  end
  local a = o.anneal_strategy or "cos"
  if a ~= "cos" and a ~= "linear" then self:_error("anneal_strategy must be \"cos\" or \"linear\", got %s", tostring(a)) end
  local div = o.div_factor == nil and 25.0 or o.div_factor
  local fdiv = o.final_div_factor == nil and 1e4 or o.final_div_factor
  if type(div) ~= "number" or not pos(div) then self:_error("div_factor must be a number > 0, got %s", tostring(div)) end
  if type(fdiv) ~= "number" or not pos(fdiv) then
    self:_error("final_div_factor must be a number > 0, got %s", tostring(fdiv))
  end
  local three = o.three_phase or false
  local cyc = o.cycle_momentum
  if cyc == nil then cyc = true end
  for k, v in pairs { cycle_momentum = cyc, three_phase = three } do
    if type(v) ~= "boolean" then self:_error("%s must be a boolean, got %s", k, tostring(v)) end
  end
  if o.max_lr == nil then self:_error("max_lr is required (a number, or one per parameter group)") end
  self.max_lrs = self:_per_group(optimizer, "max_lr", o.max_lr, nil, "a number >= 0", nonneg)
  self.initial_lrs, self.min_lrs = {}, {}
  for i, m in ipairs(self.max_lrs) do
    self.initial_lrs[i] = m / div
    self.min_lrs[i] = self.initial_lrs[i] / fdiv
  end
  self.pct_start, self.anneal_strategy, self.div_factor, self.final_div_factor = pct, a, div, fdiv
  self.three_phase, self.cycle_momentum = three, cyc
  if cyc then
    self.momentum_option = self:_momentum_option(optimizer, true)
    self.max_momentums = self:_per_group(optimizer, "max_momentum", o.max_momentum, 0.95, "a number >= 0", nonneg)
    self.base_momentums = self:_per_group(optimizer, "base_momentum", o.base_momentum, 0.85, "a number >= 0", nonneg)
  end
  local T = self.total_steps
  -- PyTorch's phases: float end steps, lr and momentum from -> to
  if three then
    self.phases = {
      { end_step = pct * T - 1, lr = { "initial_lrs", "max_lrs" }, mom = { "max_momentums", "base_momentums" } },
      { end_step = 2 * pct * T - 2, lr = { "max_lrs", "initial_lrs" }, mom = { "base_momentums", "max_momentums" } },
      { end_step = T - 1, lr = { "initial_lrs", "min_lrs" }, mom = { "max_momentums", "max_momentums" } },
    }
  else
    self.phases = {
      { end_step = pct * T - 1, lr = { "initial_lrs", "max_lrs" }, mom = { "max_momentums", "base_momentums" } },
      { end_step = T - 1, lr = { "max_lrs", "min_lrs" }, mom = { "base_momentums", "max_momentums" } },
    }
  end
  -- PyTorch sets each group's initial_lr (the base lr) to max_lr / div_factor
  if o.last_epoch == nil or o.last_epoch == -1 then
    for i, g in ipairs(optimizer.param_groups) do g.initial_lr = self.initial_lrs[i] end
  end
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose, self.initial_lrs)
end

local function anneal(kind, from, to, pct)
  if kind == "cos" then return to + (from - to) / 2.0 * (math.cos(math.pi * pct) + 1) end
  return (to - from) * pct + from
end

--- The lr and momentum of parameter group i at step s (the momentum nil without cycle_momentum).
-- @tparam integer i the group
-- @tparam integer s the step
function OneCycleLR:at(i, s)
  local start = 0
  for k, ph in ipairs(self.phases) do
    local e = ph.end_step
    if s <= e or k == #self.phases then
      if e == start then
        self:_error("phase %d of the cycle has no steps (pct_start = %s, total_steps = %d): change pct_start",
          k, tostring(self.pct_start), self.total_steps)
      end
      local pct = (s - start) / (e - start)
      local lr = anneal(self.anneal_strategy, self[ph.lr[1]][i], self[ph.lr[2]][i], pct)
      local mom = self.cycle_momentum
        and anneal(self.anneal_strategy, self[ph.mom[1]][i], self[ph.mom[2]][i], pct) or nil
      return lr, mom
    end
    start = e
  end
end

--- Not a factor schedule: see at(i, s).
function OneCycleLR:factor() self:_error("has no factor: its lr is set from max_lr") end

function OneCycleLR:_apply()
  for i, g in ipairs(self:_groups()) do
    local lr, mom = self:at(i, self.last_step)
    g.lr = lr
    if mom ~= nil then Scheduler._set_momentum(g, self.momentum_option, mom) end
  end
end

--- One step (one batch), or to step `epoch`; an error past total_steps, as PyTorch's.
-- @tparam[opt] integer epoch
function OneCycleLR:step(epoch)
  local n = epoch or self.last_step + 1
  if type(n) == "number" and n > self.total_steps then
    self:_error("tried to step %d times; total_steps is %d", n, self.total_steps)
  end
  Scheduler.step(self, epoch)
end

return OneCycleLR
