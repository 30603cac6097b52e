--- optim.LambdaLR(optimizer, lr_lambda), or optim.LambdaLR(optimizer, {lr_lambda =}):
-- torch.optim.lr_scheduler.LambdaLR, the base lr times a function of the
-- step count (0 at construction):
--   factor(s) = lr_lambda(s)
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.LambdaLR(opt, function(epoch) return 0.95 ^ epoch end)
-- @classmod optim.LambdaLR
local Scheduler = require "ember.optim.Scheduler"

local LambdaLR = Scheduler:extend("LambdaLR")

function LambdaLR:__init(optimizer, ...)
  local first = ...
  local o = type(first) == "function" and { lr_lambda = first } or self:_torch_opts({ "lr_lambda" }, ...)
  if type(o.lr_lambda) ~= "function" then
    self:_error("lr_lambda must be a function of the step, got %s", type(o.lr_lambda))
  end
  self.lr_lambda = o.lr_lambda
  Scheduler.__init(self, optimizer)
end

--- lr_lambda(s), which must return a number
-- @tparam integer s the step
function LambdaLR:factor(s)
  local f = self.lr_lambda(s)
  if type(f) ~= "number" then self:_error("lr_lambda(%d) returned %s, expected a number", s, type(f)) end
  return f
end

return LambdaLR
