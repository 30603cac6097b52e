--- optim.RAdam(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8,
-- weight_decay=0}): torch.optim.RAdam (rectified Adam), composed of
-- in-place tensor ops (state: step, exp_avg, exp_avg_sq: PyTorch's names).
--   d = grad + weight_decay * p;  m = b1*m + (1-b1)*d;  v = b2*v + (1-b2)*d^2
--   rho_inf = 2/(1-b2) - 1;  rho_t = rho_inf - 2*t*b2^t / (1-b2^t)
--   rho_t > 5: r = sqrt((rho_t-4)(rho_t-2) rho_inf / ((rho_inf-4)(rho_inf-2) rho_t))
--              p = p - lr * m/(1-b1^t) * sqrt(1-b2^t) / (sqrt(v) + eps) * r
--   else:      p = p - lr * m/(1-b1^t)   (SGD with momentum while the variance is unreliable)
-- @classmod optim.RAdam
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"
local Adam = require "ember.optim.Adam"

local RAdam = Optimizer:extend("RAdam", {
  lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0,
}, { "foreach" })
RAdam.POSITIONAL = { "betas", "eps", "weight_decay", "foreach" }

--- Checks a parameter group's options (betas, eps, weight_decay), as Adam.
function RAdam:check_group(g) Adam.check_group(self, g) end

--- One RAdam update of parameter p in place.
function RAdam:update(p, grad, st, g)
  ember.no_grad(function()
    if not st.exp_avg then
      st.step = 0
      st.exp_avg = self.zeros_like(p)
      st.exp_avg_sq = self.zeros_like(p)
    end
    st.step = st.step + 1
    local t, b1, b2 = st.step, g.betas[1], g.betas[2]
    local bc1, bc2 = 1 - b1 ^ t, 1 - b2 ^ t
    local d = g.weight_decay ~= 0 and grad + p * g.weight_decay or grad
    st.exp_avg:mul_(b1):add_(d * (1 - b1))
    st.exp_avg_sq:mul_(b2):add_(d * d * (1 - b2))
    local corrected = st.exp_avg / bc1
    local rho_inf = 2 / (1 - b2) - 1
    local rho_t = rho_inf - 2 * t * b2 ^ t / bc2
    if rho_t > 5 then
      local rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
      local adaptive = math.sqrt(bc2) / (st.exp_avg_sq:sqrt() + g.eps)
      p:add_(corrected * g.lr * adaptive * -rect)
    else
      p:add_(corrected * -g.lr)
    end
  end)
end

return RAdam
