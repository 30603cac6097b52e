--- distributions.Cauchy(loc, scale): the Cauchy (Lorentz) distribution
-- (torch.distributions.Cauchy), reparameterized; scale > 0. Its mean is
-- NaN and its variance inf, as torch's.
-- @usage local D = require "ember.distributions"
-- print(D.Cauchy(0.0, 1.0):log_prob(0.0), D.Cauchy(0.0, 1.0):cdf(1.0))   --> tensor(-1.1447, ...)	tensor(0.7500, ...)
-- @classmod distributions.Cauchy
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Cauchy = Distribution:extend("Cauchy")
Cauchy.arg_constraints = { loc = constraints.real, scale = constraints.positive }
Cauchy.support = constraints.real
Cauchy.has_rsample = true
Cauchy._param_names = { "loc", "scale" }

--- NaN (no mean)
-- @usage print(require("ember.distributions").Cauchy(0.0, 1.0).mean)   --> tensor(nan, ...)
Cauchy._props.mean = function(self) return ember.full(self.batch_shape, 0 / 0, { dtype = self.loc.dtype }) end
--- inf
-- @usage print(require("ember.distributions").Cauchy(0.0, 1.0).variance)   --> tensor(inf, ...)
Cauchy._props.variance = function(self) return ember.full(self.batch_shape, math.huge, { dtype = self.loc.dtype }) end

--- loc + scale tan(pi (u - 0.5)), u uniform in [0, 1).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Cauchy(0.0, 1.0):rsample({3}).shape)   --> ember.Size{3}
function Cauchy:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local eps = ((Distribution._rand(shape, self.loc.dtype) - 0.5) * math.pi):tan()
  return self.loc + eps * self.scale
end

--- -log(pi) - log(scale) - log(1 + ((value - loc) / scale)^2)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Cauchy(0.0, 1.0):log_prob(1.0))   --> tensor(-1.8379, ...)
function Cauchy:log_prob(value)
  value = self:_value(value, "log_prob")
  return -(((value - self.loc) / self.scale) ^ 2):log1p() - self.scale:log() - math.log(math.pi)
end

--- log(4 pi) + log(scale)
-- @usage print(require("ember.distributions").Cauchy(0.0, 1.0):entropy())   --> tensor(2.5310, ...)
function Cauchy:entropy() return self.scale:log() + math.log(4 * math.pi) end

--- atan((value - loc) / scale) / pi + 0.5
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Cauchy(0.0, 1.0):cdf(0.0))   --> tensor(0.5000, ...)
function Cauchy:cdf(value)
  value = self:_value(value, "cdf")
  return ((value - self.loc) / self.scale):atan() / math.pi + 0.5
end

--- loc + scale tan(pi (value - 0.5))
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").Cauchy(0.0, 1.0):icdf(0.75))   --> tensor(1.0000, ...)
function Cauchy:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return ((value - 0.5) * math.pi):tan() * self.scale + self.loc
end

return Cauchy
