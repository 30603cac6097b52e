--- distributions.OneHotCategorical(probs) or OneHotCategorical{logits = l}:
-- a Categorical whose values are one-hot vectors of the K categories
-- (torch.distributions.OneHotCategorical): event shape [K], samples in the
-- parameters' dtype. mean is probs, variance probs (1 - probs).
-- @usage local D = require "ember.distributions"
-- local d = D.OneHotCategorical(ember.tensor({0.2, 0.8}))
-- print(d:sample().shape, d:log_prob(ember.tensor({0.0, 1.0})))   --> ember.Size{2}	tensor(-0.2231, ...)
-- @classmod distributions.OneHotCategorical
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Categorical = require "ember.distributions.Categorical"
local constraints = require "ember.distributions.constraints"

local OneHotCategorical = Distribution:extend("OneHotCategorical")
OneHotCategorical.arg_constraints = Categorical.arg_constraints
OneHotCategorical.support = constraints.one_hot
OneHotCategorical._param_names = { "probs", "logits" }

function OneHotCategorical:__init(...)
  Categorical._over(self, self:_args({ "probs", "logits" }, ...))
end

function OneHotCategorical:_after_expand(bs)
  self._categorical = Categorical._from(self.probs, self.logits, self._validate_args)
end

--- probs
-- @usage print(require("ember.distributions").OneHotCategorical(ember.ones(2)).mean)   --> tensor([0.5000, 0.5000], ...)
OneHotCategorical._props.mean = function(self) return self.probs end
--- probs (1 - probs)
-- @usage print(require("ember.distributions").OneHotCategorical(ember.ones(2)).variance)   --> tensor([0.2500, 0.2500], ...)
OneHotCategorical._props.variance = function(self) return self.probs * (-self.probs + 1) end
--- probs' shape
-- @usage print(require("ember.distributions").OneHotCategorical(ember.ones(2)).param_shape)   --> ember.Size{2}
OneHotCategorical._props.param_shape = function(self) return self.probs.shape end

--- one-hot draws, shape sample_shape .. batch_shape .. [K].
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").OneHotCategorical(ember.tensor({0.0, 1.0})):sample())   --> tensor([0.0000, 1.0000], ...)
function OneHotCategorical:sample(sample_shape)
  local idx = self._categorical:sample(sample_shape)
  return ember.one_hot(idx, self._categorical._num_events):to(self.probs.dtype)
end

--- the Categorical's log_prob of the hot index
-- @tparam Tensor value one-hot vectors
-- @usage print(require("ember.distributions").OneHotCategorical(ember.tensor({0.2, 0.8})):log_prob(ember.tensor({1.0, 0.0})))   --> tensor(-1.6094, ...)
function OneHotCategorical:log_prob(value)
  value = self:_value(value, "log_prob")
  return self._categorical:log_prob(value:argmax(-1))
end

--- The K one-hot vectors, shape [K, 1, ..., K] (expand = false) or [K, batch..., K] (torch's enumerate_support).
-- @bool[opt=true] expand
-- @usage print(require("ember.distributions").OneHotCategorical(ember.ones(2, 3)):enumerate_support().shape)   --> ember.Size{3, 2, 3}
function OneHotCategorical:enumerate_support(expand)
  return self:_support_values(ember.eye(self._categorical._num_events, { dtype = self.probs.dtype }), expand)
end

--- the Categorical's entropy
-- @usage print(require("ember.distributions").OneHotCategorical(ember.ones(4)):entropy())   --> tensor(1.3863, ...)
function OneHotCategorical:entropy() return self._categorical:entropy() end

return OneHotCategorical
