--- optim.LambdaLR(optimizer, lr_lambda), or optim.LambdaLR(optimizer, {lr_lambda =}):
-- torch.optim.lr_scheduler.LambdaLR, the base lr times a function of the
-- step count (0 at construction):
--   factor(s) = lr_lambda(s)
-- lr_lambda may be a list of functions, one per parameter group (group i
-- follows lr_lambda[i]), as PyTorch's.
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.LambdaLR(opt, function(epoch) return 0.95 ^ epoch end)
-- @classmod optim.LambdaLR
local Scheduler = require "ember.optim.Scheduler"

local LambdaLR = Scheduler:extend("LambdaLR")

function LambdaLR:__init(optimizer, ...)
  local first = ...
  local o = type(first) == "function" and { lr_lambda = first, last_epoch = select(2, ...), verbose = select(3, ...) }
    or self:_torch_opts({ "lr_lambda" }, ...)
  local fns = o.lr_lambda
  if type(fns) == "table" and getmetatable(fns) == nil then
    local groups = type(optimizer) == "table" and type(optimizer.param_groups) == "table" and #optimizer.param_groups
    if groups and #fns ~= groups then
      self:_error("expected %d lr_lambdas (one per parameter group), got %d", groups, #fns)
    end
    for i, f in ipairs(fns) do
      if type(f) ~= "function" then self:_error("lr_lambda[%d] must be a function of the step, got %s", i, type(f)) end
    end
  elseif type(fns) ~= "function" then
    self:_error("lr_lambda must be a function of the step, got %s", type(fns))
  end
  self.lr_lambda = fns
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose)
end

--- lr_lambda(s) (group i's function when lr_lambda is a list), which must return a number
-- @tparam integer s the step
-- @tparam[opt=1] integer i the group
function LambdaLR:factor(s, i)
  local fn = self.lr_lambda
  if type(fn) == "table" then fn = fn[i or 1] end
  local f = fn(s)
  if type(f) ~= "number" then self:_error("lr_lambda(%d) returned %s, expected a number", s, type(f)) end
  return f
end

return LambdaLR
