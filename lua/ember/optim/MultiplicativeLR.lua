--- optim.MultiplicativeLR(optimizer, lr_lambda), or optim.MultiplicativeLR(optimizer, {lr_lambda =}):
-- torch.optim.lr_scheduler.MultiplicativeLR, each step the lr times lr_lambda of the step:
--   factor(s) = lr_lambda(1) * lr_lambda(2) * ... * lr_lambda(s)
-- lr_lambda may be a list of functions, one per parameter group, as LambdaLR's
-- (whose checks it shares). Each step multiplies the group's lr (PyTorch's
-- chainable form); the product is kept for a state_dict saved without lrs.
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.MultiplicativeLR(opt, function(epoch) return 0.95 end)
-- sched:step()
-- print(opt.param_groups[1].lr)   --> 0.095
-- @classmod optim.MultiplicativeLR
local LambdaLR = require "ember.optim.LambdaLR"

local MultiplicativeLR = LambdaLR:extend("MultiplicativeLR")

--- lr_lambda(1) * ... * lr_lambda(s) (group i's functions when lr_lambda is a list)
-- @tparam integer s the step
-- @tparam[opt=1] integer i the group
function MultiplicativeLR:factor(s, i)
  i = i or 1
  self._products = self._products or {}
  local p = self._products[i]
  if not p or p.s > s then p = { s = 0, v = 1 } end
  for k = p.s + 1, s do p = { s = k, v = p.v * LambdaLR.factor(self, k, i) } end
  self._products[i] = p
  return p.v
end

-- PyTorch's has no closed form: step(epoch) (and a restart in SequentialLR) chain too.
MultiplicativeLR.chain_only = true

--- PyTorch's chainable form: lr times lr_lambda(s) (from step 1).
-- @number lr the group's lr
-- @tparam integer s the step
-- @tparam integer i the group
function MultiplicativeLR:chain(lr, s, i)
  if i > #self.base_lrs then return nil end -- a group added later: PyTorch zips with its lambdas
  if s > 0 then return lr * LambdaLR.factor(self, s, i) end
  return lr
end

return MultiplicativeLR
