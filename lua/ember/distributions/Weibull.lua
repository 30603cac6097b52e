--- distributions.Weibull(scale, concentration): density
-- (k/l) (x/l)^(k-1) exp(-(x/l)^k), l = scale, k = concentration
-- (torch.distributions.Weibull), reparameterized (l E^(1/k), E
-- exponential); both > 0.
-- @usage local D = require "ember.distributions"
-- local d = D.Weibull(2.0, 1.5)
-- print(d.mean, d:log_prob(1.0))   --> tensor(1.8055, ...)	tensor(-0.9878, ...)
-- @classmod distributions.Weibull
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Weibull = Distribution:extend("Weibull")
Weibull.arg_constraints = { scale = constraints.positive, concentration = constraints.positive }
Weibull.support = constraints.positive
Weibull.has_rsample = true
Weibull._param_names = { "scale", "concentration" }

local EULER = Distribution._EULER

--- scale Gamma(1 + 1/k)
-- @usage print(require("ember.distributions").Weibull(1.0, 1.0).mean)   --> tensor(1.0000, ...)
Weibull._props.mean = function(self) return self.scale * (self.concentration:reciprocal() + 1):lgamma():exp() end
--- scale^2 (Gamma(1 + 2/k) - Gamma(1 + 1/k)^2)
-- @usage print(require("ember.distributions").Weibull(1.0, 1.0).variance)   --> tensor(1.0000, ...)
Weibull._props.variance = function(self)
  local r = self.concentration:reciprocal()
  return self.scale ^ 2 * ((r * 2 + 1):lgamma():exp() - ((r + 1):lgamma() * 2):exp())
end

--- scale (-log(1 - u))^(1/k), u uniform in [0, 1)
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Weibull(1.0, 2.0):rsample({3}).shape)   --> ember.Size{3}
function Weibull:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local e = Distribution._rand_exponential(shape, self.scale.dtype)
  return e:pow(self.concentration:reciprocal()) * self.scale
end

--- log(k / l) + (k - 1) log(value / l) - (value / l)^k
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Weibull(1.0, 1.0):log_prob(1.0))   --> tensor(-1.0000, ...)
function Weibull:log_prob(value)
  value = self:_value(value, "log_prob")
  local k = self.concentration
  local z = value / self.scale
  return (k / self.scale):log() + (k - 1) * z:log() - z:pow(k)
end

--- Euler's gamma (1 - 1/k) + log(l / k) + 1
-- @usage print(require("ember.distributions").Weibull(1.0, 1.0):entropy())   --> tensor(1.0000, ...)
function Weibull:entropy()
  local r = self.concentration:reciprocal()
  return (-r + 1) * EULER + (self.scale * r):log() + 1
end

--- 1 - exp(-(value / l)^k)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Weibull(1.0, 1.0):cdf(1.0))   --> tensor(0.6321, ...)
function Weibull:cdf(value)
  value = self:_value(value, "cdf")
  return -(-(value / self.scale):pow(self.concentration)):exp() + 1
end

--- l (-log(1 - value))^(1/k)
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").Weibull(1.0, 1.0):icdf(0.5))   --> tensor(0.6931, ...)
function Weibull:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return (-(-value):log1p()):pow(self.concentration:reciprocal()) * self.scale
end

return Weibull
