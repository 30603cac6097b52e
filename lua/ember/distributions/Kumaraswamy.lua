--- distributions.Kumaraswamy(concentration1, concentration0): density
-- a b x^(a-1) (1 - x^a)^(b-1) on [0, 1], a = concentration1, b =
-- concentration0 (torch.distributions.Kumaraswamy), reparameterized
-- ((1 - (1 - u)^(1/b))^(1/a), u uniform); a Beta-like law with a closed-form
-- cdf.
-- @usage local D = require "ember.distributions"
-- local d = D.Kumaraswamy(2.0, 3.0)
-- print(d.mean, d:log_prob(0.5))   --> tensor(0.4571, ...)	tensor(0.5232, ...)
-- @classmod distributions.Kumaraswamy
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local K = Distribution:extend("Kumaraswamy")
K.arg_constraints = { concentration1 = constraints.positive, concentration0 = constraints.positive }
K.support = constraints.unit_interval
K.has_rsample = true
K._param_names = { "concentration1", "concentration0" }

local EULER = Distribution._EULER

-- the n-th moment b B(1 + n/a, b)
local function moment(a, b, n)
  local arg1 = n / a + 1
  return b * (arg1:lgamma() + b:lgamma() - (arg1 + b):lgamma()):exp()
end

--- b B(1 + 1/a, b)
-- @usage print(require("ember.distributions").Kumaraswamy(1.0, 1.0).mean)   --> tensor(0.5000, ...)
K._props.mean = function(self) return moment(self.concentration1, self.concentration0, 1) end
--- the second moment minus the squared mean
-- @usage print(require("ember.distributions").Kumaraswamy(1.0, 1.0).variance)   --> tensor(0.0833, ...)
K._props.variance = function(self)
  local a, b = self.concentration1, self.concentration0
  return moment(a, b, 2) - moment(a, b, 1) ^ 2
end

--- (1 - (1 - u)^(1/b))^(1/a), u uniform in [0, 1)
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Kumaraswamy(2.0, 3.0):rsample({3}).shape)   --> ember.Size{3}
function K:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local u = Distribution._rand(shape, self.concentration1.dtype)
  return (-(-u + 1):pow(self.concentration0:reciprocal()) + 1):pow(self.concentration1:reciprocal())
end

--- log a + log b + (a - 1) log x + (b - 1) log(1 - x^a)
-- @tparam Tensor value in [0, 1]
-- @usage print(require("ember.distributions").Kumaraswamy(1.0, 1.0):log_prob(0.3))   --> tensor(0.0000, ...)
function K:log_prob(value)
  value = self:_value(value, "log_prob")
  local a, b = self.concentration1, self.concentration0
  return a:log() + b:log() + (a - 1) * value:log() + (b - 1) * (-value:pow(a)):log1p()
end

--- 1 - 1/b + (1 - 1/a) (digamma(b + 1) + Euler's gamma) - log a - log b
-- @usage print(require("ember.distributions").Kumaraswamy(1.0, 1.0):entropy())   --> tensor(0.0000, ...)
function K:entropy()
  local a, b = self.concentration1, self.concentration0
  local t1 = -a:reciprocal() + 1
  local t0 = -b:reciprocal() + 1
  local H0 = (b + 1):digamma() + EULER
  return t0 + t1 * H0 - a:log() - b:log()
end

--- 1 - (1 - value^a)^b
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Kumaraswamy(1.0, 1.0):cdf(0.3))   --> tensor(0.3000, ...)
function K:cdf(value)
  value = self:_value(value, "cdf")
  return -(-value:pow(self.concentration1) + 1):pow(self.concentration0) + 1
end

--- (1 - (1 - value)^(1/b))^(1/a)
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").Kumaraswamy(1.0, 1.0):icdf(0.3))   --> tensor(0.3000, ...)
function K:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return (-(-value + 1):pow(self.concentration0:reciprocal()) + 1):pow(self.concentration1:reciprocal())
end

return K
