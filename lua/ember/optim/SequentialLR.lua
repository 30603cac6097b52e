--- optim.SequentialLR(optimizer, schedulers, milestones), or
-- optim.SequentialLR(optimizer, schedulers, {milestones =}), or
-- optim.SequentialLR(optimizer, {schedulers =, milestones =}):
-- torch.optim.lr_scheduler.SequentialLR, one schedule after another: the
-- first until step milestones[1], where the second starts at its own step 0,
-- and so on (one milestone fewer than schedules). The schedules are made
-- on the same optimizer first; each one starts from the lrs the optimizer
-- had before the first schedule was made (PyTorch's initial_lr), not from
-- what the schedules made before it left.
-- @usage local opt = optim.AdamW(nn.Linear(4, 2), {lr = 1e-3})
-- local warm = optim.LinearLR(opt, {start_factor = 0.01, total_iters = 100})
-- local decay = optim.CosineAnnealingLR(opt, {T_max = 900})
-- local sched = optim.SequentialLR(opt, {warm, decay}, {100})
-- @classmod optim.SequentialLR
local Scheduler = require "ember.optim.Scheduler"

local SequentialLR = Scheduler:extend("SequentialLR")

function SequentialLR:__init(optimizer, ...)
  local first = ...
  local o
  if type(first) == "table" and getmetatable(first) == nil and first[1] ~= nil then
    o = { schedulers = first, milestones = select(2, ...), last_epoch = select(3, ...), verbose = select(4, ...) }
    local rest = o.milestones
    if type(rest) == "table" and getmetatable(rest) == nil and rest[1] == nil and next(rest) ~= nil then
      -- (opt, {s1, s2}, {milestones = {k}}): torch's keyword spelt as an options table
      for k in pairs(rest) do
        if k ~= "milestones" and k ~= "last_epoch" and k ~= "verbose" then
          self:_error("unknown option '%s' (expected milestones, last_epoch, verbose)", tostring(k))
        end
      end
      o.milestones, o.last_epoch, o.verbose = rest.milestones, rest.last_epoch, rest.verbose
    end
  else
    o = self:_torch_opts({ "schedulers", "milestones" }, ...)
  end
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    self:_error("expected an optimizer, got %s", type(optimizer))
  end
  local ss, ms = o.schedulers, o.milestones
  if type(ss) ~= "table" or #ss == 0 then self:_error("schedulers must be a non-empty list of schedules, got %s", tostring(ss)) end
  for i, s in ipairs(ss) do
    local name = type(s) == "table" and getmetatable(s) and getmetatable(s).__name
    if type(s) ~= "table" or type(s.step) ~= "function" or type(s._restart) ~= "function" or not name then
      self:_error("schedulers[%d] is not a schedule (a %s)", i, type(s))
    end
    if name == "ReduceLROnPlateau" or name == "SequentialLR" or name == "ChainedScheduler" then
      self:_error("schedulers[%d] is a %s, which cannot run inside SequentialLR", i, name)
    end
    if s.optimizer ~= optimizer then self:_error("schedulers[%d] belongs to another optimizer", i) end
  end
  if type(ms) ~= "table" then
    self:_error("milestones must be a list of steps ({%s}), got %s %s", tostring(ms), type(ms) == "number" and "the number"
      or "a", type(ms) == "number" and tostring(ms) or type(ms))
  end
  if #ms ~= #ss - 1 then
    self:_error("expects one milestone fewer than schedules: %d schedules, %d milestones", #ss, #ms)
  end
  for i, v in ipairs(ms) do
    if math.type(v) ~= "integer" or v < 1 or (i > 1 and v <= ms[i - 1]) then
      self:_error("milestones must be increasing positive integers, got %s at %d", tostring(v), i)
    end
  end
  if o.last_epoch ~= nil and o.last_epoch ~= -1 then
    self:_error("last_epoch = %s is not supported: load the state_dict of a SequentialLR to resume",
      tostring(o.last_epoch))
  end
  self.optimizer, self.verbose = optimizer, o.verbose or false
  self.schedulers, self.milestones = { table.unpack(ss) }, { table.unpack(ms) }
  -- PyTorch's: back to the initial lrs, then the first schedule's step 0
  local init = {}
  for i, g in ipairs(optimizer.param_groups) do
    init[i] = g.initial_lr or g.lr
    g.lr = init[i]
  end
  self.base_lrs = { table.unpack(init) }
  for _, s in ipairs(self.schedulers) do
    if not s._own_lrs then s.base_lrs = { table.unpack(init) } end
    s.last_step = 0
  end
  self.last_step = 0
  self.schedulers[1]:_restart()
  self._last_lr = self.schedulers[1]:get_last_lr()
end

--- The index of the schedule that runs at step s.
-- @tparam integer s the step
function SequentialLR:index(s)
  local idx = 1
  for _, m in ipairs(self.milestones) do if s >= m then idx = idx + 1 end end
  return idx
end

--- Not a factor schedule: the lr is the running schedule's.
function SequentialLR:factor() self:_error("has no factor: the lr is its running schedule's") end

function SequentialLR:_apply() self.schedulers[self:index(self.last_step)]:_apply() end

--- Advances one step: the running schedule steps, or the next one starts at a milestone.
function SequentialLR:step()
  self.last_step = self.last_step + 1
  local idx = self:index(self.last_step)
  local s = self.schedulers[idx]
  if idx > 1 and self.milestones[idx - 1] == self.last_step then s:_restart() else s:step() end
  -- PyTorch's: the running schedule's lrs (load_state_dict sets _last_lr,
  -- which get_last_lr would otherwise give from then on)
  self._last_lr = s:get_last_lr()
end

--- {last_step=, base_lrs=, schedulers={each one's state_dict()}}, for checkpoints.
function SequentialLR:state_dict()
  local sd = Scheduler.state_dict(self)
  sd.schedulers = {}
  for i, s in ipairs(self.schedulers) do sd.schedulers[i] = s:state_dict() end
  return sd
end

--- Restores a state_dict() (or torch's, read by ember.load): its position and every schedule's.
-- @tparam table sd
function SequentialLR:load_state_dict(sd)
  sd = self:_from_torch(sd) -- torch's layout, from a file torch.save wrote
  if type(sd) ~= "table" or type(sd.schedulers) ~= "table" or #sd.schedulers ~= #self.schedulers then
    self:_error("load_state_dict: expected {last_step =, base_lrs =, schedulers = {%d states}}", #self.schedulers)
  end
  for i, s in ipairs(self.schedulers) do s:load_state_dict(sd.schedulers[i]) end
  return Scheduler.load_state_dict(self, sd)
end

return SequentialLR
