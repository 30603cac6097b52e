--- distributions.Binomial(total_count, probs) or Binomial{total_count =, logits =}:
-- the number of successes of total_count Bernoulli trials
-- (torch.distributions.Binomial; total_count defaults to 1). Samples count
-- the successes of total_count uniform draws (cost grows with the largest
-- total_count); entropy needs one total_count for the whole batch, as torch.
-- @usage local D = require "ember.distributions"
-- local d = D.Binomial(10, ember.tensor({0.5, 0.2}))
-- print(d.mean, d:log_prob(ember.tensor({5.0, 2.0})))   --> tensor([5.0000, 2.0000], ...)	tensor([-1.4020, -1.1974], ...)
-- @classmod distributions.Binomial
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Binomial = Distribution:extend("Binomial")
Binomial.arg_constraints = { total_count = constraints.nonnegative_integer, probs = constraints.unit_interval, logits = constraints.real }
Binomial._param_names = { "total_count", "probs", "logits" }

function Binomial:__init(...)
  local o = self:_args({ "total_count", "probs", "logits" }, ...)
  if o.total_count == nil then o.total_count = 1 end
  self:_binary_params(o, { "total_count" })
end

--- integer_interval(0, total_count)
-- @usage print(require("ember.distributions").Binomial(5, 0.5).support.name)   --> an integer in [0, total_count]
Binomial._props.support = function(self) return constraints.integer_interval(0, self.total_count) end
--- total_count probs
-- @usage print(require("ember.distributions").Binomial(4, 0.25).mean)   --> tensor(1.0000, ...)
Binomial._props.mean = function(self) return self.total_count * self.probs end
--- total_count probs (1 - probs)
-- @usage print(require("ember.distributions").Binomial(4, 0.25).variance)   --> tensor(0.7500, ...)
Binomial._props.variance = function(self) return self.total_count * self.probs * (-self.probs + 1) end

--- counts of successes (no gradient), in the parameters' dtype.
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Binomial(3, 1.0):sample({2}))   --> tensor([3.0000, 3.0000], ...)
function Binomial:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local n = self.total_count:detach():expand(shape)
  local p = self.probs:detach():expand(shape)
  local N = #shape == 0 and n:item() or (n:numel() > 0 and n:max():item() or 0)
  N = math.floor(N + 0.5)
  if N == 0 then return ember.zeros(shape, { dtype = p.dtype }) end
  local full = Distribution._concat(shape, { N })
  local hits = Distribution._rand(full, p.dtype):lt(p:unsqueeze(-1):expand(full))
  local trial = ember.arange(1, N + 1, { dtype = p.dtype })
  local live = trial:le(n:unsqueeze(-1))
  return hits:logical_and(live):to(p.dtype):sum(-1)
end

-- torch's _clamp_by_zero
local function clamp_by_zero(x) return (x:clamp(0, nil) + x - x:clamp(nil, 0)) / 2 end

--- log C(n, k) + k logits - n log(1 + exp(logits)), as torch writes it
-- @tparam Tensor value counts in 0..total_count
-- @usage print(require("ember.distributions").Binomial(2, 0.5):log_prob(1.0))   --> tensor(-0.6931, ...)
function Binomial:log_prob(value)
  value = self:_value(value, "log_prob")
  local n, l = self.total_count, self.logits
  local log_factorial_n = (n + 1):lgamma()
  local log_factorial_k = (value + 1):lgamma()
  local log_factorial_nmk = (n - value + 1):lgamma()
  local normalize = n * clamp_by_zero(l) + n * (-l:abs()):exp():log1p() - log_factorial_n
  return value * l - log_factorial_k - log_factorial_nmk - normalize
end

--- The counts 0..total_count, shape [n + 1, 1, ...] (expand = false) or [n + 1, batch...]
-- (torch's enumerate_support; one total_count for the whole batch).
-- @bool[opt=true] expand
-- @usage print(require("ember.distributions").Binomial(2, 0.5):enumerate_support())   --> tensor([0.0000, 1.0000, 2.0000], ...)
function Binomial:enumerate_support(expand)
  local N = self.total_count:max():item()
  if self.total_count:min():item() ~= N then
    self:_error("enumerate_support: the total_count must be the same for the whole batch (torch's too)")
  end
  return self:_support_values(ember.arange(0, N + 1, { dtype = self.probs.dtype }), expand)
end

--- -sum_k p(k) log p(k) over k = 0..total_count (one total_count for the batch, as torch)
-- @usage print(require("ember.distributions").Binomial(1, 0.5):entropy())   --> tensor(0.6931, ...)
function Binomial:entropy()
  local lp = self:log_prob(self:enumerate_support(false))
  return -(lp:exp() * lp):sum(1)
end

return Binomial
