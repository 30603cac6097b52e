--- optim.ConstantLR(optimizer [, factor = 1/3 [, total_iters = 5]]), or
-- optim.ConstantLR(optimizer, {factor =, total_iters =}):
-- torch.optim.lr_scheduler.ConstantLR, the base lr times factor for the
-- first total_iters steps, then the base lr:
--   factor(s) = s < total_iters and factor or 1
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.ConstantLR(opt, 0.5, 4)  -- 0.05 for 4 steps, then 0.1
-- @classmod optim.ConstantLR
local Scheduler = require "ember.optim.Scheduler"

local ConstantLR = Scheduler:extend("ConstantLR")

function ConstantLR:__init(optimizer, ...)
  local o = self:_torch_opts({ "factor", "total_iters" }, ...)
  local f, t = o.factor, o.total_iters
  if f == nil then f = 1 / 3 end
  if t == nil then t = 5 end
  if type(f) ~= "number" or not (f >= 0 and f <= 1) then
    self:_error("factor must be a number in [0, 1], got %s", tostring(f))
  end
  if math.type(t) ~= "integer" or t < 1 then self:_error("total_iters must be a positive integer, got %s", tostring(t)) end
  self.const_factor, self.total_iters = f, t
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose)
end

--- factor before step total_iters, 1 from there on
-- @tparam integer s the step
function ConstantLR:factor(s) return s < self.total_iters and self.const_factor or 1 end

--- PyTorch's chainable form: lr times factor at step 0, divided by it at
-- total_iters (with factor 0, where PyTorch divides by zero, the base lr).
-- @number lr the group's lr
-- @tparam integer s the step
-- @tparam integer i the group
function ConstantLR:chain(lr, s, i)
  if s == 0 then return lr * self.const_factor end
  if s ~= self.total_iters then return lr end
  if self.const_factor == 0 then return self.base_lrs[i] end -- nil (left out) for a group added later
  return lr * (1.0 / self.const_factor)
end

return ConstantLR
