--- distributions.Beta(concentration1, concentration0): density
-- x^(a-1) (1-x)^(b-1) / B(a, b) on [0, 1], a = concentration1,
-- b = concentration0 (torch.distributions.Beta); both > 0. sample() is
-- X / (X + Y) of Gamma(a) and Gamma(b) draws; rsample() is the same ratio of
-- reparameterized Gamma draws (their implicit gradients, `Gamma.rsample`):
-- an unbiased pathwise gradient, though not torch's per draw (torch's holds
-- the Beta's own quantile fixed, through torch._dirichlet_grad).
-- @usage local D = require "ember.distributions"
-- local d = D.Beta(2.0, 3.0)
-- print(d.mean, d:log_prob(0.5))   --> tensor(0.4000, ...)	tensor(0.4055, ...)
-- @classmod distributions.Beta
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Gamma = require "ember.distributions.Gamma"
local constraints = require "ember.distributions.constraints"

local Beta = Distribution:extend("Beta")
Beta.arg_constraints = { concentration1 = constraints.positive, concentration0 = constraints.positive }
Beta.support = constraints.unit_interval
Beta._param_names = { "concentration1", "concentration0" }
Beta.has_rsample = true

--- a / (a + b)
-- @usage print(require("ember.distributions").Beta(1.0, 3.0).mean)   --> tensor(0.2500, ...)
Beta._props.mean = function(self) return self.concentration1 / (self.concentration1 + self.concentration0) end
--- a b / ((a + b)^2 (a + b + 1))
-- @usage print(require("ember.distributions").Beta(1.0, 1.0).variance)   --> tensor(0.0833, ...)
Beta._props.variance = function(self)
  local a, b = self.concentration1, self.concentration0
  local s = a + b
  return a * b / (s ^ 2 * (s + 1))
end

--- X / (X + Y), X ~ Gamma(a, 1), Y ~ Gamma(b, 1) (no gradient).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Beta(2.0, 2.0):sample({3}).shape)   --> ember.Size{3}
function Beta:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local a = Distribution._sampler_input(self.concentration1, shape)
  local b = Distribution._sampler_input(self.concentration0, shape)
  local x, y = Gamma._standard(a), Gamma._standard(b)
  local eps = Distribution._eps(self.concentration1.dtype)
  return (x / (x + y)):to(self.concentration1.dtype):clamp(Distribution._tiny(self.concentration1.dtype), 1 - eps)
end

--- X / (X + Y) of reparameterized Gamma(a, 1) and Gamma(b, 1) draws: the gradient flows to a and b.
-- @param[opt] sample_shape a table of sizes
-- @usage local a = ember.tensor(2.0, {dtype = "float64"}):requires_grad_()
-- require("ember.distributions").Beta(a, 3.0):rsample({4}):sum():backward()
-- print(a.grad ~= nil)   --> true
function Beta:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local x = Gamma._rstandard(self.concentration1:expand(shape))
  local y = Gamma._rstandard(self.concentration0:expand(shape))
  local eps = Distribution._eps(x.dtype)
  return Distribution._clamp_value(x / (x + y), Distribution._tiny(x.dtype), 1 - eps)
end

--- (a - 1) log x + (b - 1) log(1 - x) + lgamma(a + b) - lgamma(a) - lgamma(b)
-- @tparam Tensor value in [0, 1]
-- @usage print(require("ember.distributions").Beta(1.0, 1.0):log_prob(0.3))   --> tensor(0.0000, ...)
function Beta:log_prob(value)
  value = self:_value(value, "log_prob")
  local a, b = self.concentration1, self.concentration0
  return ember.xlogy(a - 1, value) + ember.xlogy(b - 1, -value + 1) + (a + b):lgamma() - a:lgamma() - b:lgamma()
end

--- lgamma(a) + lgamma(b) - lgamma(a + b) - (2 - a - b) digamma(a + b) - (a - 1) digamma(a) - (b - 1) digamma(b)
-- @usage print(require("ember.distributions").Beta(1.0, 1.0):entropy())   --> tensor(0.0000, ...)
function Beta:entropy()
  local a, b = self.concentration1, self.concentration0
  local s = a + b
  return a:lgamma() + b:lgamma() - s:lgamma() - (-s + 2) * s:digamma()
      - (a - 1) * a:digamma() - (b - 1) * b:digamma()
end

return Beta
