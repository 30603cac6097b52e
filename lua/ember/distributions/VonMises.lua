--- distributions.VonMises(loc, concentration): the circular von Mises
-- distribution of angles (torch.distributions.VonMises); concentration > 0,
-- values any real (read modulo 2 pi). log I0 and log I1 are torch's
-- polynomial approximations (Abramowitz and Stegun; relative error about
-- 1e-7, as torch's); sample() is Best and Fisher's rejection method, values
-- in [-pi, pi); no rsample (torch's neither). mean and variance are the
-- circular ones.
-- @usage local D = require "ember.distributions"
-- local d = D.VonMises(0.0, 2.0)
-- print(d:log_prob(0.0), d.variance)   --> tensor(-0.6619, ...)	tensor(0.3022, ...)
-- @classmod distributions.VonMises
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local VonMises = Distribution:extend("VonMises")
VonMises.arg_constraints = { loc = constraints.real, concentration = constraints.positive }
VonMises.support = constraints.real
VonMises._param_names = { "loc", "concentration" }

local I0_SMALL = { 1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2 }
local I0_LARGE = { 0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1, 0.2635537e-1, -0.1647633e-1, 0.392377e-2 }
local I1_SMALL = { 0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3 }
local I1_LARGE = { 0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1, -0.2895312e-1, 0.1787654e-1, -0.420059e-2 }

local function poly(y, coef)
  local r = y * 0 + coef[#coef]
  for i = #coef - 1, 1, -1 do r = y * r + coef[i] end
  return r
end

-- log I_order(x) for x > 0, order 0 or 1 (torch's _log_modified_bessel_fn)
local function log_bessel(x, order)
  local y = (x / 3.75) ^ 2
  local small = poly(y, order == 0 and I0_SMALL or I1_SMALL)
  if order == 1 then small = x:abs() * small end
  small = small:log()
  local large = x - x:log() * 0.5 + poly(x:reciprocal() * 3.75, order == 0 and I0_LARGE or I1_LARGE):log()
  return ember.where(x:lt(3.75), small, large)
end
VonMises._log_bessel = log_bessel

--- loc (the circular mean)
-- @usage print(require("ember.distributions").VonMises(1.0, 2.0).mean)   --> tensor(1.0000, ...)
VonMises._props.mean = function(self) return self.loc end
--- 1 - I1(k) / I0(k) (the circular variance)
-- @usage print(require("ember.distributions").VonMises(0.0, 1.0).variance)   --> tensor(0.5536, ...)
VonMises._props.variance = function(self)
  local k = self.concentration
  return -(log_bessel(k, 1) - log_bessel(k, 0)):exp() + 1
end

--- angles in [-pi, pi) (no gradient): Best and Fisher's rejection sampler.
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").VonMises(0.0, 1.0):sample({3}).shape)   --> ember.Size{3}
function VonMises:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local dt = self.loc.dtype
  local k = self.concentration:detach():expand(shape)
  local loc = self.loc:detach():expand(shape)
  local tau = (k ^ 2 * 4 + 1):sqrt() + 1
  local rho = (tau - (tau * 2):sqrt()) / (k * 2)
  local r = (rho ^ 2 + 1) / (rho * 2)
  local x = ember.zeros(shape, { dtype = dt })
  local done = ember.zeros(shape, { dtype = "bool" })
  for _ = 1, 1000 do
    local u1, u2, u3 = Distribution._rand(shape, dt), Distribution._rand(shape, dt), Distribution._rand(shape, dt)
    local z = (u1 * math.pi):cos()
    local f = (r * z + 1) / (r + z)
    local c = k * (r - f)
    local accept = (c * (-c + 2) - u2):gt(0):logical_or(((c / u2):log() + 1 - c):ge(0))
    x = ember.where(accept:logical_and(done:logical_not()), (u3 - 0.5):sign() * f:acos(), x)
    done = done:logical_or(accept)
    if done:all():item() then break end
  end
  local y = x + math.pi + loc
  return y - (y / (2 * math.pi)):floor() * (2 * math.pi) - math.pi
end

--- k cos(value - loc) - log(2 pi) - log I0(k)
-- @tparam Tensor value angles
-- @usage print(require("ember.distributions").VonMises(0.0, 1.0):log_prob(math.pi))   --> tensor(-3.0738, ...)
function VonMises:log_prob(value)
  value = self:_value(value, "log_prob")
  local k = self.concentration
  return k * (value - self.loc):cos() - math.log(2 * math.pi) - log_bessel(k, 0)
end

return VonMises
