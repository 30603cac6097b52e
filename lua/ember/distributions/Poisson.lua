--- distributions.Poisson(rate): counts with mean rate
-- (torch.distributions.Poisson); rate >= 0. sample() inverts the cdf
-- term by term in float64 (its cost grows with the rate; refused past
-- rate 500, where exp(-rate) loses the precision the inversion needs --
-- torch samples those with another method). No entropy (torch's has none
-- that works either).
-- @usage local D = require "ember.distributions"
-- print(D.Poisson(2.0):log_prob(3.0), D.Poisson(2.0).variance)   --> tensor(-1.7123, ...)	tensor(2.0000, ...)
-- @classmod distributions.Poisson
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Poisson = Distribution:extend("Poisson")
Poisson.arg_constraints = { rate = constraints.nonnegative }
Poisson.support = constraints.nonnegative_integer
Poisson._param_names = { "rate" }

--- rate
-- @usage print(require("ember.distributions").Poisson(3.0).mean)   --> tensor(3.0000, ...)
Poisson._props.mean = function(self) return self.rate end
--- rate
-- @usage print(require("ember.distributions").Poisson(3.0).variance)   --> tensor(3.0000, ...)
Poisson._props.variance = function(self) return self.rate end

--- counts (no gradient), in the rate's dtype: the smallest k with u <= P(X <= k).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Poisson(4.0):sample({3}).shape)   --> ember.Size{3}
function Poisson:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local rate = self.rate:detach():double():expand(shape)
  if rate:numel() == 0 then return ember.zeros(shape, { dtype = self.rate.dtype }) end
  local rmax = rate:max():item()
  if rmax > 500 then self:_error("sample: rates past 500 are not supported (got %g)", rmax) end
  local u = Distribution._rand(shape, "float64")
  local p = (-rate):exp()
  local cdf = p
  local k = ember.zeros(shape, { dtype = "float64" })
  local i = 0
  while true do
    local more = u:gt(cdf)
    if not more:any():item() or i > 10 * rmax + 100 then break end
    k = k + more:double()
    i = i + 1
    p = p * rate / i
    cdf = cdf + p
  end
  return k:to(self.rate.dtype)
end

--- value log(rate) - rate - lgamma(value + 1)
-- @tparam Tensor value counts
-- @usage print(require("ember.distributions").Poisson(1.0):log_prob(0.0))   --> tensor(-1.0000, ...)
function Poisson:log_prob(value)
  value = self:_value(value, "log_prob")
  return ember.xlogy(value, self.rate) - self.rate - (value + 1):lgamma()
end

return Poisson
