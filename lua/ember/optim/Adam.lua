--- optim.Adam(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8,
-- weight_decay=0}): torch.optim.Adam (L2 penalty added to the gradient).
-- Each parameter's update is one fused C call (core.adam_step).
--   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
--   p = p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
-- @classmod optim.Adam
local core = require "ember.core"
local Optimizer = require "ember.optim.Optimizer"

local Adam = Optimizer:extend("Adam", {
  lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0,
})
Adam.decoupled = false

--- Checks a parameter group's options (betas, eps, weight_decay); raises naming the bad one.
function Adam:check_group(g)
  Optimizer.check_group(self, g)
  local b = g.betas
  if type(b) ~= "table" or not Optimizer.in_range(b[1], 0, 1) or not Optimizer.in_range(b[2], 0, 1) then
    self:_error("betas must be {beta1, beta2} with each in [0, 1), got %s",
      type(b) == "table" and ("{" .. table.concat(b, ", ") .. "}") or tostring(b))
  end
  for _, k in ipairs { "eps", "weight_decay" } do
    if not Optimizer.in_range(g[k], 0) then self:_error("%s must be a number >= 0, got %s", k, tostring(g[k])) end
  end
end

--- One Adam update of parameter p in place (the fused C step).
function Adam:update(p, grad, st, g)
  if not st.exp_avg then
    st.step = 0
    st.exp_avg = self.zeros_like(p)
    st.exp_avg_sq = self.zeros_like(p)
  end
  st.step = st.step + 1
  core.adam_step(p, grad, st.exp_avg, st.exp_avg_sq, g.lr, g.betas[1], g.betas[2], g.eps,
    g.weight_decay, st.step, self.decoupled, self.composed)
end

return Adam
