--- optim.RMSprop(params, {lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0,
-- momentum=0, centered=false, maximize=false}): torch.optim.RMSprop
-- (foreach taken and ignored, differentiable only false), composed of
-- in-place tensor ops (state: square_avg, and momentum_buffer / grad_avg
-- when used, PyTorch's names).
--   d = (maximize and -grad or grad) + weight_decay * p
--   square_avg = alpha * square_avg + (1 - alpha) * d^2
--   centered: grad_avg = alpha * grad_avg + (1 - alpha) * d, and
--             avg = sqrt(square_avg - grad_avg^2) + eps; else avg = sqrt(square_avg) + eps
--   momentum: buf = momentum * buf + d / avg; p = p - lr * buf
--   else:     p = p - lr * d / avg
-- @classmod optim.RMSprop
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"

local RMSprop = Optimizer:extend("RMSprop", {
  lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false, maximize = false,
}, { "foreach", "differentiable" })
RMSprop.POSITIONAL = { "alpha", "eps", "weight_decay", "momentum", "centered", "foreach", "maximize", "differentiable" }

--- Checks a parameter group's options (alpha, eps, weight_decay, momentum, centered, maximize).
function RMSprop:check_group(g)
  Optimizer.check_group(self, g)
  if not Optimizer.in_range(g.alpha, 0, 1 + 1e-12) then
    self:_error("alpha must be a number in [0, 1], got %s", tostring(g.alpha))
  end
  for _, k in ipairs { "eps", "weight_decay", "momentum" } do
    if not Optimizer.in_range(g[k], 0) then self:_error("%s must be a number >= 0, got %s", k, tostring(g[k])) end
  end
  if type(g.centered) ~= "boolean" then self:_error("centered must be a boolean, got %s", tostring(g.centered)) end
end

--- One RMSprop update of parameter p in place.
function RMSprop:update(p, grad, st, g)
  ember.no_grad(function()
    if not st.square_avg then
      st.step = 0
      st.square_avg = self.zeros_like(p)
      if g.momentum > 0 then st.momentum_buffer = self.zeros_like(p) end
      if g.centered then st.grad_avg = self.zeros_like(p) end
    end
    st.step = st.step + 1
    if g.maximize then grad = -grad end
    local d = g.weight_decay ~= 0 and grad + p * g.weight_decay or grad
    st.square_avg:mul_(g.alpha):add_(d * d * (1 - g.alpha))
    local avg
    if g.centered then
      st.grad_avg:mul_(g.alpha):add_(d * (1 - g.alpha))
      avg = (st.square_avg - st.grad_avg * st.grad_avg):sqrt() + g.eps
    else
      avg = st.square_avg:sqrt() + g.eps
    end
    if g.momentum > 0 then
      st.momentum_buffer:mul_(g.momentum):add_(d / avg)
      p:add_(st.momentum_buffer * -g.lr)
    else
      p:add_(d / avg * -g.lr)
    end
  end)
end

return RMSprop
