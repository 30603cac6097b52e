-- distributions/_half.lua (internal): the halves of the scale families
-- symmetric about 0, |X| for X ~ Base(0, scale) (HalfNormal of a Normal,
-- HalfCauchy of a Cauchy; torch's are a TransformedDistribution of Base
-- through an AbsTransform): their one parameter, constructor and base_dist,
-- and the base's rsample, log_prob, cdf, icdf and entropy folded at 0. The
-- classes keep their documented methods, each calling the one here.
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local M = {}

-- Makes cls the half of Base: scale > 0, values >= 0, reparameterized;
-- base_dist = Base(0, scale) (unvalidated), made again by expand.
function M.install(cls, Base)
  cls.arg_constraints = { scale = constraints.positive }
  cls.support = constraints.nonnegative
  cls.has_rsample = true
  cls._param_names = { "scale" }
  function cls:__init(...)
    Distribution.__init(self, ...)
    self:_after_expand()
  end
  function cls:_after_expand()
    self.base_dist = Base(0.0, self.scale, { validate_args = false })
  end
end

-- |base rsample|
function M.rsample(self, sample_shape) return self.base_dist:rsample(sample_shape):abs() end

-- the base's log_prob + log 2 on values >= 0, -inf below
function M.log_prob(self, value)
  value = self:_value(value, "log_prob")
  local lp = self.base_dist:log_prob(value) + math.log(2)
  return ember.where(value:ge(0), lp, -math.huge)
end

-- 2 base cdf - 1
function M.cdf(self, value)
  value = self:_value(value, "cdf")
  return self.base_dist:cdf(value) * 2 - 1
end

-- the base's icdf((value + 1) / 2)
function M.icdf(self, value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return self.base_dist:icdf((value + 1) / 2)
end

-- the base's entropy - log 2
function M.entropy(self) return self.base_dist:entropy() - math.log(2) end

return M
