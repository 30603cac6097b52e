--- distributions.transforms: the elementwise bijections of
-- torch.distributions.transforms that TransformedDistribution takes --
-- ExpTransform, AffineTransform(loc, scale), SigmoidTransform,
-- TanhTransform, PowerTransform(exponent). A transform t is called as
-- t(x); `t:inv(y)` is its inverse, `t:log_abs_det_jacobian(x, y)` the log
-- of |dy/dx|, `t.sign` its monotonicity (+1 or -1), `t.codomain` the
-- constraint of its values. Formulas are torch 1.13's (the sigmoid
-- clamped to [tiny, 1 - eps], tanh's Jacobian as 2 (log 2 - x - softplus(-2x))).
-- @usage local T = require "ember.distributions.transforms"
-- local t = T.AffineTransform(1.0, 2.0)
-- print(t(ember.tensor(3.0)), t:inv(ember.tensor(7.0)))   --> tensor(7.0000, ...)	tensor(3.0000, ...)
-- @module distributions.transforms
local ember = require "ember"
local errors = require "ember._errors"
local constraints = require "ember.distributions.constraints"
local Distribution = require "ember.distributions.Distribution"

local M = {}

local Transform = {}
Transform.__index = Transform
Transform.__call = function(t, x) return t:_call(x) end
Transform.__tostring = function(t) return t.name .. "()" end

local function new(name, fields)
  local t = setmetatable(fields or {}, Transform)
  t.name, t.sign = name, t.sign or 1
  t.codomain = t.codomain or constraints.real
  return t
end

-- the dtype's tiny and eps (Distribution's), float32's for any dtype but float64
local function finfo_dtype(dt) return dt == "float64" and "float64" or "float32" end

--- exp(x); inverse log(y); log|dy/dx| = x.
-- @usage local T = require "ember.distributions.transforms"
-- print(T.ExpTransform()(ember.tensor(0.0)))   --> tensor(1.0000, ...)
function M.ExpTransform()
  local t = new("ExpTransform", { codomain = constraints.positive })
  function t:_call(x) return x:exp() end
  function t:inv(y) return y:log() end
  function t:log_abs_det_jacobian(x) return x end
  return t
end

--- loc + scale x (numbers or tensors); log|dy/dx| = log|scale|, broadcast to x.
-- @param loc a number or tensor
-- @param scale a number or tensor
-- @usage local T = require "ember.distributions.transforms"
-- print(T.AffineTransform(0.0, -2.0).sign)   --> -1
function M.AffineTransform(loc, scale)
  local function ok(v) return type(v) == "number" or ember.is_tensor(v) end
  if not ok(loc) or not ok(scale) then errors.raise("distributions.AffineTransform: loc and scale must be numbers or tensors") end
  local sign = 1
  if type(scale) == "number" then sign = scale < 0 and -1 or 1
  elseif scale:numel() > 0 then
    local neg, pos = scale:lt(0):all():item(), scale:gt(0):all():item()
    sign = neg and -1 or (pos and 1 or 0)
  end
  local t = new("AffineTransform", { loc = loc, scale = scale, sign = sign })
  function t:_call(x) return x * self.scale + self.loc end
  function t:inv(y) return (y - self.loc) / self.scale end
  function t:log_abs_det_jacobian(x)
    local s = self.scale
    if type(s) == "number" then return ember.full(x.shape, math.log(math.abs(s)), { dtype = x.dtype }) end
    return s:abs():log():expand(ember.broadcast_shapes(s.shape, x.shape))
  end
  return t
end

--- sigmoid(x) clamped to [tiny, 1 - eps]; inverse log(y) - log(1 - y); log|dy/dx| = -softplus(-x) - softplus(x).
-- @usage local T = require "ember.distributions.transforms"
-- print(T.SigmoidTransform()(ember.tensor(0.0)))   --> tensor(0.5000, ...)
function M.SigmoidTransform()
  local t = new("SigmoidTransform", { codomain = constraints.unit_interval })
  local function clip(y)
    local dt = finfo_dtype(y.dtype)
    return y:clamp(Distribution._tiny(dt), 1 - Distribution._eps(dt))
  end
  function t:_call(x) return clip(x:sigmoid()) end
  function t:inv(y)
    y = clip(y)
    return y:log() - (-y):log1p()
  end
  function t:log_abs_det_jacobian(x) return -(-x):softplus() - x:softplus() end
  return t
end

--- tanh(x); inverse atanh(y); log|dy/dx| = 2 (log 2 - x - softplus(-2 x)).
-- @usage local T = require "ember.distributions.transforms"
-- print(T.TanhTransform():inv(ember.tensor(0.0)))   --> tensor(0.0000, ...)
function M.TanhTransform()
  local t = new("TanhTransform", { codomain = constraints.interval(-1, 1) })
  function t:_call(x) return x:tanh() end
  function t:inv(y) return (y:log1p() - (-y):log1p()) * 0.5 end
  function t:log_abs_det_jacobian(x) return (-x + math.log(2) - (x * -2):softplus()) * 2 end
  return t
end

--- x ^ exponent (x > 0); log|dy/dx| = log|exponent y / x|.
-- @number exponent
-- @usage local T = require "ember.distributions.transforms"
-- print(T.PowerTransform(2.0)(ember.tensor(3.0)))   --> tensor(9.0000, ...)
function M.PowerTransform(exponent)
  if type(exponent) ~= "number" then errors.raise("distributions.PowerTransform: exponent must be a number") end
  local t = new("PowerTransform", { exponent = exponent, codomain = constraints.positive, sign = exponent < 0 and -1 or 1 })
  function t:_call(x) return x:pow(self.exponent) end
  function t:inv(y) return y:pow(1 / self.exponent) end
  function t:log_abs_det_jacobian(x, y) return (y * self.exponent / x):abs():log() end
  return t
end

-- is v a transform made here?
function M._is_transform(v) return getmetatable(v) == Transform end

return M
