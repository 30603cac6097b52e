--- optim.MultiStepLR(optimizer, milestones [, gamma = 0.1]), or
-- optim.MultiStepLR(optimizer, {milestones =, gamma =}):
-- torch.optim.lr_scheduler.MultiStepLR, the lr times gamma at each
-- milestone (step counts, in any order; one listed twice counts twice):
--   factor(s) = gamma ^ (the number of milestones <= s)
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.MultiStepLR(opt, {30, 80}, 0.1)
-- @classmod optim.MultiStepLR
local Scheduler = require "ember.optim.Scheduler"

local MultiStepLR = Scheduler:extend("MultiStepLR")

function MultiStepLR:__init(optimizer, ...)
  local first = ...
  -- a list of milestones is itself a table: only {milestones = ...} is the options form
  local o = type(first) == "table" and first.milestones == nil
    and { milestones = first, gamma = select(2, ...), last_epoch = select(3, ...), verbose = select(4, ...) }
    or self:_torch_opts({ "milestones", "gamma" }, ...)
  local m = o.milestones
  if type(m) ~= "table" or #m == 0 then self:_error("milestones must be a list of step counts, got %s", tostring(m)) end
  -- any order, and a milestone given twice multiplies by gamma twice (torch keeps a Counter)
  for i, v in ipairs(m) do
    if math.type(v) ~= "integer" or v < 1 then
      self:_error("milestones must be positive integers, got %s at %d", tostring(v), i)
    end
  end
  self.milestones, self.gamma = { table.unpack(m) }, self:_check_gamma(o.gamma, 0.1)
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose)
end

--- gamma ^ (milestones passed)
-- @tparam integer s the step
function MultiStepLR:factor(s)
  local n = 0
  for _, v in ipairs(self.milestones) do if s >= v then n = n + 1 end end
  return self.gamma ^ n
end

--- PyTorch's chainable form: lr times gamma at a milestone.
-- @number lr the group's lr
-- @tparam integer s the step
function MultiStepLR:chain(lr, s)
  for _, v in ipairs(self.milestones) do if v == s then lr = lr * self.gamma end end
  return lr
end

return MultiStepLR
