--- distributions.Multinomial(total_count, probs) or
-- Multinomial(total_count, {logits = l}): the counts of total_count draws
-- of a Categorical over the last dim's K categories
-- (torch.distributions.Multinomial); total_count an integer (one for the
-- whole batch, as torch), event shape [K]. Samples are counts in the
-- parameters' dtype; log_prob works for any total of counts, as torch's.
-- @usage local D = require "ember.distributions"
-- local d = D.Multinomial(4, ember.tensor({0.2, 0.3, 0.5}))
-- print(d.mean, d:log_prob(ember.tensor({1.0, 1.0, 2.0})))   --> tensor([0.8000, 1.2000, 2.0000], ...)	tensor(-1.7148, ...)
-- @classmod distributions.Multinomial
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Categorical = require "ember.distributions.Categorical"
local Binomial = require "ember.distributions.Binomial"
local constraints = require "ember.distributions.constraints"

local Multinomial = Distribution:extend("Multinomial")
Multinomial.arg_constraints = Categorical.arg_constraints
Multinomial._param_names = { "probs", "logits" }

function Multinomial:__init(...)
  local o = self:_args({ "total_count", "probs", "logits" }, ...)
  local n = o.total_count
  if n == nil then n = 1 end
  if math.type(n) ~= "integer" or n < 0 then
    self:_error("total_count must be a nonnegative integer (one for the whole batch; torch's neither takes a tensor), got %s", tostring(n))
  end
  self.total_count = n
  Categorical._over(self, o)
end

function Multinomial:_after_expand(bs)
  self._categorical = Categorical._from(self.probs, self.logits, self._validate_args)
end

function Multinomial:__tostring()
  return ("distributions.Multinomial(total_count: %d, %s)"):format(self.total_count, Distribution.__tostring(self):match("%((.*)%)$"))
end

--- counts: nonnegative integers summing to total_count
-- @usage print(require("ember.distributions").Multinomial(3, ember.ones(2)).support.name)   --> counts summing to 3
Multinomial._props.support = function(self)
  local n = self.total_count
  return setmetatable({ name = ("counts summing to %d"):format(n), event_dim = 1, check = function(t)
    return t:ge(0):logical_and(t:eq(t:floor())):all(-1):logical_and(t:sum(-1):le(n))
  end }, { __tostring = function(c) return c.name end })
end
--- total_count probs
-- @usage print(require("ember.distributions").Multinomial(2, ember.ones(2)).mean)   --> tensor([1.0000, 1.0000], ...)
Multinomial._props.mean = function(self) return self.probs * self.total_count end
--- total_count probs (1 - probs)
-- @usage print(require("ember.distributions").Multinomial(2, ember.ones(2)).variance)   --> tensor([0.5000, 0.5000], ...)
Multinomial._props.variance = function(self) return self.probs * (-self.probs + 1) * self.total_count end
--- probs' shape
-- @usage print(require("ember.distributions").Multinomial(2, ember.ones(3)).param_shape)   --> ember.Size{3}
Multinomial._props.param_shape = function(self) return self.probs.shape end

--- counts (no gradient): total_count Categorical draws tallied.
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Multinomial(5, ember.ones(3)):sample({2}):sum(-1))   --> tensor([5.0000, 5.0000], ...)
function Multinomial:sample(sample_shape)
  local ss = self:_sample_shape(sample_shape)
  local shape = self:extended_shape(ss)
  local k = self._categorical._num_events
  if self.total_count == 0 then return ember.zeros(shape, { dtype = self.probs.dtype }) end
  local draws = self._categorical:sample(Distribution._concat({ self.total_count }, ss))   -- [n, ss.., B..]
  return ember.one_hot(draws, k):to(self.probs.dtype):sum(1)
end

--- lgamma(sum x + 1) - sum lgamma(x + 1) + sum x logits (0 log 0 = 0 for an impossible category)
-- @tparam Tensor value counts [..., K]
-- @usage print(require("ember.distributions").Multinomial(2, ember.ones(2)):log_prob(ember.tensor({1.0, 1.0})))   --> tensor(-0.6931, ...)
function Multinomial:log_prob(value)
  value = self:_value(value, "log_prob")
  local shape = ember.broadcast_shapes(value.shape, self.logits.shape)
  local logits = self.logits:expand(shape)
  value = value:expand(shape)
  logits = ember.where(value:eq(0):logical_and(logits:eq(-math.huge)), 0.0, logits)
  return (value:sum(-1) + 1):lgamma() - (value + 1):lgamma():sum(-1) + (logits * value):sum(-1)
end

--- n H(Categorical) - lgamma(n + 1) + sum over categories of E[lgamma(X_k + 1)], X_k ~ Binomial(n, p_k) (torch's)
-- @usage print(require("ember.distributions").Multinomial(1, ember.ones(2)):entropy())   --> tensor(0.6931, ...)
function Multinomial:entropy()
  local n = self.total_count
  local term1 = self._categorical:entropy() * n - ember.tensor(n + 1.0, { dtype = self.probs.dtype }):lgamma()
  if n == 0 then return term1 end
  local binomial = Binomial(n, self.probs, { validate_args = false })
  local support = binomial:enumerate_support(false):narrow(1, 2, n)   -- 1..n
  local probs = binomial:log_prob(support):exp()
  local weights = (support + 1):lgamma()
  return term1 + (probs * weights):sum(1):sum(-1)
end

return Multinomial
