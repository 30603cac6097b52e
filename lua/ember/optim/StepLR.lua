--- optim.StepLR(optimizer, step_size [, gamma = 0.1]), or
-- optim.StepLR(optimizer, {step_size =, gamma =}): torch.optim.lr_scheduler.StepLR,
-- the lr times gamma every step_size steps:
--   factor(s) = gamma ^ floor(s / step_size)
-- A step is a :step() call (an epoch or a batch, as you call it).
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.StepLR(opt, 30, 0.1)  -- lr / 10 every 30 epochs
-- @classmod optim.StepLR
local Scheduler = require "ember.optim.Scheduler"

local StepLR = Scheduler:extend("StepLR")

function StepLR:__init(optimizer, ...)
  local o = self:_torch_opts({ "step_size", "gamma" }, ...)
  if math.type(o.step_size) ~= "integer" or o.step_size < 1 then
    self:_error("step_size must be a positive integer, got %s", tostring(o.step_size))
  end
  self.step_size, self.gamma = o.step_size, self:_check_gamma(o.gamma, 0.1)
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose)
end

--- gamma ^ floor(s / step_size)
-- @tparam integer s the step
function StepLR:factor(s) return self.gamma ^ (s // self.step_size) end

--- PyTorch's chainable form: lr times gamma at every step_size-th step.
-- @number lr the group's lr
-- @tparam integer s the step
function StepLR:chain(lr, s)
  if s == 0 or s % self.step_size ~= 0 then return lr end
  return lr * self.gamma
end

return StepLR
