--- distributions.Geometric(probs) or Geometric{logits = l}: the number of
-- failures before the first success of Bernoulli(probs) trials
-- (torch.distributions.Geometric); probs in (0, 1]. Samples are counts in
-- the parameters' dtype.
-- @usage local D = require "ember.distributions"
-- local d = D.Geometric(0.25)
-- print(d.mean, d:log_prob(2.0))   --> tensor(3.0000, ...)	tensor(-1.9617, ...)
-- @classmod distributions.Geometric
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Bernoulli = require "ember.distributions.Bernoulli"
local constraints = require "ember.distributions.constraints"

local Geometric = Distribution:extend("Geometric")
Geometric.arg_constraints = { probs = constraints.unit_interval, logits = constraints.real }
Geometric.support = constraints.nonnegative_integer
Geometric._param_names = { "probs", "logits" }

function Geometric:__init(...)
  local which = self:_binary_params(self:_args({ "probs", "logits" }, ...))
  if which == "probs" and self._validate_args and not self.probs:gt(0):all():item() then self:_error("probs must be positive") end
end

--- 1 / probs - 1
-- @usage print(require("ember.distributions").Geometric(0.5).mean)   --> tensor(1.0000, ...)
Geometric._props.mean = function(self) return self.probs:reciprocal() - 1 end
--- (1 / probs - 1) / probs
-- @usage print(require("ember.distributions").Geometric(0.5).variance)   --> tensor(2.0000, ...)
Geometric._props.variance = function(self) return (self.probs:reciprocal() - 1) / self.probs end

--- floor(log(u) / log(1 - probs)), u uniform in [tiny, 1) (no gradient).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Geometric(1.0):sample({3}))   --> tensor([0.0000, 0.0000, 0.0000], ...)
function Geometric:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local p = self.probs:detach():expand(shape)
  local tiny = Distribution._tiny(p.dtype)
  local u = Distribution._rand(shape, p.dtype):clamp(tiny, nil)
  return (u:log() / (-p):log1p()):floor()
end

--- value log(1 - probs) + log(probs) (0 where probs = 1 and value = 0, as torch)
-- @tparam Tensor value counts
-- @usage print(require("ember.distributions").Geometric(0.5):log_prob(0.0))   --> tensor(-0.6931, ...)
function Geometric:log_prob(value)
  value = self:_value(value, "log_prob")
  local p = ember.where(self.probs:eq(1):logical_and(value:eq(0)), 0.0, self.probs)
  return value * (-p):log1p() + self.probs:log()
end

--- binary_cross_entropy_with_logits(logits, probs) / probs
-- @usage print(require("ember.distributions").Geometric(0.5):entropy())   --> tensor(1.3863, ...)
function Geometric:entropy()
  return Bernoulli._bce_with_logits(self.logits, self.probs) / self.probs
end

return Geometric
