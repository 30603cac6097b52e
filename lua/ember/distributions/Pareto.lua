--- distributions.Pareto(scale, alpha): density alpha scale^alpha / x^(alpha+1)
-- on x >= scale (torch.distributions.Pareto), reparameterized
-- (scale exp(E / alpha), E exponential); scale and alpha > 0. mean is inf
-- for alpha <= 1 and variance for alpha <= 2, as torch's clamps give.
-- @usage local D = require "ember.distributions"
-- local d = D.Pareto(1.0, 3.0)
-- print(d.mean, d:log_prob(2.0))   --> tensor(1.5000, ...)	tensor(-1.6740, ...)
-- @classmod distributions.Pareto
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Pareto = Distribution:extend("Pareto")
Pareto.arg_constraints = { scale = constraints.positive, alpha = constraints.positive }
Pareto.has_rsample = true
Pareto._param_names = { "scale", "alpha" }

--- x >= scale
-- @usage print(require("ember.distributions").Pareto(1.0, 3.0).support.name)   --> >= scale
Pareto._props.support = function(self)
  local s = self.scale
  return setmetatable({ name = ">= scale", check = function(t) return t:ge(s) end }, { __tostring = function() return ">= scale" end })
end
--- alpha scale / (alpha - 1), alpha clamped to >= 1 (inf below)
-- @usage print(require("ember.distributions").Pareto(2.0, 2.0).mean)   --> tensor(4.0000, ...)
Pareto._props.mean = function(self)
  local a = self.alpha:clamp(1, nil)
  return a * self.scale / (a - 1)
end
--- scale^2 alpha / ((alpha - 1)^2 (alpha - 2)), alpha clamped to >= 2 (inf below)
-- @usage print(require("ember.distributions").Pareto(1.0, 3.0).variance)   --> tensor(0.7500, ...)
Pareto._props.variance = function(self)
  local a = self.alpha:clamp(2, nil)
  return self.scale ^ 2 * a / ((a - 1) ^ 2 * (a - 2))
end

--- scale exp(-log(1 - u) / alpha), u uniform in [0, 1)
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Pareto(1.0, 3.0):rsample({3}).shape)   --> ember.Size{3}
function Pareto:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local e = Distribution._rand_exponential(shape, self.alpha.dtype) / self.alpha
  return e:exp() * self.scale
end

--- log(alpha) + alpha log(scale) - (alpha + 1) log(value)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Pareto(1.0, 1.0):log_prob(1.0))   --> tensor(0.0000, ...)
function Pareto:log_prob(value)
  value = self:_value(value, "log_prob")
  local y = (value / self.scale):log()
  return self.alpha:log() - self.alpha * y - value:log()
end

--- log(scale / alpha) + 1 + 1 / alpha
-- @usage print(require("ember.distributions").Pareto(1.0, 1.0):entropy())   --> tensor(2.0000, ...)
function Pareto:entropy() return (self.scale / self.alpha):log() + self.alpha:reciprocal() + 1 end

--- 1 - (scale / value)^alpha
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Pareto(1.0, 1.0):cdf(2.0))   --> tensor(0.5000, ...)
function Pareto:cdf(value)
  value = self:_value(value, "cdf")
  return -(-(value / self.scale):log() * self.alpha):exp() + 1
end

--- scale (1 - value)^(-1 / alpha)
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").Pareto(1.0, 1.0):icdf(0.5))   --> tensor(2.0000, ...)
function Pareto:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return (-(-value):log1p() / self.alpha):exp() * self.scale
end

return Pareto
