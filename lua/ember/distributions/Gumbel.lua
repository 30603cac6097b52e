--- distributions.Gumbel(loc, scale): the Gumbel (type-I extreme value)
-- distribution (torch.distributions.Gumbel), reparameterized; scale > 0.
-- @usage local D = require "ember.distributions"
-- print(D.Gumbel(0.0, 1.0).mean, D.Gumbel(0.0, 1.0):log_prob(0.0))   --> tensor(0.5772, ...)	tensor(-1.0000, ...)
-- @classmod distributions.Gumbel
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Gumbel = Distribution:extend("Gumbel")
Gumbel.arg_constraints = { loc = constraints.real, scale = constraints.positive }
Gumbel.support = constraints.real
Gumbel.has_rsample = true
Gumbel._param_names = { "loc", "scale" }

local EULER = Distribution._EULER

--- loc + scale * Euler's gamma
-- @usage print(require("ember.distributions").Gumbel(1.0, 2.0).mean)   --> tensor(2.1544, ...)
Gumbel._props.mean = function(self) return self.loc + self.scale * EULER end
--- pi / sqrt(6) scale
-- @usage print(require("ember.distributions").Gumbel(0.0, 1.0).stddev)   --> tensor(1.2825, ...)
Gumbel._props.stddev = function(self) return self.scale * (math.pi / math.sqrt(6)) end
--- (pi / sqrt(6) scale)^2
-- @usage print(require("ember.distributions").Gumbel(0.0, 1.0).variance)   --> tensor(1.6449, ...)
Gumbel._props.variance = function(self) return (self.scale * (math.pi / math.sqrt(6))) ^ 2 end

--- loc - scale log(-log u), u uniform in [tiny, 1 - eps) (torch's transforms of a Uniform).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Gumbel(0.0, 1.0):rsample({3}).shape)   --> ember.Size{3}
function Gumbel:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local dt = self.loc.dtype
  local tiny, eps = Distribution._tiny(dt), Distribution._eps(dt)
  local u = Distribution._rand(shape, dt) * (1 - eps - tiny) + tiny
  return self.loc - self.scale * (-u:log()):log()
end

--- z - exp(z) - log(scale), z = (loc - value) / scale
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Gumbel(0.0, 1.0):log_prob(1.0))   --> tensor(-1.3679, ...)
function Gumbel:log_prob(value)
  value = self:_value(value, "log_prob")
  local z = (self.loc - value) / self.scale
  return z - z:exp() - self.scale:log()
end

--- log(scale) + 1 + Euler's gamma
-- @usage print(require("ember.distributions").Gumbel(0.0, 1.0):entropy())   --> tensor(1.5772, ...)
function Gumbel:entropy() return self.scale:log() + (1 + EULER) end

--- exp(-exp(-(value - loc) / scale))
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Gumbel(0.0, 1.0):cdf(0.0))   --> tensor(0.3679, ...)
function Gumbel:cdf(value)
  value = self:_value(value, "cdf")
  return (-(-(value - self.loc) / self.scale):exp()):exp()
end

--- loc - scale log(-log(value))
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").Gumbel(0.0, 1.0):icdf(0.5))   --> tensor(0.3665, ...)
function Gumbel:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return self.loc - self.scale * (-value:log()):log()
end

return Gumbel
