--- optim.Adagrad(params, {lr=1e-2, lr_decay=0, weight_decay=0,
-- initial_accumulator_value=0, eps=1e-10, maximize=false}):
-- torch.optim.Adagrad (foreach taken and ignored), composed of in-place
-- tensor ops (state: step and sum, PyTorch's names).
--   d = (maximize and -grad or grad) + weight_decay * p;  clr = lr / (1 + (step - 1) * lr_decay)
-- A group's own initial_accumulator_value fills its sums (PyTorch fills
-- every sum at construction from the constructor's value, ignoring the
-- group's, and a group added later fails at its first step: deliberate
-- differences).
--   sum = sum + d^2;  p = p - clr * d / (sqrt(sum) + eps)
-- @classmod optim.Adagrad
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"

local Adagrad = Optimizer:extend("Adagrad", {
  lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10, maximize = false,
}, { "foreach" })
Adagrad.POSITIONAL = { "lr_decay", "weight_decay", "initial_accumulator_value", "eps", "foreach" }

--- Checks a parameter group's options (lr_decay, weight_decay, initial_accumulator_value, eps, maximize).
function Adagrad:check_group(g)
  Optimizer.check_group(self, g)
  for _, k in ipairs { "lr_decay", "weight_decay", "initial_accumulator_value", "eps" } do
    if not Optimizer.in_range(g[k], 0) then self:_error("%s must be a number >= 0, got %s", k, tostring(g[k])) end
  end
end

--- One Adagrad update of parameter p in place.
function Adagrad:update(p, grad, st, g)
  ember.no_grad(function()
    if not st.sum then
      st.step = 0
      st.sum = self.zeros_like(p)
      if g.initial_accumulator_value ~= 0 then st.sum:fill_(g.initial_accumulator_value) end
    end
    st.step = st.step + 1
    if g.maximize then grad = -grad end
    local d = g.weight_decay ~= 0 and grad + p * g.weight_decay or grad
    local clr = g.lr / (1 + (st.step - 1) * g.lr_decay)
    st.sum:add_(d * d)
    p:add_(d / (st.sum:sqrt() + g.eps) * -clr)
  end)
end

return Adagrad
