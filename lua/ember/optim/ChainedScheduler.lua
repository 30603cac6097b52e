--- optim.ChainedScheduler(schedulers): torch.optim.lr_scheduler.ChainedScheduler,
-- several schedules on one optimizer stepped together: `sched:step()` steps
-- each in the list's order. The chainable ones (StepLR, ExponentialLR,
-- LinearLR, ConstantLR, ...) each multiply the lr by their step's change,
-- so the lr is the base lr times every schedule's factor; a closed-form one
-- (LambdaLR, OneCycleLR, CyclicLR, CosineAnnealingWarmRestarts) sets the
-- lr from its base lr, as in PyTorch. A warm-up under a decay:
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.ChainedScheduler({optim.ConstantLR(opt, 0.5, 2), optim.ExponentialLR(opt, 0.9)})
-- sched:step(); sched:step()
-- print(opt.param_groups[1].lr)   --> 0.081
-- @classmod optim.ChainedScheduler
local Scheduler = require "ember.optim.Scheduler"

local ChainedScheduler = Scheduler:extend("ChainedScheduler")

function ChainedScheduler:__init(schedulers, extra)
  if extra ~= nil then
    self:_error("takes the list of schedules only (each is made on the optimizer), got a second argument")
  end
  if type(schedulers) ~= "table" or getmetatable(schedulers) ~= nil or #schedulers == 0 then
    self:_error("expected a non-empty list of schedules, got %s", type(schedulers))
  end
  for i, s in ipairs(schedulers) do
    local mt = type(s) == "table" and getmetatable(s)
    if not (mt and mt.__name and type(s.step) == "function" and type(s.state_dict) == "function") then
      self:_error("schedulers[%d] is not a schedule (a %s)", i, type(s))
    end
    if mt.__name == "ReduceLROnPlateau" then
      self:_error("schedulers[%d] is a ReduceLROnPlateau, whose step needs the metric: step it on its own", i)
    end
    if s.optimizer ~= schedulers[1].optimizer then
      self:_error("expects every schedule on the same optimizer: schedulers[%d] is on another than schedulers[1]", i)
    end
  end
  self.schedulers, self.optimizer = { table.unpack(schedulers) }, schedulers[1].optimizer
  self.base_lrs, self.last_step = { table.unpack(schedulers[1].base_lrs) }, 0
  self._last_lr = self:_lrs()
end

--- Steps every schedule, in order (no epoch: PyTorch's takes none).
function ChainedScheduler:step(epoch)
  if epoch ~= nil then self:_error("step takes no epoch (step each schedule to an epoch itself)") end
  for _, s in ipairs(self.schedulers) do s:step() end
  self.last_step = self.last_step + 1
  self._last_lr = self:_lrs()
end

--- Not a factor schedule: the lr is its schedules'.
function ChainedScheduler:factor() self:_error("has no factor: the lr is its schedules'") end

-- Nothing of its own to apply: its schedules set the lrs.
function ChainedScheduler:_apply() end

--- {last_step=, base_lrs=, _last_lr=, schedulers={each one's state_dict()}}, for checkpoints.
function ChainedScheduler:state_dict()
  local sd = Scheduler.state_dict(self)
  sd.schedulers = {}
  for i, s in ipairs(self.schedulers) do sd.schedulers[i] = s:state_dict() end
  return sd
end

--- Restores a state_dict() (or torch's, read by ember.load): every schedule's, then the lrs they left together.
-- @tparam table sd
function ChainedScheduler:load_state_dict(sd)
  sd = self:_from_torch(sd) -- torch's layout, from a file torch.save wrote
  if type(sd) ~= "table" or type(sd.schedulers) ~= "table" or #sd.schedulers ~= #self.schedulers
    or type(sd._last_lr) ~= "table" then
    self:_error("load_state_dict: expected {last_step =, base_lrs =, _last_lr =, schedulers = {%d states}}",
      #self.schedulers)
  end
  for i, s in ipairs(self.schedulers) do s:load_state_dict(sd.schedulers[i]) end
  return Scheduler.load_state_dict(self, sd)
end

return ChainedScheduler
