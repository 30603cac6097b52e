--- optim.Adam(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8,
-- weight_decay=0, amsgrad=false, maximize=false}): torch.optim.Adam (L2
-- penalty added to the gradient; maximize steps up the gradient; foreach,
-- fused, capturable taken and ignored, differentiable only false: see
-- Optimizer.FLAGS). Each parameter's update is one fused C call
-- (core.adam_step); with amsgrad, in-place tensor ops (state
-- max_exp_avg_sq, PyTorch's name).
--   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
--   p = p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
--   amsgrad: vmax = max(vmax, v), and sqrt(vmax) in place of sqrt(v)
-- @classmod optim.Adam
local core = require "ember.core"
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"

local Adam = Optimizer:extend("Adam", {
  lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, amsgrad = false, maximize = false,
}, { "foreach", "fused", "capturable", "differentiable" })
Adam.POSITIONAL = { "betas", "eps", "weight_decay", "amsgrad" }
Adam.decoupled = false

--- Checks a parameter group's options (betas, eps, weight_decay, amsgrad, maximize); raises naming the bad one.
function Adam:check_group(g)
  Optimizer.check_group(self, g)
  local b = g.betas
  if type(b) ~= "table" or #b ~= 2 or not Optimizer.in_range(b[1], 0, 1) or not Optimizer.in_range(b[2], 0, 1) then
    self:_error("betas must be {beta1, beta2} with each in [0, 1), got %s",
      type(b) == "table" and ("{" .. table.concat(b, ", ") .. "}") or tostring(b))
  end
  for _, k in ipairs { "eps", "weight_decay" } do
    if not Optimizer.in_range(g[k], 0) then self:_error("%s must be a number >= 0, got %s", k, tostring(g[k])) end
  end
  if self.DEFAULTS.amsgrad ~= nil and type(g.amsgrad) ~= "boolean" then
    self:_error("amsgrad must be a boolean, got %s", tostring(g.amsgrad))
  end
end

-- AMSGrad (torch's amsgrad=True): the Adam step with the running maximum
-- of exp_avg_sq in the denominator, composed of tensor ops in PyTorch's order.
local function amsgrad_step(self, p, grad, st, g)
  ember.no_grad(function()
    if not st.max_exp_avg_sq then st.max_exp_avg_sq = self.zeros_like(p) end
    local b1, b2 = g.betas[1], g.betas[2]
    local d = grad
    if self.decoupled then
      p:mul_(1 - g.lr * g.weight_decay)
    elseif g.weight_decay ~= 0 then
      d = grad + p * g.weight_decay
    end
    st.exp_avg:mul_(b1):add_(d * (1 - b1))
    st.exp_avg_sq:mul_(b2):add_(d * d * (1 - b2))
    st.max_exp_avg_sq:copy_(ember.maximum(st.max_exp_avg_sq, st.exp_avg_sq))
    local denom = st.max_exp_avg_sq:sqrt() / math.sqrt(1 - b2 ^ st.step) + g.eps
    p:add_(st.exp_avg / denom * (-g.lr / (1 - b1 ^ st.step)))
  end)
end

--- One Adam update of parameter p in place (the fused C step).
function Adam:update(p, grad, st, g)
  if g.maximize then grad = -grad end
  if not st.exp_avg then
    st.step = 0
    st.exp_avg = self.zeros_like(p)
    st.exp_avg_sq = self.zeros_like(p)
  end
  st.step = st.step + 1
  if g.amsgrad then return amsgrad_step(self, p, grad, st, g) end
  Optimizer.on_contiguous(p, function(q)
    core.adam_step(q, grad, st.exp_avg, st.exp_avg_sq, g.lr, g.betas[1], g.betas[2], g.eps,
      g.weight_decay, st.step, self.decoupled, self.composed)
  end)
end

return Adam
