--- distributions.Uniform(low, high): the uniform distribution on [low, high)
-- (torch.distributions.Uniform), reparameterized; low < high.
-- @usage local D = require "ember.distributions"
-- local d = D.Uniform(ember.tensor({0.0, 1.0}), ember.tensor({2.0, 5.0}))
-- print(d.mean)                                    --> tensor([1.0000, 3.0000], ...)
-- print(d:log_prob(ember.tensor({1.0, 4.0})))      --> tensor([-0.6931, -1.3863], ...)
-- @classmod distributions.Uniform
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Uniform = Distribution:extend("Uniform")
Uniform.arg_constraints = { low = constraints.real, high = constraints.real }
Uniform.has_rsample = true
Uniform._param_names = { "low", "high" }

function Uniform:__init(...)
  local o = self:_args({ "low", "high" }, ...)
  local shape = self:_broadcast_all({ "low", "high" }, o)
  if self._validate_args and not self.low:lt(self.high):all():item() then
    self:_error("low must be < high")
  end
  self:_set_shapes(shape, {})
end

--- interval(low, high)
-- @usage print(require("ember.distributions").Uniform(0.0, 1.0).support.name)   --> in [low, high]
Uniform._props.support = function(self) return constraints.interval(self.low, self.high) end
--- (low + high) / 2
-- @usage print(require("ember.distributions").Uniform(0.0, 1.0).mean)   --> tensor(0.5000, ...)
Uniform._props.mean = function(self) return (self.high + self.low) / 2 end
--- (high - low)^2 / 12
-- @usage print(require("ember.distributions").Uniform(0.0, 6.0).variance)   --> tensor(3.0000, ...)
Uniform._props.variance = function(self) return (self.high - self.low) ^ 2 / 12 end
--- (high - low) / sqrt(12)
-- @usage print(require("ember.distributions").Uniform(0.0, 12.0).stddev)   --> tensor(3.4641, ...)
Uniform._props.stddev = function(self) return (self.high - self.low) / math.sqrt(12) end

--- low + u (high - low), u uniform in [0, 1) from ember's generator.
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Uniform(0.0, 1.0):rsample({3}).shape)   --> ember.Size{3}
function Uniform:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  return self.low + Distribution._rand(shape, self.low.dtype) * (self.high - self.low)
end

--- log(low <= value < high) - log(high - low)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Uniform(0.0, 4.0):log_prob(1.0))   --> tensor(-1.3863, ...)
function Uniform:log_prob(value)
  value = self:_value(value, "log_prob")
  local inside = self.low:le(value):logical_and(self.high:gt(value)):to(self.low.dtype)
  return inside:log() - (self.high - self.low):log()
end

--- log(high - low)
-- @usage print(require("ember.distributions").Uniform(0.0, 4.0):entropy())   --> tensor(1.3863, ...)
function Uniform:entropy() return (self.high - self.low):log() end

--- ((value - low) / (high - low)) clamped to [0, 1]
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Uniform(0.0, 4.0):cdf(1.0))   --> tensor(0.2500, ...)
function Uniform:cdf(value)
  value = self:_value(value, "cdf")
  return ((value - self.low) / (self.high - self.low)):clamp(0, 1)
end

--- low + value (high - low)
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").Uniform(0.0, 4.0):icdf(0.25))   --> tensor(1.0000, ...)
function Uniform:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return value * (self.high - self.low) + self.low
end

return Uniform
