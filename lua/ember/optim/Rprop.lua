--- optim.Rprop(params, {lr=1e-2, etas={0.5, 1.2}, step_sizes={1e-6, 50},
-- maximize=false}): torch.optim.Rprop (resilient backpropagation: each
-- element moves by its own step size, against the gradient's sign),
-- composed of in-place tensor ops (state: step, prev, step_size: PyTorch's
-- names; foreach taken and ignored).
--   d = maximize and -grad or grad;  s = sign(d * prev)
--   step_size = clamp(step_size * (s > 0 and etaplus or s < 0 and etaminus or 1), min, max)
--   where s < 0: d = 0 (the sign flipped: no move this step)
--   p = p - sign(d) * step_size;  prev = d
-- @usage local p = ember.tensor({1.0, -2.0}, {dtype = "float64"}):requires_grad_()
-- local opt = optim.Rprop({p}, {lr = 0.1})
-- for _ = 1, 2 do opt:zero_grad(); (p * p):sum():backward(); opt:step() end
-- print(p:tolist()[1])   --> 0.78
-- @classmod optim.Rprop
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"

local Rprop = Optimizer:extend("Rprop", {
  lr = 1e-2, etas = { 0.5, 1.2 }, step_sizes = { 1e-6, 50 }, maximize = false,
}, { "foreach" })
Rprop.POSITIONAL = { "etas", "step_sizes", "foreach" }

local function pair(v) return type(v) == "table" and #v == 2 and type(v[1]) == "number" and type(v[2]) == "number" end
local function show(v) return type(v) == "table" and ("{" .. table.concat(v, ", ") .. "}") or tostring(v) end

--- Checks a parameter group's options (etas, step_sizes, maximize).
function Rprop:check_group(g)
  Optimizer.check_group(self, g)
  local e = g.etas
  if not pair(e) or not (0 < e[1] and e[1] < 1 and 1 < e[2] and e[2] < math.huge) then
    self:_error("etas must be {etaminus, etaplus} with 0 < etaminus < 1 < etaplus, got %s", show(e))
  end
  local s = g.step_sizes
  if not pair(s) or not (0 <= s[1] and s[1] <= s[2]) then
    self:_error("step_sizes must be {min, max} with 0 <= min <= max, got %s", show(s))
  end
end

--- One Rprop update of parameter p in place.
function Rprop:update(p, grad, st, g)
  ember.no_grad(function()
    if not st.prev then
      st.step = 0
      st.prev = self.zeros_like(p)
      st.step_size = self.zeros_like(p):fill_(g.lr)
    end
    st.step = st.step + 1
    local d = g.maximize and -grad or grad:clone()
    local s = (d * st.prev):sign()
    local factor = ember.ones(p.shape, { dtype = p.dtype, device = p.device })
    local minus = s:lt(0)
    factor:masked_fill_(s:gt(0), g.etas[2])
    factor:masked_fill_(minus, g.etas[1])
    st.step_size:copy_((st.step_size * factor):clamp(g.step_sizes[1], g.step_sizes[2]))
    d:masked_fill_(minus, 0)
    p:add_(d:sign() * st.step_size * -1)
    st.prev:copy_(d)
  end)
end

return Rprop
