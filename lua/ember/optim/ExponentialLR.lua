--- optim.ExponentialLR(optimizer, gamma), or optim.ExponentialLR(optimizer, {gamma =}):
-- torch.optim.lr_scheduler.ExponentialLR, the lr times gamma every step:
--   factor(s) = gamma ^ s
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.ExponentialLR(opt, 0.95)
-- @classmod optim.ExponentialLR
local Scheduler = require "ember.optim.Scheduler"

local ExponentialLR = Scheduler:extend("ExponentialLR")

function ExponentialLR:__init(optimizer, ...)
  local o = self:_torch_opts({ "gamma" }, ...)
  self.gamma = self:_check_gamma(o.gamma, nil)
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose)
end

--- gamma ^ s
-- @tparam integer s the step
function ExponentialLR:factor(s) return self.gamma ^ s end

--- PyTorch's chainable form: lr times gamma (from step 1).
-- @number lr the group's lr
-- @tparam integer s the step
function ExponentialLR:chain(lr, s) return s == 0 and lr or lr * self.gamma end

return ExponentialLR
