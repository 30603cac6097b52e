--- optim.PolynomialLR(optimizer [, total_iters = 5 [, power = 1]]), or
-- optim.PolynomialLR(optimizer, {total_iters =, power =}):
-- torch.optim.lr_scheduler.PolynomialLR, the base lr decayed to 0 at
-- total_iters along a polynomial, then 0:
--   factor(s) = (1 - min(s, total_iters) / total_iters) ^ power
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.PolynomialLR(opt, {total_iters = 100, power = 2})
-- @classmod optim.PolynomialLR
local Scheduler = require "ember.optim.Scheduler"

local PolynomialLR = Scheduler:extend("PolynomialLR")

function PolynomialLR:__init(optimizer, ...)
  local o = self:_torch_opts({ "total_iters", "power" }, ...)
  local t, p = o.total_iters, o.power
  if t == nil then t = 5 end
  if p == nil then p = 1.0 end
  if math.type(t) ~= "integer" or t < 1 then self:_error("total_iters must be a positive integer, got %s", tostring(t)) end
  if type(p) ~= "number" or not (p >= 0 and p < math.huge) then
    self:_error("power must be a finite number >= 0, got %s", tostring(p))
  end
  self.total_iters, self.power = t, p
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose)
end

--- (1 - min(s, total_iters) / total_iters) ^ power
-- @tparam integer s the step
function PolynomialLR:factor(s) return (1 - math.min(self.total_iters, s) / self.total_iters) ^ self.power end

--- PyTorch's chainable form: lr times the polynomial's change at each step.
-- @number lr the group's lr
-- @tparam integer s the step
function PolynomialLR:chain(lr, s)
  local T = self.total_iters
  if s == 0 or s > T then return lr end
  return lr * ((1.0 - s / T) / (1.0 - (s - 1) / T)) ^ self.power
end

return PolynomialLR
