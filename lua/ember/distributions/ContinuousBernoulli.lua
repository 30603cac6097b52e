--- distributions.ContinuousBernoulli(probs) or ContinuousBernoulli{logits = l}:
-- the continuous Bernoulli on [0, 1] (Loaiza-Ganem and Cunningham 2019;
-- torch.distributions.ContinuousBernoulli), the likelihood a VAE of [0, 1]
-- pixels needs; reparameterized through its icdf. Near probs = 0.5 (the
-- `lims`, default {0.499, 0.501}) the normalizer, mean, variance and cdf
-- use torch's Taylor expansions.
-- @usage local D = require "ember.distributions"
-- local d = D.ContinuousBernoulli(0.8)
-- print(d.mean, d:log_prob(0.9))   --> tensor(0.6120, ...)	tensor(0.4757, ...)
-- @classmod distributions.ContinuousBernoulli
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Bernoulli = require "ember.distributions.Bernoulli"
local constraints = require "ember.distributions.constraints"

local CB = Distribution:extend("ContinuousBernoulli")
CB.arg_constraints = { probs = constraints.unit_interval, logits = constraints.real }
CB.support = constraints.unit_interval
CB.has_rsample = true
CB._param_names = { "probs", "logits" }

function CB:__init(...)
  local o = self:_args({ "probs", "logits", "lims" }, ...)
  self:_probs_or_logits(o)
  local lims = o.lims or { 0.499, 0.501 }
  if type(lims) ~= "table" or type(lims[1]) ~= "number" or type(lims[2]) ~= "number" then
    self:_error("lims must be a table of two numbers {low, high}")
  end
  self._lims = lims
  self:_binary_params(o)
  -- torch keeps the clamped probabilities
  self.probs = Distribution._clamp_probs(self.probs)
end

function CB:_outside()
  return self.probs:le(self._lims[1]):logical_or(self.probs:gt(self._lims[2]))
end

function CB:_cut_probs()
  return ember.where(self:_outside(), self.probs, self._lims[1])
end

function CB:_log_norm()
  local cut = self:_cut_probs()
  local below = ember.where(cut:le(0.5), cut, 0.0)
  local above = ember.where(cut:ge(0.5), cut, 1.0)
  local log_norm = ((-cut):log1p() - cut:log()):abs():log()
      - ember.where(cut:le(0.5), (below * -2):log1p(), (above * 2 - 1):log())
  local x = (self.probs - 0.5) ^ 2
  local taylor = (x * (104 / 45) + 4 / 3) * x + math.log(2)
  return ember.where(self:_outside(), log_norm, taylor)
end

--- the mean (torch's closed form; a Taylor expansion near 0.5)
-- @usage print(require("ember.distributions").ContinuousBernoulli(0.5).mean)   --> tensor(0.5000, ...)
CB._props.mean = function(self)
  local cut = self:_cut_probs()
  local mus = cut / (cut * 2 - 1) + ((-cut):log1p() - cut:log()):reciprocal()
  local x = self.probs - 0.5
  local taylor = (x ^ 2 * (16 / 45) + 1 / 3) * x + 0.5
  return ember.where(self:_outside(), mus, taylor)
end
--- the variance (torch's closed form; a Taylor expansion near 0.5)
-- @usage print(require("ember.distributions").ContinuousBernoulli(0.5).variance)   --> tensor(0.0833, ...)
CB._props.variance = function(self)
  local cut = self:_cut_probs()
  local vars = cut * (cut - 1) / (-cut * 2 + 1) ^ 2 + ((-cut):log1p() - cut:log()) ^ -2
  local x = (self.probs - 0.5) ^ 2
  local taylor = -(-x * (128 / 945) + 1 / 15) * x + 1 / 12
  return ember.where(self:_outside(), vars, taylor)
end

--- icdf(u), u uniform in [0, 1)
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").ContinuousBernoulli(0.3):rsample({3}).shape)   --> ember.Size{3}
function CB:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  return self:_icdf(Distribution._rand(shape, self.probs.dtype))
end

--- -binary_cross_entropy_with_logits(logits, value) + log C(probs)
-- @tparam Tensor value in [0, 1]
-- @usage print(require("ember.distributions").ContinuousBernoulli(0.5):log_prob(0.3))   --> tensor(0.0000, ...)
function CB:log_prob(value)
  value = self:_value(value, "log_prob")
  return -Bernoulli._bce_with_logits(self.logits, value) + self:_log_norm()
end

--- the cdf (value itself near probs = 0.5)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").ContinuousBernoulli(0.5):cdf(0.3))   --> tensor(0.3000, ...)
function CB:cdf(value)
  value = self:_value(value, "cdf")
  local cut = self:_cut_probs()
  local cdfs = (cut:pow(value) * (-cut + 1):pow(-value + 1) + cut - 1) / (cut * 2 - 1)
  local unbounded = ember.where(self:_outside(), cdfs, value)
  return ember.where(value:le(0), 0.0, ember.where(value:ge(1), 1.0, unbounded))
end

function CB:_icdf(value)
  local cut = self:_cut_probs()
  local x = ((-cut + value * (cut * 2 - 1)):log1p() - (-cut):log1p()) / (cut:log() - (-cut):log1p())
  return ember.where(self:_outside(), x, value)
end

--- the inverse cdf (value itself near probs = 0.5)
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").ContinuousBernoulli(0.5):icdf(0.3))   --> tensor(0.3000, ...)
function CB:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return self:_icdf(value)
end

--- mean (log(1 - p) - log p) - log C(p) - log(1 - p)
-- @usage print(require("ember.distributions").ContinuousBernoulli(0.5):entropy())   --> tensor(0.0000, ...)
function CB:entropy()
  local l0, l1 = (-self.probs):log1p(), self.probs:log()
  return self.mean * (l0 - l1) - self:_log_norm() - l0
end

return CB
