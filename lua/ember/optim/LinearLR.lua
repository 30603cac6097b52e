--- optim.LinearLR(optimizer [, start_factor = 1/3 [, end_factor = 1 [, total_iters = 5]]]), or
-- optim.LinearLR(optimizer, {start_factor =, end_factor =, total_iters =}):
-- torch.optim.lr_scheduler.LinearLR, the base lr times a factor that goes
-- linearly from start_factor to end_factor over total_iters steps, then stays:
--   factor(s) = start_factor + (end_factor - start_factor) * min(s, total_iters) / total_iters
-- A linear warm-up: LinearLR(opt, 0.01, 1, 100); chain a decay after it with SequentialLR.
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.LinearLR(opt, {start_factor = 0.1, total_iters = 10})
-- @classmod optim.LinearLR
local Scheduler = require "ember.optim.Scheduler"

local LinearLR = Scheduler:extend("LinearLR")

function LinearLR:__init(optimizer, ...)
  local o = self:_torch_opts({ "start_factor", "end_factor", "total_iters" }, ...)
  local s, e, t = o.start_factor, o.end_factor, o.total_iters
  if s == nil then s = 1 / 3 end
  if e == nil then e = 1.0 end
  if t == nil then t = 5 end
  -- 0 passes PyTorch 1.13's check, then its step 1 divides by zero (2.0 refuses it)
  if type(s) ~= "number" or not (s > 0 and s <= 1) then
    self:_error("start_factor must be a number in (0, 1], got %s", tostring(s))
  end
  if type(e) ~= "number" or not (e >= 0 and e <= 1) then
    self:_error("end_factor must be a number in [0, 1], got %s", tostring(e))
  end
  if math.type(t) ~= "integer" or t < 1 then self:_error("total_iters must be a positive integer, got %s", tostring(t)) end
  self.start_factor, self.end_factor, self.total_iters = s, e, t
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose)
end

--- start_factor + (end_factor - start_factor) * min(s, total_iters) / total_iters
-- @tparam integer s the step
function LinearLR:factor(s)
  return self.start_factor + (self.end_factor - self.start_factor) * math.min(self.total_iters, s) / self.total_iters
end

--- PyTorch's chainable form: lr times start_factor at step 0, then each step's change.
-- @number lr the group's lr
-- @tparam integer s the step
function LinearLR:chain(lr, s)
  local a, b, T = self.start_factor, self.end_factor, self.total_iters
  if s == 0 then return lr * a end
  if s > T then return lr end
  return lr * (1 + (b - a) / (T * a + (s - 1) * (b - a)))
end

return LinearLR
