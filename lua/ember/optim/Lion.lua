--- optim.Lion(params, {lr=1e-4, betas={0.9, 0.99}, weight_decay=0,
-- maximize=false}): EvoLved Sign Momentum (Chen et al. 2023, "Symbolic
-- Discovery of Optimization Algorithms", Algorithm 2; the options and
-- state of lucidrains/lion-pytorch), composed of in-place tensor ops.
-- Every coordinate moves by lr exactly (the sign), so Lion wants an lr
-- 3-10x smaller than AdamW's and a weight decay 3-10x larger (the paper).
--   g = maximize and -grad or grad
--   c = beta1 * m + (1 - beta1) * g
--   p = p * (1 - lr * weight_decay) - lr * sign(c)      (sign(0) = 0)
--   m = beta2 * m + (1 - beta2) * g
-- State: exp_avg (m).
-- @classmod optim.Lion
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"

local Lion = Optimizer:extend("Lion", { lr = 1e-4, betas = { 0.9, 0.99 }, weight_decay = 0, maximize = false })
Lion.POSITIONAL = { "betas", "weight_decay" }

--- Checks a parameter group's options (betas, weight_decay, maximize); raises naming the bad one.
-- @usage local p = ember.zeros(3):requires_grad_()
-- print(pcall(optim.Lion, {p}, {betas = {0.9, 1.0}}))   --> false ...Lion: betas must be {beta1, beta2} with each in [0, 1), got {0.9, 1.0}
function Lion:check_group(g)
  Optimizer.check_group(self, g)
  local b = g.betas
  if type(b) ~= "table" or #b ~= 2 or not Optimizer.in_range(b[1], 0, 1) or not Optimizer.in_range(b[2], 0, 1) then
    self:_error("betas must be {beta1, beta2} with each in [0, 1), got %s",
      type(b) == "table" and ("{" .. table.concat(b, ", ") .. "}") or tostring(b))
  end
  if not Optimizer.in_range(g.weight_decay, 0) then
    self:_error("weight_decay must be a number >= 0, got %s", tostring(g.weight_decay))
  end
end

--- One Lion update of parameter p in place.
-- @usage local p = ember.tensor({1.0, -2.0, 3.0}, {dtype = "float64"}):requires_grad_()
-- local opt = optim.Lion({p}, {lr = 0.1})
-- p.grad = ember.tensor({0.5, -0.1, 0.0}, {dtype = "float64"})
-- opt:step()
-- local v = p:tolist()
-- print(v[1], v[2], v[3])   --> 0.9	-1.9	3.0
function Lion:update(p, grad, st, g)
  ember.no_grad(function()
    if g.maximize then grad = -grad end
    if not st.exp_avg then st.exp_avg = self.zeros_like(p) end
    local m, b1, b2 = st.exp_avg, g.betas[1], g.betas[2]
    local c = m * b1 + grad * (1 - b1)
    if g.weight_decay ~= 0 then p:mul_(1 - g.lr * g.weight_decay) end
    p:add_(c:sign() * -g.lr)
    m:mul_(b2):add_(grad * (1 - b2))
  end)
end

return Lion
