--- optim.NAdam(params, {lr=2e-3, betas={0.9, 0.999}, eps=1e-8,
-- weight_decay=0, momentum_decay=4e-3}): torch.optim.NAdam (Adam with
-- Nesterov momentum), composed of in-place tensor ops (state: step,
-- mu_product -- a number --, exp_avg, exp_avg_sq: PyTorch's names).
--   d = grad + weight_decay * p
--   mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay));  mu_product = mu_1 * ... * mu_t
--   m = b1*m + (1-b1)*d;  v = b2*v + (1-b2)*d^2;  denom = sqrt(v) / sqrt(1-b2^t) + eps
--   p = p - lr * (1-mu_t) / (1-mu_product) * d / denom
--         - lr * mu_{t+1} / (1-mu_product*mu_{t+1}) * m / denom
-- This is the documented algorithm: PyTorch >= 2.0's, and 1.13's foreach
-- path. (1.13's default single-tensor loop multiplied the last product by
-- mu_t once more, a bug PyTorch 2.0 fixed.)
-- @classmod optim.NAdam
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"
local Adam = require "ember.optim.Adam"

local NAdam = Optimizer:extend("NAdam", {
  lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3,
}, { "foreach" })
NAdam.POSITIONAL = { "betas", "eps", "weight_decay", "momentum_decay", "foreach" }

--- Checks a parameter group's options (betas, eps, weight_decay, momentum_decay).
function NAdam:check_group(g)
  Adam.check_group(self, g)
  if not Optimizer.in_range(g.momentum_decay, 0) then
    self:_error("momentum_decay must be a number >= 0, got %s", tostring(g.momentum_decay))
  end
end

--- One NAdam update of parameter p in place.
function NAdam:update(p, grad, st, g)
  ember.no_grad(function()
    if not st.exp_avg then
      st.step, st.mu_product = 0, 1
      st.exp_avg = self.zeros_like(p)
      st.exp_avg_sq = self.zeros_like(p)
    end
    st.step = st.step + 1
    local t, b1, b2 = st.step, g.betas[1], g.betas[2]
    local d = g.weight_decay ~= 0 and grad + p * g.weight_decay or grad
    local mu = b1 * (1 - 0.5 * 0.96 ^ (t * g.momentum_decay))
    local mu_next = b1 * (1 - 0.5 * 0.96 ^ ((t + 1) * g.momentum_decay))
    st.mu_product = st.mu_product * mu
    st.exp_avg:mul_(b1):add_(d * (1 - b1))
    st.exp_avg_sq:mul_(b2):add_(d * d * (1 - b2))
    local denom = st.exp_avg_sq:sqrt() / math.sqrt(1 - b2 ^ t) + g.eps
    p:add_(d / denom * (-g.lr * (1 - mu) / (1 - st.mu_product)))
    p:add_(st.exp_avg / denom * (-g.lr * mu_next / (1 - st.mu_product * mu_next)))
  end)
end

return NAdam
