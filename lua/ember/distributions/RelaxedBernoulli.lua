--- distributions.RelaxedBernoulli(temperature, probs) or
-- RelaxedBernoulli(temperature, {logits = l}): the Concrete / relaxed
-- Bernoulli on (0, 1) (torch.distributions.RelaxedBernoulli),
-- reparameterized: sigmoid((logit(u) + logits) / temperature), u uniform.
-- `base_dist` is the LogitRelaxedBernoulli (the value before the sigmoid);
-- log_prob goes through the SigmoidTransform's Jacobian, as torch's.
-- Its samples exceed 0.5 with probability probs.
-- @usage local D = require "ember.distributions"
-- local d = D.RelaxedBernoulli(0.5, {logits = ember.tensor({0.0, 2.0})})
-- print(d:rsample({3}).shape, d:log_prob(ember.tensor({0.3, 0.9})))   --> ember.Size{3, 2}	tensor([-0.5633,  0.1319], ...)
-- @classmod distributions.RelaxedBernoulli
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local TD = require "ember.distributions.TransformedDistribution"
local transforms = require "ember.distributions.transforms"
local constraints = require "ember.distributions.constraints"

--- distributions.LogitRelaxedBernoulli(temperature, probs | {logits =}): the logit of a RelaxedBernoulli's value
-- (torch.distributions.relaxed_bernoulli.LogitRelaxedBernoulli), reparameterized: (logit(u) + logits) / temperature.
-- @usage local D = require "ember.distributions"
-- print(D.LogitRelaxedBernoulli(1.0, 0.5):log_prob(ember.tensor(0.0)))   --> tensor(-1.3863, ...)
local LRB = Distribution:extend("LogitRelaxedBernoulli")
LRB.arg_constraints = { temperature = constraints.positive, probs = constraints.unit_interval, logits = constraints.real }
LRB.support = constraints.real
LRB.has_rsample = true
LRB._param_names = { "temperature", "probs", "logits" }

function LRB:__init(...)
  self:_binary_params(self:_args({ "temperature", "probs", "logits" }, ...), { "temperature" })
end

--- (logit(u) + logits) / temperature, u uniform in [eps, 1 - eps]
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").LogitRelaxedBernoulli(1.0, 0.5):rsample({2}).shape)   --> ember.Size{2}
function LRB:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  return (Distribution._probs_to_logits(Distribution._rand(shape, self.logits.dtype)) + self.logits) / self.temperature
end

--- log(temperature) + diff - 2 log(1 + exp(diff)), diff = logits - temperature value
-- @tparam Tensor value
-- @usage print(require("ember.distributions").LogitRelaxedBernoulli(2.0, 0.5):log_prob(ember.tensor(0.0)))   --> tensor(-0.6931, ...)
function LRB:log_prob(value)
  value = self:_value(value, "log_prob")
  local diff = self.logits - value * self.temperature
  return self.temperature:log() + diff - diff:exp():log1p() * 2
end

local RelaxedBernoulli = TD:extend("RelaxedBernoulli")
RelaxedBernoulli.LogitRelaxedBernoulli = LRB

function RelaxedBernoulli:__init(...)
  self:_relaxed(LRB, transforms.SigmoidTransform(), ...)
end

function RelaxedBernoulli:__tostring()
  return Distribution.__tostring(self)
end

--- the open unit interval
-- @usage print(require("ember.distributions").RelaxedBernoulli(1.0, 0.5).support.name)   --> in [0, 1]
RelaxedBernoulli._props.support = function() return constraints.unit_interval end

--- The same relaxation with its parameters expanded to batch_shape.
-- @param batch_shape a table of sizes
-- @usage print(require("ember.distributions").RelaxedBernoulli(1.0, 0.5):expand({3}).batch_shape)   --> ember.Size{3}
function RelaxedBernoulli:expand(batch_shape)
  local bs = self:_sample_shape(batch_shape)
  return RelaxedBernoulli(self.temperature:expand(bs), { logits = self.logits:expand(bs), validate_args = self._validate_args })
end

return RelaxedBernoulli
