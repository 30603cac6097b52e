--- optim.Adadelta(params, {lr=1, rho=0.9, eps=1e-6, weight_decay=0,
-- maximize=false}): torch.optim.Adadelta, composed of in-place tensor ops
-- (state: step, square_avg, acc_delta: PyTorch's names).
--   d = (maximize and -grad or grad) + weight_decay * p
--   square_avg = rho * square_avg + (1 - rho) * d^2
--   delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * d
--   acc_delta = rho * acc_delta + (1 - rho) * delta^2;  p = p - lr * delta
-- @classmod optim.Adadelta
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"

local Adadelta = Optimizer:extend("Adadelta", {
  lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false,
}, { "foreach" })
Adadelta.POSITIONAL = { "rho", "eps", "weight_decay", "foreach" }

--- Checks a parameter group's options (rho, eps, weight_decay, maximize).
function Adadelta:check_group(g)
  Optimizer.check_group(self, g)
  if type(g.rho) ~= "number" or not (g.rho >= 0 and g.rho <= 1) then
    self:_error("rho must be a number in [0, 1], got %s", tostring(g.rho))
  end
  for _, k in ipairs { "eps", "weight_decay" } do
    if not Optimizer.in_range(g[k], 0) then self:_error("%s must be a number >= 0, got %s", k, tostring(g[k])) end
  end
end

--- One Adadelta update of parameter p in place.
function Adadelta:update(p, grad, st, g)
  ember.no_grad(function()
    if not st.square_avg then
      st.step = 0
      st.square_avg = self.zeros_like(p)
      st.acc_delta = self.zeros_like(p)
    end
    st.step = st.step + 1
    local rho = g.rho
    local d = g.maximize and -grad or grad
    if g.weight_decay ~= 0 then d = d + p * g.weight_decay end
    st.square_avg:mul_(rho):add_(d * d * (1 - rho))
    local delta = (st.acc_delta + g.eps):sqrt() / (st.square_avg + g.eps):sqrt() * d
    st.acc_delta:mul_(rho):add_(delta * delta * (1 - rho))
    p:add_(delta * -g.lr)
  end)
end

return Adadelta
