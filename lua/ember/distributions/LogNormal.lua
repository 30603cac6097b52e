--- distributions.LogNormal(loc, scale): exp of a Normal(loc, scale)
-- (torch.distributions.LogNormal), reparameterized; values > 0. `base_dist`
-- is the Normal.
-- @usage local D = require "ember.distributions"
-- print(D.LogNormal(0.0, 1.0):log_prob(1.0), D.LogNormal(0.0, 1.0).mean)   --> tensor(-0.9189, ...)	tensor(1.6487, ...)
-- @classmod distributions.LogNormal
local Distribution = require "ember.distributions.Distribution"
local Normal = require "ember.distributions.Normal"
local constraints = require "ember.distributions.constraints"

local LogNormal = Distribution:extend("LogNormal")
LogNormal.arg_constraints = Normal.arg_constraints
LogNormal.support = constraints.positive
LogNormal.has_rsample = true
LogNormal._param_names = { "loc", "scale" }

function LogNormal:__init(...)
  local o = self:_args({ "loc", "scale" }, ...)
  o.validate_args = self._validate_args
  local n = Normal(o)
  self.base_dist, self.loc, self.scale = n, n.loc, n.scale
  self:_set_shapes(n.batch_shape, {})
end

function LogNormal:_after_expand(bs)
  self.base_dist = self.base_dist:expand(bs)
end

--- exp(loc + scale^2 / 2)
-- @usage print(require("ember.distributions").LogNormal(0.0, 1.0).mean)   --> tensor(1.6487, ...)
LogNormal._props.mean = function(self) return (self.loc + self.scale ^ 2 / 2):exp() end
--- expm1(scale^2) exp(2 loc + scale^2)
-- @usage print(require("ember.distributions").LogNormal(0.0, 1.0).variance)   --> tensor(4.6708, ...)
LogNormal._props.variance = function(self)
  local s2 = self.scale ^ 2
  return s2:expm1() * (self.loc * 2 + s2):exp()
end

--- exp(Normal(loc, scale):rsample())
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").LogNormal(0.0, 1.0):rsample({3}).shape)   --> ember.Size{3}
function LogNormal:rsample(sample_shape) return self.base_dist:rsample(sample_shape):exp() end

--- Normal's log_prob(log value) - log value
-- @tparam Tensor value
-- @usage print(require("ember.distributions").LogNormal(0.0, 1.0):log_prob(2.0))   --> tensor(-1.8523, ...)
function LogNormal:log_prob(value)
  value = self:_value(value, "log_prob")
  local y = value:log()
  return self.base_dist:log_prob(y) - y
end

--- Normal's entropy + loc
-- @usage print(require("ember.distributions").LogNormal(0.0, 1.0):entropy())   --> tensor(1.4189, ...)
function LogNormal:entropy() return self.base_dist:entropy() + self.loc end

--- Normal's cdf(log value)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").LogNormal(0.0, 1.0):cdf(1.0))   --> tensor(0.5000, ...)
function LogNormal:cdf(value)
  value = self:_value(value, "cdf")
  return self.base_dist:cdf(value:log())
end

--- exp(Normal's icdf(value))
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").LogNormal(0.0, 1.0):icdf(0.5))   --> tensor(1.0000, ...)
function LogNormal:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return self.base_dist:icdf(value):exp()
end

return LogNormal
