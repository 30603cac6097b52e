--- distributions.Bernoulli(probs) or Bernoulli{logits = l}: 1 with probability
-- probs (torch.distributions.Bernoulli); give exactly one of probs (in
-- [0, 1]) and logits (log(p / (1 - p))). Both are then fields; from probs,
-- logits are computed from the probabilities clamped to [eps, 1 - eps] as
-- torch does. Samples are 0 and 1 in the parameters' dtype; no rsample.
-- @usage local D = require "ember.distributions"
-- local d = D.Bernoulli{logits = ember.tensor({0.0, 2.0})}
-- print(d.probs)                                      --> tensor([0.5000, 0.8808], ...)
-- print(d:log_prob(ember.tensor({1.0, 0.0})))         --> tensor([-0.6931, -2.1269], ...)
-- @classmod distributions.Bernoulli
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Bernoulli = Distribution:extend("Bernoulli")
Bernoulli.arg_constraints = { probs = constraints.unit_interval, logits = constraints.real }
Bernoulli.support = constraints.boolean
Bernoulli._param_names = { "probs", "logits" }

-- torch's binary_cross_entropy_with_logits, elementwise:
-- max(x, 0) - x z + log(1 + exp(-|x|))
local function bce_with_logits(x, z)
  return x:clamp(0, nil) - x * z + (-x:abs()):exp():log1p()
end
Bernoulli._bce_with_logits = bce_with_logits

function Bernoulli:__init(...)
  self:_binary_params(self:_args({ "probs", "logits" }, ...))
end

--- probs
-- @usage print(require("ember.distributions").Bernoulli(0.25).mean)   --> tensor(0.2500, ...)
Bernoulli._props.mean = function(self) return self.probs end
--- probs (1 - probs)
-- @usage print(require("ember.distributions").Bernoulli(0.25).variance)   --> tensor(0.1875, ...)
Bernoulli._props.variance = function(self) return self.probs * (-self.probs + 1) end

--- 0/1 draws with probability probs (no gradient).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Bernoulli(0.5):sample({4}).shape)   --> ember.Size{4}
function Bernoulli:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local p = self.probs:detach():expand(shape)
  return Distribution._rand(shape, p.dtype):lt(p):to(p.dtype)
end

--- value logits - softplus(logits) (minus binary_cross_entropy_with_logits)
-- @tparam Tensor value 0 or 1
-- @usage print(require("ember.distributions").Bernoulli(0.25):log_prob(1.0))   --> tensor(-1.3863, ...)
function Bernoulli:log_prob(value)
  value = self:_value(value, "log_prob")
  return -bce_with_logits(self.logits, value)
end

--- The values 0 and 1, shape [2, 1, ...] (expand = false) or [2, batch...] (torch's enumerate_support).
-- @bool[opt=true] expand
-- @usage print(require("ember.distributions").Bernoulli(ember.tensor({0.3, 0.4})):enumerate_support())   --> tensor([[0.0000, 0.0000], [1.0000, 1.0000]], ...)
function Bernoulli:enumerate_support(expand)
  return self:_support_values(ember.tensor({ 0, 1 }, { dtype = self.probs.dtype }), expand)
end

--- binary_cross_entropy_with_logits(logits, probs)
-- @usage print(require("ember.distributions").Bernoulli(0.5):entropy())   --> tensor(0.6931, ...)
function Bernoulli:entropy() return bce_with_logits(self.logits, self.probs) end

return Bernoulli
