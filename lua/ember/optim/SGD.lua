--- optim.SGD(params, {lr=, momentum=0, dampening=0, weight_decay=0,
-- nesterov=false, maximize=false}): torch.optim.SGD (foreach taken and
-- ignored, differentiable only false: see Optimizer.FLAGS). Each parameter's
-- update is one fused C call (core.sgd_step: the backend's sgd_step kernel,
-- or composed ops on a backend without it).
--   d = (maximize and -grad or grad) + weight_decay * p
--   with momentum: buf = d (first step) or momentum*buf + (1-dampening)*d;
--                  d = nesterov and d + momentum*buf or buf
--   p = p - lr * d
-- @classmod optim.SGD
local core = require "ember.core"
local Optimizer = require "ember.optim.Optimizer"

local SGD = Optimizer:extend("SGD", {
  lr = "required", momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false,
}, { "foreach", "differentiable" })
SGD.POSITIONAL = { "momentum", "dampening", "weight_decay", "nesterov" }

--- Checks a parameter group's options (momentum, dampening, weight_decay, nesterov, maximize).
function SGD:check_group(g)
  Optimizer.check_group(self, g)
  for _, k in ipairs { "momentum", "dampening", "weight_decay" } do
    if not Optimizer.in_range(g[k], 0) then self:_error("%s must be a number >= 0, got %s", k, tostring(g[k])) end
  end
  if type(g.nesterov) ~= "boolean" then self:_error("nesterov must be a boolean, got %s", tostring(g.nesterov)) end
  if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
    self:_error("nesterov needs momentum > 0 and dampening 0, got momentum=%g, dampening=%g", g.momentum, g.dampening)
  end
end

--- One SGD update of parameter p in place (the fused C step).
function SGD:update(p, grad, st, g)
  if g.maximize then grad = -grad end
  local first = false
  if g.momentum ~= 0 and not st.momentum_buffer then
    st.momentum_buffer = self.zeros_like(p)
    first = true
  end
  Optimizer.on_contiguous(p, function(q)
    core.sgd_step(q, grad, g.momentum ~= 0 and st.momentum_buffer or nil, g.lr, g.momentum,
      g.dampening, g.weight_decay, g.nesterov, first, self.composed)
  end)
end

return SGD
