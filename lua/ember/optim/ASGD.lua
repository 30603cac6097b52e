--- optim.ASGD(params, {lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6,
-- weight_decay=0, maximize=false}): torch.optim.ASGD (averaged SGD),
-- composed of in-place tensor ops (state: step, eta, mu, ax -- the running
-- average of p: PyTorch's names; foreach taken and ignored).
--   d = (maximize and -grad or grad) + weight_decay * p
--   p = p * (1 - lambd * eta) - eta * d
--   ax = mu == 1 and p or ax + mu * (p - ax)
--   eta = lr / (1 + lambd * lr * step) ^ alpha;  mu = 1 / max(1, step - t0)
-- eta and mu are float32 numbers, as PyTorch keeps them (0-d tensors of
-- its default dtype, float32), so float64 parameters follow PyTorch's
-- trajectory exactly.
-- @usage local p = ember.tensor({1.0, -2.0}, {dtype = "float64"}):requires_grad_()
-- local opt = optim.ASGD({p}, {lr = 0.1, t0 = 1})
-- for _ = 1, 3 do opt:zero_grad(); (p * p):sum():backward(); opt:step() end
-- print(opt.state[1].ax:tolist()[2] < 0)   --> true
-- @classmod optim.ASGD
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"

local ASGD = Optimizer:extend("ASGD", {
  lr = 1e-2, lambd = 1e-4, alpha = 0.75, t0 = 1e6, weight_decay = 0, maximize = false,
}, { "foreach" })
ASGD.POSITIONAL = { "lambd", "alpha", "t0", "weight_decay", "foreach" }

-- x rounded to float32 (PyTorch's 0-d float32 tensors eta and mu)
local function f32(x) return (string.unpack("<f", string.pack("<f", x))) end

--- Checks a parameter group's options (lambd, alpha, t0, weight_decay, maximize).
function ASGD:check_group(g)
  Optimizer.check_group(self, g)
  for _, k in ipairs { "lambd", "alpha", "t0", "weight_decay" } do
    if not Optimizer.in_range(g[k], 0) then self:_error("%s must be a number >= 0, got %s", k, tostring(g[k])) end
  end
end

--- One ASGD update of parameter p in place.
function ASGD:update(p, grad, st, g)
  ember.no_grad(function()
    if not st.ax then
      st.step, st.eta, st.mu = 0, f32(g.lr), 1.0
      st.ax = self.zeros_like(p)
    end
    st.step = st.step + 1
    local d = g.maximize and -grad or grad
    if g.weight_decay ~= 0 then d = d + p * g.weight_decay end
    p:mul_(1 - g.lambd * st.eta)
    p:add_(d * -st.eta)
    if st.mu ~= 1 then
      st.ax:add_((p - st.ax) * st.mu)
    else
      st.ax:copy_(p)
    end
    st.eta = f32(g.lr / (1 + g.lambd * g.lr * st.step) ^ g.alpha)
    st.mu = f32(1 / math.max(1, st.step - g.t0))
  end)
end

return ASGD
