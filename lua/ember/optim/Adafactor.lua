--- optim.Adafactor(params, {lr=1e-2, beta2_decay=-0.8, eps={nil, 1e-3},
-- d=1.0, weight_decay=0, maximize=false}): Adafactor (Shazeer and Stern
-- 2018) exactly as torch.optim.Adafactor (PyTorch 2.5) defines it -- not
-- Hugging Face transformers' (which has no lr cap, puts eps1 = 1e-30 into
-- the factors and can keep a first moment). The second moment of a
-- parameter of 2 or more dimensions is factored over its last two: a
-- row_var [..., n, 1] and a col_var [..., 1, m] in place of an [..., n, m]
-- one; a vector keeps a variance. foreach is taken and ignored.
--   t = t + 1;  w = t^beta2_decay (1 - beta2_t);  rho = min(lr, 1/sqrt(t))
--   alpha = max(eps2, RMS(p)) * rho;  p = p * (1 - lr * weight_decay)
--   >= 2-D: row_var = lerp(row_var, mean(g^2, last dim), w)
--           col_var = lerp(col_var, mean(g^2, next to last dim), w)
--           V = row_var col_var / max(mean(row_var, next to last dim), eps1)
--   1-D:    variance = lerp(variance, g^2, w); V = variance
--   U = g / sqrt(max(V, eps1^2));  p = p - alpha / max(1, RMS(U) / d) * U
-- eps = {eps1, eps2}: eps1 nil (torch's None; stored as "auto") is the
-- machine epsilon of the parameter's dtype (2^-52 for float64, 2^-23 for
-- float32). lr caps the relative step rho and scales the weight decay.
-- State: step (a number), row_var and col_var or variance (torch's names).
-- @classmod optim.Adafactor
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"
local shape_str = require("ember._errors").shape_str

local Adafactor = Optimizer:extend("Adafactor", {
  lr = 1e-2, beta2_decay = -0.8, eps = { "auto", 1e-3 }, d = 1.0, weight_decay = 0, maximize = false,
}, { "foreach" })
Adafactor.POSITIONAL = { "beta2_decay", "eps", "d", "weight_decay" }

-- torch.finfo(dtype).eps (as lua/ember/nn/_norm.lua's MACHINE_EPS)
local MACHINE_EPS = { float64 = 2.0 ^ -52, float32 = 2.0 ^ -23, bfloat16 = 2.0 ^ -7, float16 = 2.0 ^ -10 }

--- Checks a parameter group's options (beta2_decay, eps, d, weight_decay, maximize); raises naming the bad one.
-- @usage local p = ember.zeros(2, 3):requires_grad_()
-- print(pcall(optim.Adafactor, {p}, {d = 0.5}))   --> false ...Adafactor: d (the update clipping threshold) must be a number >= 1, got 0.5
-- print(optim.Adafactor({p}, {eps = {nil, 1e-3}}).param_groups[1].eps[1])   --> auto
function Adafactor:check_group(g)
  Optimizer.check_group(self, g)
  if not (type(g.beta2_decay) == "number" and g.beta2_decay <= 0) then
    self:_error("beta2_decay must be a number <= 0, got %s", tostring(g.beta2_decay))
  end
  local e = g.eps
  local e1 = type(e) == "table" and e[1]
  if type(e) ~= "table" or e[3] ~= nil or not Optimizer.in_range(e[2], 0)
      or not (e1 == nil or e1 == false or e1 == "auto" or Optimizer.in_range(e1, 0)) then
    self:_error("eps must be {eps1, eps2}, eps1 >= 0 or nil (the dtype's machine epsilon) and eps2 >= 0, got %s",
      type(e) == "table" and ("{" .. tostring(e[1]) .. ", " .. tostring(e[2]) .. "}") or tostring(e))
  end
  if type(e1) ~= "number" then g.eps = { "auto", e[2] } end -- a new table: the caller's is left as it was
  if not Optimizer.in_range(g.d, 1) then
    self:_error("d (the update clipping threshold) must be a number >= 1, got %s", tostring(g.d))
  end
  if not Optimizer.in_range(g.weight_decay, 0) then
    self:_error("weight_decay must be a number >= 0, got %s", tostring(g.weight_decay))
  end
end

-- The shape of a factored second moment of p: row_var [..., n, 1], col_var [..., 1, m].
local function factor_shape(p, name)
  local s = {}
  for i, n in ipairs(p.shape) do s[i] = n end
  if name == "row_var" then s[#s] = 1 else s[#s - 1] = 1 end
  return s
end

--- One Adafactor update of parameter p in place.
-- @usage ember.manual_seed(0)
-- local model = nn.Linear(8, 1)
-- local opt = optim.Adafactor(model)
-- local x, y = ember.randn(32, 8), ember.randn(32, 1)
-- for _ = 1, 3 do
--   opt:zero_grad(); nn.functional.mse_loss(model(x), y):backward(); opt:step()
-- end
-- local st = opt.state[1]   -- the weight [1, 8]: factored
-- print(st.step, st.row_var.shape, st.col_var.shape, opt.state[2].variance.shape)   --> 3	ember.Size{1, 1}	ember.Size{1, 8}	ember.Size{1}
function Adafactor:update(p, grad, st, g)
  ember.no_grad(function()
    if g.maximize then grad = -grad end
    local factored = grad:dim() > 1
    if not st.step then
      st.step = 0
      local o = { dtype = p.dtype, device = p.device }
      if factored then
        st.row_var = ember.zeros(factor_shape(p, "row_var"), o)
        st.col_var = ember.zeros(factor_shape(p, "col_var"), o)
      else
        st.variance = self.zeros_like(p)
      end
    end
    local eps1, eps2 = g.eps[1], g.eps[2]
    if type(eps1) ~= "number" then eps1 = MACHINE_EPS[p.dtype] or MACHINE_EPS.float32 end
    st.step = st.step + 1
    local t = st.step
    local w = t ^ g.beta2_decay
    local rho = math.min(g.lr, 1 / t ^ 0.5)
    local alpha = math.max(eps2, p:norm():item() / math.sqrt(p:numel())) * rho
    if g.weight_decay ~= 0 then p:mul_(1 - g.lr * g.weight_decay) end
    local v
    local g2 = grad * grad
    if factored then
      st.row_var:lerp_(g2:mean(-1, true), w)
      st.col_var:lerp_(g2:mean(-2, true), w)
      v = st.row_var:matmul(st.col_var) / st.row_var:mean(-2, true):clamp(eps1)
    else
      st.variance:lerp_(g2, w)
      v = st.variance
    end
    local u = v:clamp(eps1 * eps1):rsqrt() * grad
    local denom = math.max(1.0, u:norm():item() / (math.sqrt(u:numel()) * g.d))
    p:add_(u * (-alpha / denom))
  end)
end

--- Restores a state_dict, as Optimizer.load_state_dict; the factored
-- moments (row_var, col_var), which are not shaped like their parameter,
-- are checked against the parameter's factor shapes and copied.
-- @usage local p = ember.randn(3, 4):requires_grad_()
-- local a, b = optim.Adafactor({p}), optim.Adafactor({p})
-- p.grad = ember.ones(3, 4); a:step()
-- b:load_state_dict(a:state_dict())
-- print(b.state[1].step, b.state[1].row_var.shape)   --> 1	ember.Size{3, 1}
function Adafactor:load_state_dict(sd)
  if type(sd) ~= "table" or type(sd.state) ~= "table" then return Optimizer.load_state_dict(self, sd) end
  local rest, factors = {}, {}
  -- the factors go to the parameters Optimizer.load_state_dict gives the rest to (torch's 0-based ids too)
  local index_of = type(sd.param_groups) == "table" and #sd.param_groups == #self.param_groups
    and self:_state_index(sd) or {}
  for idx, st in pairs(sd.state) do
    local s, f = {}, {}
    for name, v in pairs(st) do
      if name == "row_var" or name == "col_var" then f[name] = v else s[name] = v end
    end
    rest[idx], factors[idx] = s, f
  end
  for idx, f in pairs(factors) do
    local p = self._params[index_of[idx] or idx]
    for name, v in pairs(f) do
      local want = p and "[" .. table.concat(factor_shape(p, name), ", ") .. "]"
      if p and (not ember.is_tensor(v) or shape_str(v) ~= want) then
        self:_error("load_state_dict: state '%s' of parameter %d has shape %s, the parameter's %s is %s",
          name, idx, ember.is_tensor(v) and shape_str(v) or type(v), name, want)
      end
    end
  end
  Optimizer.load_state_dict(self, { state = rest, param_groups = sd.param_groups })
  ember.no_grad(function()
    for idx, f in pairs(factors) do
      local at = index_of[idx] or idx
      local p = self._params[at]
      for name, v in pairs(f) do
        local t = ember.zeros(factor_shape(p, name), { dtype = p.dtype, device = p.device })
        t:copy_(v.device == p.device and v or v:to(p.device))
        self.state[at][name] = t
      end
    end
  end)
  return self
end

return Adafactor
