--- distributions.Laplace(loc, scale): density exp(-|x - loc| / scale) / (2 scale)
-- (torch.distributions.Laplace), reparameterized; scale > 0.
-- @usage local D = require "ember.distributions"
-- print(D.Laplace(0.0, 1.0):log_prob(1.0), D.Laplace(0.0, 1.0).variance)   --> tensor(-1.6931, ...)	tensor(2.0000, ...)
-- @classmod distributions.Laplace
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Laplace = Distribution:extend("Laplace")
Laplace.arg_constraints = { loc = constraints.real, scale = constraints.positive }
Laplace.support = constraints.real
Laplace.has_rsample = true
Laplace._param_names = { "loc", "scale" }

--- loc
-- @usage print(require("ember.distributions").Laplace(1.0, 2.0).mean)   --> tensor(1.0000, ...)
Laplace._props.mean = function(self) return self.loc end
--- 2 scale^2
-- @usage print(require("ember.distributions").Laplace(1.0, 2.0).variance)   --> tensor(8.0000, ...)
Laplace._props.variance = function(self) return self.scale ^ 2 * 2 end
--- sqrt(2) scale
-- @usage print(require("ember.distributions").Laplace(1.0, 1.0).stddev)   --> tensor(1.4142, ...)
Laplace._props.stddev = function(self) return self.scale * math.sqrt(2) end

--- loc - scale sign(u) log(1 - |u|), u uniform in [eps - 1, 1) (torch's).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Laplace(0.0, 1.0):rsample({3}).shape)   --> ember.Size{3}
function Laplace:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local eps = Distribution._eps(self.loc.dtype)
  local u = Distribution._rand(shape, self.loc.dtype) * (2 - eps) + (eps - 1)
  return self.loc - self.scale * u:sign() * (-u:abs()):log1p()
end

--- -log(2 scale) - |value - loc| / scale
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Laplace(0.0, 1.0):log_prob(0.0))   --> tensor(-0.6931, ...)
function Laplace:log_prob(value)
  value = self:_value(value, "log_prob")
  return -(self.scale * 2):log() - (value - self.loc):abs() / self.scale
end

--- 1 + log(2 scale)
-- @usage print(require("ember.distributions").Laplace(0.0, 0.5):entropy())   --> tensor(1.0000, ...)
function Laplace:entropy() return (self.scale * 2):log() + 1 end

--- 0.5 - 0.5 sign(value - loc) expm1(-|value - loc| / scale)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Laplace(0.0, 1.0):cdf(0.0))   --> tensor(0.5000, ...)
function Laplace:cdf(value)
  value = self:_value(value, "cdf")
  local d = value - self.loc
  return -(d:sign() * (-d:abs() / self.scale):expm1()) * 0.5 + 0.5
end

--- loc - scale sign(value - 0.5) log(1 - 2 |value - 0.5|)
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").Laplace(0.0, 1.0):icdf(0.5))   --> tensor(0.0000, ...)
function Laplace:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  local term = value - 0.5
  return self.loc - self.scale * term:sign() * (-term:abs() * 2):log1p()
end

return Laplace
