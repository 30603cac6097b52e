--- distributions.Gamma(concentration, rate): density
-- rate^a x^(a-1) exp(-rate x) / Gamma(a), a = concentration
-- (torch.distributions.Gamma); both > 0. sample() is Marsaglia and Tsang's
-- method (with the u^(1/a) boost for a < 1). **No rsample**: torch's
-- pathwise gradient of a Gamma draw (implicit reparameterization) is not
-- written here, so has_rsample is false (torch's is true).
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
