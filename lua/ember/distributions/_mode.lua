-- ember/distributions/_mode.lua (internal): each distribution's `mode`
-- (torch 1.13's Distribution.mode, its values: NaN where torch's is, a
-- Categorical's 1-based as its values), installed as a property of the
-- classes by init.lua. Distribution's own is an error, as torch's base
-- class raises one; Kumaraswamy has none here (torch 1.13's formula
-- gives NaN for every a, b > 1, where the true mode ((a-1)/(ab-1))^(1/a) lies).
local ember = require "ember"

local NAN = 0 / 0
local function nan_where(mask, t) return ember.where(mask, NAN, t) end
local function zeros(t) return ember.zeros_like(t) end

local function dirichlet_mode(c)
  local m1 = (c - 1):clamp(0, nil)
  local mode = m1 / m1:sum(-1, true)
  -- every concentration below 1: the corner of the largest
  local all_small = c:lt(1):all(-1, true)
  local corner = ember.one_hot(mode:argmax(-1), c.shape[c:dim()]):to(c.dtype)
  return ember.where(all_small, corner, mode)
end

local modes = {
  Normal = function(d) return d.loc end,
  Cauchy = function(d) return d.loc end,
  Gumbel = function(d) return d.loc end,
  Laplace = function(d) return d.loc end,
  StudentT = function(d) return d.loc end,
  VonMises = function(d) return d.loc end,
  MultivariateNormal = function(d) return d.loc end,
  LowRankMultivariateNormal = function(d) return d.loc end,
  LogNormal = function(d) return (d.loc - d.scale ^ 2):exp() end,
  HalfNormal = function(d) return zeros(d.scale) end,
  HalfCauchy = function(d) return zeros(d.scale) end,
  Exponential = function(d) return zeros(d.rate) end,
  Geometric = function(d) return zeros(d.probs) end,
  Pareto = function(d) return d.scale end,
  Uniform = function(d) return d.high * NAN end,
  Poisson = function(d) return d.rate:floor() end,
  Gamma = function(d) return ((d.concentration - 1) / d.rate):clamp(0, nil) end, -- Chi2 too
  Weibull = function(d) return d.scale * ((d.concentration - 1) / d.concentration):pow(d.concentration:reciprocal()) end,
  FisherSnedecor = function(d) return nan_where(d.df1:le(2), (d.df1 - 2) / d.df1 * d.df2 / (d.df2 + 2)) end,
  Bernoulli = function(d) return nan_where(d.probs:eq(0.5), d.probs:ge(0.5):to(d.probs.dtype)) end,
  Binomial = function(d)
    local m = ((d.total_count + 1) * d.probs):floor()
    return ember.where(m:gt(d.total_count), m * 0 + d.total_count, m)
  end,
  NegativeBinomial = function(d) return ((d.total_count - 1) * d.logits:exp()):floor():clamp(0, nil) end,
  Categorical = function(d) return d.probs:argmax(-1) end,
  OneHotCategorical = function(d)
    local p = d.probs
    return ember.one_hot(p:argmax(-1), p.shape[p:dim()]):to(p.dtype)
  end,
  Dirichlet = function(d) return dirichlet_mode(d.concentration) end,
  Beta = function(d)
    local c = ember.stack({ d.concentration1, d.concentration0 }, -1)
    return dirichlet_mode(c):select(-1, 1)
  end,
  Independent = function(d) return d.base_dist.mode end,
}

return function(D)
  for name, f in pairs(modes) do D[name]._props.mode = f end
  D.Distribution._props.mode = function(self) self:_error("has no mode (torch's base class has none either)") end
end
