--- distributions.Gamma(concentration, rate): density
-- rate^a x^(a-1) exp(-rate x) / Gamma(a), a = concentration
-- (torch.distributions.Gamma); both > 0. sample() is Marsaglia and Tsang's
-- method (with the u^(1/a) boost for a < 1). rsample() is reparameterized
-- as torch's: the draw's gradient with respect to the concentration is the
-- implicit one at a fixed quantile, dx/da = -(dF/da) / (dF/dx), computed with
-- torch's approximations (`Gamma._standard_grad`, torch._standard_gamma_grad);
-- the rate's is that of x / rate.
-- @usage local D = require "ember.distributions"
-- local d = D.Gamma(2.0, 3.0)
-- print(d.mean, d:log_prob(1.0))   --> tensor(0.6667, ...)	tensor(-0.8028, ...)
-- @classmod distributions.Gamma
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Gamma = Distribution:extend("Gamma")
Gamma.arg_constraints = { concentration = constraints.positive, rate = constraints.positive }
Gamma.support = constraints.nonnegative
Gamma._param_names = { "concentration", "rate" }
Gamma.has_rsample = true

--- concentration / rate
-- @usage print(require("ember.distributions").Gamma(2.0, 4.0).mean)   --> tensor(0.5000, ...)
Gamma._props.mean = function(self) return self.concentration / self.rate end
--- concentration / rate^2
-- @usage print(require("ember.distributions").Gamma(2.0, 4.0).variance)   --> tensor(0.1250, ...)
Gamma._props.variance = function(self) return self.concentration / self.rate ^ 2 end

-- Standard Gamma(a) draws (rate 1) of a's shape, float64: Marsaglia-Tsang.
function Gamma._standard(a)
  local small = a:lt(1)
  local ab = ember.where(small, a + 1, a)
  local d = ab - 1 / 3
  local c = (d * 9):rsqrt()
  local out = ember.zeros(a.shape, { dtype = "float64" })
  local done = ember.zeros(a.shape, { dtype = "bool" })
  for _ = 1, 1000 do
    local x = ember.randn(a.shape, { dtype = "float64" })
    local v = (c * x + 1) ^ 3
    local u = ember.rand(a.shape, { dtype = "float64" })
    local vpos = v:gt(0)
    local vs = ember.where(vpos, v, 1.0)
    local accept = vpos:logical_and(u:log():lt(x * x * 0.5 + d - d * vs + d * vs:log()))
    local take = accept:logical_and(done:logical_not())
    out = ember.where(take, d * vs, out)
    done = done:logical_or(accept)
    if done:all():item() then break end
  end
  local boost = ember.rand(a.shape, { dtype = "float64" }):pow(a:reciprocal())
  return ember.where(small, out * boost, out)
end

-- d x / d a for x ~ Gamma(a, 1) at a fixed quantile (float64 tensors of one
-- shape), as torch's standard_gamma_grad_one: a Taylor series of the CDF for
-- x < 0.8, Rice's saddle-point expansion for a > 8, a bivariate rational
-- approximation otherwise.
local COEF = {
  { 0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084 },
  { 0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623 },
  { 0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
    -1.5247877e-07 },
}
function Gamma._standard_grad(x, a)
  return ember.no_grad(function()
    -- small x: the CDF's series, differentiated in a
    local numer, denom = ember.ones_like(x), a
    local s1, s2 = 1 / a, 1 / (a * a)
    for i = 1, 5 do
      numer = numer * (-x / i)
      denom = denom + 1
      s1, s2 = s1 + numer / denom, s2 + numer / (denom * denom)
    end
    local pxa = x ^ a
    local pdf = x ^ (a - 1) * (-x):exp()
    local cdf = pxa * s1
    local cdf_a = (x:log() - a:digamma()) * cdf - pxa * s2
    local small = -cdf_a / pdf
    small = ember.where(small:isnan(), 0.0, small)
    -- large a: near the mode, and away from it
    local near = (24 * a * (12 * a + 1) + 1) * (1440 * a * a + 6 * x * (-120 * x + 53) - 65 * x * x / a
      + a * (3600 * x + 107)) / (1244160 * (a * a) * (a * a))
    local den = (8 * a):sqrt()
    local term2 = den / (a - x)
    local term3 = (x - a - a * (x / a):log()):pow(-1.5)
    local term23 = ember.where(x:lt(a), term2 - term3, term2 + term3)
    local term1 = (x / a):log() * term23 - (2 / a):sqrt() * (a + x) / ((a - x) * (a - x))
    local stirling = 1 + 1 / (12 * a) * (1 + 1 / (24 * a))
    local far = -stirling * x * term1 / den
    local large = ember.where((0.9 * a):le(x):logical_and(x:le(1.1 * a)), near, far)
    -- otherwise: exp(p(u, v) / q(u, v)), u = log(x / a), v = log(a)
    local u, v = (x / a):log(), a:log()
    local c = {}
    for i = 1, 8 do c[i] = COEF[1][i] + u * (COEF[2][i] + u * COEF[3][i]) end
    local p = c[1] + v * (c[2] + v * (c[3] + v * c[4]))
    local q = c[5] + v * (c[6] + v * (c[7] + v * c[8]))
    local mid = (p / q):exp()
    return ember.where(x:lt(0.8), small, ember.where(a:gt(8), large, mid))
  end)
end

-- Standard Gamma(a) draws of a's shape and dtype whose gradient with respect to a is
-- the implicit one (torch._standard_gamma); a draw of 0 is raised to the dtype's tiny.
local StandardGamma = ember.Function { name = "standard_gamma",
  forward = function(ctx, a)
    local a64 = a:double():contiguous()
    local x = Gamma._standard(a64):to(a.dtype)
    x = x:clamp(Distribution._tiny(x.dtype), nil)
    ctx.save_for_backward(x, a)
    return x
  end,
  backward = function(ctx, g)
    local x, a = table.unpack(ctx.saved_tensors)
    return g * Gamma._standard_grad(x:double(), a:double()):to(g.dtype)
  end }

--- Standard Gamma(a) draws (rate 1) whose gradient flows to a (the shape a's): torch._standard_gamma.
-- @tparam Tensor a concentrations > 0
function Gamma._rstandard(a) return StandardGamma(a:contiguous()) end

--- draws with the reparameterized gradient (torch's rsample): standard Gamma draws
-- (the implicit gradient in the concentration) over the rate.
-- @param[opt] sample_shape a table of sizes
-- @usage local a = ember.tensor(2.0, {dtype = "float64"}):requires_grad_()
-- local x = require("ember.distributions").Gamma(a, 1.0):rsample({4})
-- x:sum():backward()
-- print(x.requires_grad, a.grad ~= nil)   --> true true
function Gamma:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  return Gamma._rstandard(self.concentration:expand(shape)) / self.rate:expand(shape)
end

--- draws (no gradient) in the parameters' dtype; a draw of 0 is raised to the dtype's tiny, as torch.
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Gamma(2.0, 1.0):sample({3}).shape)   --> ember.Size{3}
function Gamma:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local a = Distribution._sampler_input(self.concentration, shape)
  local x = Gamma._standard(a) / self.rate:detach():double()
  x = x:to(self.rate.dtype)
  return x:clamp(Distribution._tiny(x.dtype), nil)
end

--- a log(rate) + (a - 1) log(value) - rate value - lgamma(a)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Gamma(1.0, 1.0):log_prob(1.0))   --> tensor(-1.0000, ...)
function Gamma:log_prob(value)
  value = self:_value(value, "log_prob")
  local a = self.concentration
  return ember.xlogy(a, self.rate) + ember.xlogy(a - 1, value) - self.rate * value - a:lgamma()
end

--- a - log(rate) + lgamma(a) + (1 - a) digamma(a)
-- @usage print(require("ember.distributions").Gamma(1.0, 1.0):entropy())   --> tensor(1.0000, ...)
function Gamma:entropy()
  local a = self.concentration
  return a - self.rate:log() + a:lgamma() + (-a + 1) * a:digamma()
end

return Gamma
