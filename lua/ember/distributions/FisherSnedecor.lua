--- distributions.FisherSnedecor(df1, df2): the F distribution
-- (torch.distributions.FisherSnedecor); df1, df2 > 0. sample() is the
-- ratio of two scaled chi-squared (Gamma) draws; rsample() the same of
-- reparameterized Gamma draws (their implicit gradients in df1, df2), as
-- torch's. mean is
-- NaN for df2 <= 2 and variance for df2 <= 4, as torch's.
-- @usage local D = require "ember.distributions"
-- local d = D.FisherSnedecor(4.0, 6.0)
-- print(d.mean, d:log_prob(1.0))   --> tensor(1.5000, ...)	tensor(-0.8802, ...)
-- @classmod distributions.FisherSnedecor
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Gamma = require "ember.distributions.Gamma"
local constraints = require "ember.distributions.constraints"

local F = Distribution:extend("FisherSnedecor")
F.arg_constraints = { df1 = constraints.positive, df2 = constraints.positive }
F.support = constraints.positive
F._param_names = { "df1", "df2" }
F.has_rsample = true

--- df2 / (df2 - 2), NaN for df2 <= 2
-- @usage print(require("ember.distributions").FisherSnedecor(3.0, 4.0).mean)   --> tensor(2.0000, ...)
F._props.mean = function(self)
  local d2 = self.df2
  return ember.where(d2:le(2), 0 / 0, d2 / (d2 - 2))
end
--- 2 df2^2 (df1 + df2 - 2) / (df1 (df2 - 2)^2 (df2 - 4)), NaN for df2 <= 4
-- @usage print(require("ember.distributions").FisherSnedecor(4.0, 6.0).variance)   --> tensor(4.5000, ...)
F._props.variance = function(self)
  local d1, d2 = self.df1, self.df2
  local v = d2 ^ 2 * 2 * (d1 + d2 - 2) / (d1 * (d2 - 2) ^ 2 * (d2 - 4))
  return ember.where(d2:le(4), 0 / 0, v)
end

--- (X1 / df1) / (X2 / df2), X chi-squared draws (no gradient)
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").FisherSnedecor(4.0, 6.0):sample({3}).shape)   --> ember.Size{3}
function F:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local d1 = Distribution._sampler_input(self.df1, shape)
  local d2 = Distribution._sampler_input(self.df2, shape)
  local x1 = Gamma._standard(d1 * 0.5) / d1
  local x2 = Gamma._standard(d2 * 0.5) / d2
  local tiny = Distribution._tiny(self.df1.dtype)
  return (x1 / x2:clamp(Distribution._tiny("float64"), nil)):to(self.df1.dtype):clamp(tiny, nil)
end

--- X1 / X2, X1 ~ Gamma(df1 / 2, df1), X2 ~ Gamma(df2 / 2, df2) reparameterized: the gradient
-- flows to df1 and df2 (torch's rsample).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").FisherSnedecor(4.0, 6.0):rsample({3}).shape)   --> ember.Size{3}
function F:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local d1, d2 = self.df1:expand(shape), self.df2:expand(shape)
  local tiny = Distribution._tiny(d1.dtype)
  local x1 = Gamma._rstandard(d1 * 0.5) / d1
  local x2 = Distribution._clamp_value(Gamma._rstandard(d2 * 0.5) / d2, tiny, nil)
  return Distribution._clamp_value(x1 / x2, tiny, nil)
end

--- lgamma((d1+d2)/2) - lgamma(d1/2) - lgamma(d2/2) + d1/2 log(d1/d2) + (d1/2 - 1) log x - (d1+d2)/2 log(1 + d1 x / d2)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").FisherSnedecor(2.0, 2.0):log_prob(1.0))   --> tensor(-1.3863, ...)
function F:log_prob(value)
  value = self:_value(value, "log_prob")
  local ct1, ct2, ct3 = self.df1 * 0.5, self.df2 * 0.5, self.df1 / self.df2
  local t1 = (ct1 + ct2):lgamma() - ct1:lgamma() - ct2:lgamma()
  local t2 = ct1 * ct3:log() + (ct1 - 1) * value:log()
  local t3 = (ct1 + ct2) * (ct3 * value):log1p()
  return t1 + t2 - t3
end

return F
