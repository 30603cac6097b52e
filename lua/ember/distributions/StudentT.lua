--- distributions.StudentT(df, loc, scale): Student's t distribution
-- (torch.distributions.StudentT; loc defaults to 0, scale to 1); df and
-- scale > 0. sample() is loc + scale X / sqrt(Z / df), X normal, Z a
-- chi-squared Gamma(df/2, 1/2) draw; rsample() is the same with a
-- reparameterized chi-squared draw (the Gamma's implicit gradient in df), as
-- torch's. mean is NaN for df <= 1; variance inf for 1 < df <= 2, NaN for
-- df <= 1, as torch's.
-- @usage local D = require "ember.distributions"
-- local d = D.StudentT(3.0, 0.0, 1.0)
-- print(d:log_prob(0.0), d.variance)   --> tensor(-1.0009, ...)	tensor(3.0000, ...)
-- @classmod distributions.StudentT
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Gamma = require "ember.distributions.Gamma"
local constraints = require "ember.distributions.constraints"

local StudentT = Distribution:extend("StudentT")
StudentT.arg_constraints = { df = constraints.positive, loc = constraints.real, scale = constraints.positive }
StudentT.support = constraints.real
StudentT._param_names = { "df", "loc", "scale" }
StudentT._param_defaults = { loc = 0.0, scale = 1.0 }
StudentT.has_rsample = true

local HALF_LOG_PI = 0.5 * math.log(math.pi)
local LGAMMA_HALF = 0.5 * math.log(math.pi) -- lgamma(0.5) = log(sqrt(pi))

--- loc, NaN where df <= 1
-- @usage print(require("ember.distributions").StudentT(2.0, 1.5).mean)   --> tensor(1.5000, ...)
StudentT._props.mean = function(self) return ember.where(self.df:le(1), 0 / 0, self.loc) end
--- scale^2 df / (df - 2) for df > 2, inf for 1 < df <= 2, NaN for df <= 1
-- @usage print(require("ember.distributions").StudentT(4.0).variance)   --> tensor(2.0000, ...)
StudentT._props.variance = function(self)
  local df = self.df
  local v = self.scale ^ 2 * df / (df - 2)
  v = ember.where(df:le(2), math.huge, v)
  return ember.where(df:le(1), 0 / 0, v)
end

--- draws (no gradient): loc + scale X / sqrt(Z / df).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").StudentT(3.0):sample({4}).shape)   --> ember.Size{4}
function StudentT:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local df = Distribution._sampler_input(self.df, shape)
  local z = Gamma._standard(df * 0.5) * 2            -- chi-squared(df)
  local x = ember.randn(shape, { dtype = "float64" })
  local y = (x * (z / df):rsqrt()):to(self.df.dtype)
  return self.loc:detach() + self.scale:detach() * y
end

--- loc + scale X / sqrt(Z / df), Z a reparameterized chi-squared draw: the gradient flows to
-- df, loc and scale (torch's rsample).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").StudentT(3.0):rsample({4}).shape)   --> ember.Size{4}
function StudentT:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local df = self.df:expand(shape)
  local z = Gamma._rstandard(df * 0.5) * 2 -- chi-squared(df)
  local x = ember.randn(shape, { dtype = "float64" }):to(df.dtype)
  return self.loc + self.scale * (x * (z / df):rsqrt())
end

--- -(df + 1)/2 log(1 + y^2/df) - log(scale) - log(df)/2 - log(pi)/2 - lgamma(df/2) + lgamma((df+1)/2), y = (value - loc)/scale
-- @tparam Tensor value
-- @usage print(require("ember.distributions").StudentT(1.0):log_prob(1.0))   --> tensor(-1.8379, ...)
function StudentT:log_prob(value)
  value = self:_value(value, "log_prob")
  local df = self.df
  local y = (value - self.loc) / self.scale
  local Z = self.scale:log() + df:log() * 0.5 + HALF_LOG_PI + (df * 0.5):lgamma() - ((df + 1) * 0.5):lgamma()
  return -((df + 1) * 0.5) * (y ^ 2 / df):log1p() - Z
end

--- log(scale) + (df+1)/2 (digamma((df+1)/2) - digamma(df/2)) + log(df)/2 + lbeta(df/2, 1/2)
-- @usage print(require("ember.distributions").StudentT(1.0):entropy())   --> tensor(2.5310, ...)
function StudentT:entropy()
  local df = self.df
  local lbeta = (df * 0.5):lgamma() + LGAMMA_HALF - ((df + 1) * 0.5):lgamma()
  return self.scale:log() + (df + 1) * 0.5 * (((df + 1) * 0.5):digamma() - (df * 0.5):digamma())
      + df:log() * 0.5 + lbeta
end

return StudentT
