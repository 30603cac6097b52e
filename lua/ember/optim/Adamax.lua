--- optim.Adamax(params, {lr=2e-3, betas={0.9, 0.999}, eps=1e-8,
-- weight_decay=0, maximize=false}): torch.optim.Adamax (Adam with the
-- infinity norm), composed of in-place tensor ops (state: step, exp_avg,
-- exp_inf: PyTorch's names).
--   d = (maximize and -grad or grad) + weight_decay * p
--   m = b1*m + (1-b1)*d;  u = max(b2*u, |d| + eps)
--   p = p - lr/(1-b1^t) * m / u
-- @classmod optim.Adamax
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"
local Adam = require "ember.optim.Adam"

local Adamax = Optimizer:extend("Adamax", {
  lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, maximize = false,
}, { "foreach" })
Adamax.POSITIONAL = { "betas", "eps", "weight_decay", "foreach" }

--- Checks a parameter group's options (betas, eps, weight_decay, maximize).
function Adamax:check_group(g)
  Adam.check_group(self, g)
end

--- One Adamax update of parameter p in place.
function Adamax:update(p, grad, st, g)
  ember.no_grad(function()
    if not st.exp_avg then
      st.step = 0
      st.exp_avg = self.zeros_like(p)
      st.exp_inf = self.zeros_like(p)
    end
    st.step = st.step + 1
    local b1, b2 = g.betas[1], g.betas[2]
    local d = g.maximize and -grad or grad
    if g.weight_decay ~= 0 then d = d + p * g.weight_decay end
    st.exp_avg:mul_(b1):add_(d * (1 - b1))
    st.exp_inf:copy_(ember.maximum(st.exp_inf * b2, d:abs() + g.eps))
    p:add_(st.exp_avg / st.exp_inf * (-g.lr / (1 - b1 ^ st.step)))
  end)
end

return Adamax
