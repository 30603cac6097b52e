--- distributions.NegativeBinomial(total_count, probs) or
-- NegativeBinomial(total_count, {logits = l}): the number of successes
-- before total_count failures of Bernoulli(probs) trials
-- (torch.distributions.NegativeBinomial); total_count >= 0 (real), probs in
-- [0, 1). sample() draws Poisson(Gamma(total_count, exp(-logits))) (the
-- Poisson sampler's limit applies: rates past 500 are refused).
-- @usage local D = require "ember.distributions"
-- local d = D.NegativeBinomial(3.0, 0.4)
-- print(d.mean, d:log_prob(2.0))   --> tensor(2.0000, ...)	tensor(-1.5733, ...)
-- @classmod distributions.NegativeBinomial
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Gamma = require "ember.distributions.Gamma"
local Poisson = require "ember.distributions.Poisson"
local constraints = require "ember.distributions.constraints"

local NB = Distribution:extend("NegativeBinomial")
NB.arg_constraints = { total_count = constraints.nonnegative, logits = constraints.real,
  probs = setmetatable({ name = "in [0, 1)", check = function(t) return t:ge(0):logical_and(t:lt(1)) end },
    { __tostring = function() return "in [0, 1)" end }) }
NB.support = constraints.nonnegative_integer
NB._param_names = { "total_count", "probs", "logits" }

function NB:__init(...)
  self:_binary_params(self:_args({ "total_count", "probs", "logits" }, ...), { "total_count" })
end

--- total_count exp(logits)
-- @usage print(require("ember.distributions").NegativeBinomial(2.0, 0.5).mean)   --> tensor(2.0000, ...)
NB._props.mean = function(self) return self.total_count * self.logits:exp() end
--- mean / sigmoid(-logits)
-- @usage print(require("ember.distributions").NegativeBinomial(2.0, 0.5).variance)   --> tensor(4.0000, ...)
NB._props.variance = function(self) return self.total_count * self.logits:exp() / (-self.logits):sigmoid() end

--- counts (no gradient): Poisson draws of Gamma(total_count, exp(-logits)) rates.
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").NegativeBinomial(2.0, 0.5):sample({3}).shape)   --> ember.Size{3}
function NB:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local a = Distribution._sampler_input(self.total_count, shape)
  local g = ember.where(a:gt(0), Gamma._standard(ember.where(a:gt(0), a, 1.0)), 0.0)
  local rate = g * self.logits:detach():double():exp()
  return Poisson(rate, { validate_args = false }):sample():to(self.probs.dtype)
end

--- total_count logsigmoid(-logits) + value logsigmoid(logits) + lgamma(total_count + value) - lgamma(1 + value) - lgamma(total_count)
-- @tparam Tensor value counts
-- @usage print(require("ember.distributions").NegativeBinomial(1.0, 0.5):log_prob(0.0))   --> tensor(-0.6931, ...)
function NB:log_prob(value)
  value = self:_value(value, "log_prob")
  local n, l = self.total_count, self.logits
  local unnorm = n * -l:softplus() + value * -(-l):softplus()
  local norm = -(n + value):lgamma() + (value + 1):lgamma() + n:lgamma()
  norm = ember.where((n + value):eq(0), 0.0, norm)
  return unnorm - norm
end

return NB
