--- distributions.Exponential(rate): density rate exp(-rate x) on x >= 0
-- (torch.distributions.Exponential), reparameterized; rate > 0.
-- @usage local D = require "ember.distributions"
-- local d = D.Exponential(ember.tensor({1.0, 2.0}))
-- print(d.mean, d:log_prob(ember.tensor({1.0, 1.0})))   --> tensor([1.0000, 0.5000], ...)	tensor([-1.0000, -1.3069], ...)
-- @classmod distributions.Exponential
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Exponential = Distribution:extend("Exponential")
Exponential.arg_constraints = { rate = constraints.positive }
Exponential.support = constraints.nonnegative
Exponential.has_rsample = true
Exponential._param_names = { "rate" }

--- 1 / rate
-- @usage print(require("ember.distributions").Exponential(2.0).mean)   --> tensor(0.5000, ...)
Exponential._props.mean = function(self) return self.rate:reciprocal() end
--- 1 / rate
-- @usage print(require("ember.distributions").Exponential(2.0).stddev)   --> tensor(0.5000, ...)
Exponential._props.stddev = function(self) return self.rate:reciprocal() end
--- 1 / rate^2
-- @usage print(require("ember.distributions").Exponential(2.0).variance)   --> tensor(0.2500, ...)
Exponential._props.variance = function(self) return self.rate ^ -2 end

--- -log(1 - u) / rate, u uniform in [0, 1).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Exponential(1.0):rsample({3}).shape)   --> ember.Size{3}
function Exponential:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  return Distribution._rand_exponential(shape, self.rate.dtype) / self.rate
end

--- log(rate) - rate value
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Exponential(1.0):log_prob(2.0))   --> tensor(-2.0000, ...)
function Exponential:log_prob(value)
  value = self:_value(value, "log_prob")
  return self.rate:log() - self.rate * value
end

--- 1 - log(rate)
-- @usage print(require("ember.distributions").Exponential(1.0):entropy())   --> tensor(1.0000, ...)
function Exponential:entropy() return -self.rate:log() + 1 end

--- 1 - exp(-rate value)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Exponential(1.0):cdf(1.0))   --> tensor(0.6321, ...)
function Exponential:cdf(value)
  value = self:_value(value, "cdf")
  return -(-self.rate * value):exp() + 1
end

--- -log(1 - value) / rate
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").Exponential(1.0):icdf(0.5))   --> tensor(0.6931, ...)
function Exponential:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return -(-value + 1):log() / self.rate
end

return Exponential
