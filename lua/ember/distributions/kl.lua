--- distributions.kl: `kl_divergence(p, q)`, KL(p || q) of shape batch_shape,
-- for the pairs torch.distributions registers among ember's distributions
-- (each with itself: Normal, Uniform, Bernoulli, Categorical,
-- OneHotCategorical, Binomial, Exponential, Laplace, Gumbel, Cauchy,
-- Poisson, Gamma, Beta, Dirichlet, MultivariateNormal, Independent; LogNormal pairs
-- through their Normals, as torch's transformed distributions; and torch's
-- pairs of different classes among them: Bernoulli-Poisson, Beta to
-- Exponential/Gamma/Normal/Uniform, Exponential to Gamma/Gumbel/Normal,
-- Gamma to Exponential/Gumbel/Normal, Gumbel-Normal, Laplace-Normal,
-- Normal to Gumbel/Laplace, Uniform to Beta/Exponential/Gamma/Gumbel/Normal,
-- Geometric, HalfNormal, HalfCauchy and Pareto with themselves,
-- ContinuousBernoulli with itself, Beta/Uniform to it, it to
-- Exponential/Normal/Uniform, Pareto to
-- Exponential/Gamma/Normal, Uniform-Pareto, TransformedDistributions with
-- the same transforms (their bases' KL),
-- and inf where p's support is not inside q's, e.g. Normal-Uniform). A pair is looked up along
-- both classes' parents, as torch's (Chi2 is a Gamma).
-- An unregistered pair is refused naming both; `register_kl(P, Q, fn)` adds
-- one (torch's decorator, as a call). Formulas are torch 1.13's, infinities
-- included (Uniform's support not inside the other's, probability 0 in q
-- where p has mass).
-- @usage local D = require "ember.distributions"
-- print(D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(1.0, 1.0)))   --> tensor(0.5000, ...)
-- print(pcall(D.kl_divergence, D.Normal(0.0, 1.0), D.Cauchy(0.0, 1.0)))   --> false ...no KL(Normal || Cauchy) registered...
-- @module distributions.kl
local ember = require "ember"
local errors = require "ember._errors"
local Distribution = require "ember.distributions.Distribution"

local kl = {}
local registry = {}

--- Registers fn(p, q) as KL(p || q) for p of class P and q of class Q.
-- @param P a distribution class
-- @param Q a distribution class
-- @tparam function fn
-- @usage local D = require "ember.distributions"
-- D.register_kl(D.Exponential, D.Poisson, function(p, q) return p.rate * 0 + math.huge end)
-- print(D.kl_divergence(D.Exponential(1.0), D.Poisson(1.0)))   --> tensor(inf, ...)
function kl.register_kl(P, Q, fn)
  if type(P) ~= "table" or type(Q) ~= "table" or type(fn) ~= "function" then
    errors.raise("distributions.register_kl: expected (class, class, function)")
  end
  registry[P] = registry[P] or {}
  registry[P][Q] = fn
end

local function class_of(d) return getmetatable(d) end

--- KL(p || q), of shape broadcast(p.batch_shape, q.batch_shape).
-- @param p a distribution
-- @param q a distribution
-- @usage local D = require "ember.distributions"
-- local p = D.Categorical(ember.tensor({0.5, 0.5}))
-- local q = D.Categorical(ember.tensor({0.9, 0.1}))
-- print(D.kl_divergence(p, q))   --> tensor(0.5108, ...)
function kl.kl_divergence(p, q)
  local P, Q = class_of(p), class_of(q)
  if type(P) ~= "table" or type(Q) ~= "table" or not P.__name or not Q.__name or p.batch_shape == nil or q.batch_shape == nil then
    errors.raise("distributions.kl_divergence: expected two distributions, got %s and %s", type(p), type(q))
  end
  -- the most specific registered pair along both classes' parents (torch's
  -- lookup by the classes' MRO): Chi2 is taken as a Gamma
  local fn
  local pc = P
  while pc and not fn do
    local qc = Q
    while qc and not fn do
      fn = registry[pc] and registry[pc][qc]
      local m = getmetatable(qc)
      qc = m and type(m.__index) == "table" and m.__index.__name and m.__index or nil
    end
    local m = getmetatable(pc)
    pc = m and type(m.__index) == "table" and m.__index.__name and m.__index or nil
  end
  if not fn then
    local with = {}
    for k in pairs(registry[P] or {}) do with[#with + 1] = k.__name end
    table.sort(with)
    errors.raise("distributions.kl_divergence: no KL(%s || %s) registered (for p a %s: %s); register_kl(P, Q, fn) adds one",
      P.__name, Q.__name, P.__name, #with > 0 and ("q a " .. table.concat(with, ", ")) or "none")
  end
  return fn(p, q)
end

-- The classes, loaded on first use (init.lua requires this file after them).
local D = setmetatable({}, { __index = function(_, k) return require("ember.distributions." .. k) end })

local INF = math.huge
local function inf_where(mask, t) return ember.where(mask, INF, t) end
local function zero_where(mask, t) return ember.where(mask, 0.0, t) end

local EULER = Distribution._EULER

function kl._register_all()
  kl.register_kl(D.Normal, D.Normal, function(p, q)
    local var_ratio = (p.scale / q.scale) ^ 2
    local t1 = ((p.loc - q.loc) / q.scale) ^ 2
    return (var_ratio + t1 - 1 - var_ratio:log()) * 0.5
  end)
  kl.register_kl(D.LogNormal, D.LogNormal, function(p, q) return kl.kl_divergence(p.base_dist, q.base_dist) end)
  kl.register_kl(D.Uniform, D.Uniform, function(p, q)
    local r = ((q.high - q.low) / (p.high - p.low)):log()
    return inf_where(q.low:gt(p.low):logical_or(q.high:lt(p.high)), r)
  end)
  kl.register_kl(D.Bernoulli, D.Bernoulli, function(p, q)
    local t1 = p.probs * ((-q.logits):softplus() - (-p.logits):softplus())
    t1 = zero_where(p.probs:eq(0), inf_where(q.probs:eq(0), t1))
    local t2 = (-p.probs + 1) * (q.logits:softplus() - p.logits:softplus())
    t2 = zero_where(p.probs:eq(1), inf_where(q.probs:eq(1), t2))
    return t1 + t2
  end)
  local function categorical(p, q)
    local t = p.probs * (p.logits - q.logits)
    local shape = ember.broadcast_shapes(t.shape, q.probs.shape)
    t = inf_where(q.probs:eq(0):expand(shape), t:expand(shape))
    t = zero_where(p.probs:eq(0):expand(shape), t)
    return t:sum(-1)
  end
  kl.register_kl(D.Categorical, D.Categorical, categorical)
  kl.register_kl(D.OneHotCategorical, D.OneHotCategorical, function(p, q) return categorical(p._categorical, q._categorical) end)
  kl.register_kl(D.Binomial, D.Binomial, function(p, q)
    if p.total_count:lt(q.total_count):any():item() then
      errors.raise("distributions.kl_divergence: KL(Binomial || Binomial) where p's total_count < q's has no closed form: refused, as torch 1.13 refuses it")
    end
    local k = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs):log1p() - (-q.probs):log1p())
    return inf_where(p.total_count:gt(q.total_count), k)
  end)
  kl.register_kl(D.Exponential, D.Exponential, function(p, q)
    local r = q.rate / p.rate
    return -r:log() + r - 1
  end)
  kl.register_kl(D.Laplace, D.Laplace, function(p, q)
    local scale_ratio = p.scale / q.scale
    local d = (p.loc - q.loc):abs()
    return -scale_ratio:log() + d / q.scale + scale_ratio * (-d / p.scale):exp() - 1
  end)
  kl.register_kl(D.Gumbel, D.Gumbel, function(p, q)
    local ct1, ct2, ct3 = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    local t1 = -ct1:log() - ct2 + ct3
    local t2 = ct1 * EULER
    local t3 = (ct2 + (ct1 + 1):lgamma() - ct3):exp()
    return t1 + t2 + t3 - (1 + EULER)
  end)
  kl.register_kl(D.Cauchy, D.Cauchy, function(p, q)
    local num = (p.scale + q.scale) ^ 2 + (p.loc - q.loc) ^ 2
    return (num / (p.scale * q.scale * 4)):log()
  end)
  kl.register_kl(D.Poisson, D.Poisson, function(p, q)
    return p.rate * (p.rate:log() - q.rate:log()) - (p.rate - q.rate)
  end)
  kl.register_kl(D.Gamma, D.Gamma, function(p, q)
    local t1 = q.concentration * (p.rate / q.rate):log()
    local t2 = q.concentration:lgamma() - p.concentration:lgamma()
    local t3 = (p.concentration - q.concentration) * p.concentration:digamma()
    local t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4
  end)
  kl.register_kl(D.Beta, D.Beta, function(p, q)
    local pa, pb, qa, qb = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    local sp, sq = pa + pb, qa + qb
    local t1 = sp:lgamma() - sq:lgamma()
    local t2 = pa:lgamma() - qa:lgamma() + pb:lgamma() - qb:lgamma()
    local dsp = sp:digamma()
    return t1 - t2 + (pa - qa) * (pa:digamma() - dsp) + (pb - qb) * (pb:digamma() - dsp)
  end)
  kl.register_kl(D.Dirichlet, D.Dirichlet, function(p, q)
    local pc, qc = p.concentration, q.concentration
    local sp, sq = pc:sum(-1), qc:sum(-1)
    local t1 = sp:lgamma() - sq:lgamma()
    local t2 = (pc:lgamma() - qc:lgamma()):sum(-1)
    local t3 = pc - qc
    local t4 = pc:digamma() - sp:digamma():unsqueeze(-1)
    return t1 - t2 + (t3 * t4):sum(-1)
  end)
  kl.register_kl(D.MultivariateNormal, D.MultivariateNormal, function(p, q)
    if p.event_shape[1] ~= q.event_shape[1] then
      errors.raise("distributions.kl_divergence: MultivariateNormals of event sizes %d and %d", p.event_shape[1], q.event_shape[1])
    end
    local n = p.event_shape[1]
    local solve = D.MultivariateNormal.solve_tril
    local half_term1 = q:_half_log_det() - p:_half_log_det()
    local shape = ember.broadcast_shapes(p.scale_tril.shape, q.scale_tril.shape)
    local term2 = (solve(q.scale_tril:expand(shape), p.scale_tril:expand(shape)) ^ 2):sum(-1):sum(-1)
    local term3 = (solve(q.scale_tril, (q.loc - p.loc):unsqueeze(-1)):squeeze(-1) ^ 2):sum(-1)
    return half_term1 + (term2 + term3 - n) * 0.5
  end)
  kl.register_kl(D.Independent, D.Independent, function(p, q)
    if p.reinterpreted_batch_ndims ~= q.reinterpreted_batch_ndims then
      errors.raise("distributions.kl_divergence: Independents with different reinterpreted_batch_ndims (%d, %d)",
        p.reinterpreted_batch_ndims, q.reinterpreted_batch_ndims)
    end
    return Distribution._sum_rightmost(kl.kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
  end)
  kl._register_cross()
end

-- torch 1.13's pairs of different classes: closed forms, and inf where p's
-- support is not inside q's
function kl._register_cross()
  local LOG_2PI = math.log(2 * math.pi)
  local function x_log_x(t) return t * t:log() end
  local function inf_like(t) return ember.full(t.shape, INF, { dtype = t.dtype }) end
  local infinite = {
    { "Exponential", { "Beta", "Uniform" }, "rate" },
    { "Gamma", { "Beta", "Uniform" }, "concentration" },
    { "Gumbel", { "Beta", "Exponential", "Gamma", "Uniform" }, "loc" },
    { "Laplace", { "Beta", "Exponential", "Gamma", "Uniform" }, "loc" },
    { "Normal", { "Beta", "Exponential", "Gamma", "Uniform" }, "loc" },
    { "Poisson", { "Bernoulli", "Binomial" }, "rate" },
  }
  for _, e in ipairs(infinite) do
    for _, qn in ipairs(e[2]) do
      kl.register_kl(D[e[1]], D[qn], function(p) return inf_like(p[e[3]]) end)
    end
  end
  kl.register_kl(D.Bernoulli, D.Poisson, function(p, q)
    return -p:entropy() - (p.probs * q.rate:log() - q.rate)
  end)
  kl.register_kl(D.Beta, D.Exponential, function(p, q)
    return -p:entropy() - q.rate:log() + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))
  end)
  kl.register_kl(D.Beta, D.Gamma, function(p, q)
    local a, b = p.concentration1, p.concentration0
    local t1 = -p:entropy()
    local t2 = q.concentration:lgamma() - q.concentration * q.rate:log()
    local t3 = (q.concentration - 1) * (a:digamma() - (a + b):digamma())
    local t4 = q.rate * a / (a + b)
    return t1 + t2 - t3 + t4
  end)
  kl.register_kl(D.Beta, D.Normal, function(p, q)
    local a, b = p.concentration1, p.concentration0
    local E = a / (a + b)
    local var_normal = q.scale ^ 2
    local t1 = -p:entropy()
    local t2 = (var_normal * (2 * math.pi)):log() * 0.5
    local t3 = (E * (-E + 1) / (a + b + 1) + E ^ 2) * 0.5
    local t4 = q.loc * E
    local t5 = q.loc ^ 2 * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var_normal
  end)
  kl.register_kl(D.Beta, D.Uniform, function(p, q)
    local r = -p:entropy() + (q.high - q.low):log()
    return inf_where(q.low:gt(0):logical_or(q.high:lt(1)), r)
  end)
  kl.register_kl(D.Exponential, D.Gamma, function(p, q)
    local ratio = q.rate / p.rate
    local t1 = -q.concentration * ratio:log()
    return t1 + ratio + q.concentration:lgamma() + q.concentration * EULER - (1 + EULER)
  end)
  kl.register_kl(D.Exponential, D.Gumbel, function(p, q)
    local prod = p.rate * q.scale
    local lsr = q.loc / q.scale
    local t1 = prod:log() - 1
    local t2 = lsr:exp() * prod / (prod + 1)
    local t3 = prod:reciprocal()
    return t1 - lsr + t2 + t3
  end)
  kl.register_kl(D.Exponential, D.Normal, function(p, q)
    local var_normal = q.scale ^ 2
    local rate_sqr = p.rate ^ 2
    local t1 = (rate_sqr * var_normal * (2 * math.pi)):log() * 0.5
    local t2 = rate_sqr:reciprocal()
    local t3 = q.loc / p.rate
    local t4 = q.loc ^ 2 * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal
  end)
  kl.register_kl(D.Gamma, D.Exponential, function(p, q)
    return -p:entropy() - q.rate:log() + q.rate * p.concentration / p.rate
  end)
  kl.register_kl(D.Gamma, D.Gumbel, function(p, q)
    local a = p.concentration
    local prod = p.rate * q.scale
    local lsr = q.loc / q.scale
    local t1 = (a - 1) * a:digamma() - a:lgamma() - a
    local t2 = prod:log() + a / prod
    local t3 = lsr:exp() * (prod:reciprocal() + 1):pow(-a) - lsr
    return t1 + t2 + t3
  end)
  kl.register_kl(D.Gamma, D.Normal, function(p, q)
    local a = p.concentration
    local var_normal = q.scale ^ 2
    local beta_sqr = p.rate ^ 2
    local t1 = (beta_sqr * var_normal * (2 * math.pi)):log() * 0.5 - a - a:lgamma()
    local t2 = (a ^ 2 + a) * 0.5 / beta_sqr
    local t3 = q.loc * a / p.rate
    local t4 = q.loc ^ 2 * 0.5
    return t1 + (a - 1) * a:digamma() + (t2 - t3 + t4) / var_normal
  end)
  kl.register_kl(D.Gumbel, D.Normal, function(p, q)
    local ratio = p.scale / q.scale
    local t1 = (ratio / math.sqrt(2 * math.pi)):log()
    local t2 = (ratio * (math.pi * 0.5)) ^ 2 / 3
    local t3 = ((p.loc + p.scale * EULER - q.loc) / q.scale) ^ 2 * 0.5
    return -t1 + t2 + t3 - (EULER + 1)
  end)
  kl.register_kl(D.Laplace, D.Normal, function(p, q)
    local var_normal = q.scale ^ 2
    local r = p.scale ^ 2 / var_normal
    local t1 = (r * (2 / math.pi)):log() * 0.5
    local t2 = p.loc ^ 2 * 0.5
    local t3 = p.loc * q.loc
    local t4 = q.loc ^ 2 * 0.5
    return -t1 + r + (t2 - t3 + t4) / var_normal - 1
  end)
  kl.register_kl(D.Normal, D.Gumbel, function(p, q)
    local msr = p.loc / q.scale
    local vsr = (p.scale / q.scale) ^ 2
    local lsr = q.loc / q.scale
    local t1 = vsr:log() * 0.5
    local t2 = msr - lsr
    local t3 = (-msr + vsr * 0.5 + lsr):exp()
    return -t1 + t2 + t3 - 0.5 * (1 + LOG_2PI)
  end)
  kl.register_kl(D.Normal, D.Laplace, function(p, q)
    local d = p.loc - q.loc
    local scale_ratio = p.scale / q.scale
    local dr = d / p.scale
    local t1 = scale_ratio:log()
    local t2 = p.scale * (dr ^ 2 * -0.5):exp() * math.sqrt(2 / math.pi)
    local t3 = d * (dr * math.sqrt(0.5)):erf()
    return -t1 + (t2 + t3) / q.scale - 0.5 * (1 + math.log(0.5 * math.pi))
  end)
  kl.register_kl(D.Uniform, D.Beta, function(p, q)
    local w = p.high - p.low
    local t1 = w:log()
    local t2 = (q.concentration1 - 1) * (x_log_x(p.high) - x_log_x(p.low) - w) / w
    local t3 = (q.concentration0 - 1) * (x_log_x(-p.high + 1) - x_log_x(-p.low + 1) + w) / w
    local t4 = q.concentration1:lgamma() + q.concentration0:lgamma() - (q.concentration1 + q.concentration0):lgamma()
    return inf_where(p.high:gt(1):logical_or(p.low:lt(0)), t3 + t4 - t1 - t2)
  end)
  kl.register_kl(D.Uniform, D.Exponential, function(p, q)
    local r = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate):log()
    return inf_where(p.low:lt(0), r)
  end)
  kl.register_kl(D.Uniform, D.Gamma, function(p, q)
    local w = p.high - p.low
    local t1 = w:log()
    local t2 = q.concentration:lgamma() - q.concentration * q.rate:log()
    local t3 = (-q.concentration + 1) * (x_log_x(p.high) - x_log_x(p.low) - w) / w
    local t4 = q.rate * (p.high + p.low) / 2
    return inf_where(p.low:lt(0), -t1 + t2 + t3 + t4)
  end)
  kl.register_kl(D.Uniform, D.Gumbel, function(p, q)
    local c = q.scale / (p.high - p.low)
    local hd = (p.high - q.loc) / q.scale
    local ld = (p.low - q.loc) / q.scale
    local t1 = c:log() + (hd + ld) * 0.5
    local t2 = c * ((-hd):exp() - (-ld):exp())
    return t1 - t2
  end)
  kl.register_kl(D.Geometric, D.Geometric, function(p, q)
    return -p:entropy() - (-q.probs):log1p() / p.probs - q.logits
  end)
  kl.register_kl(D.HalfNormal, D.HalfNormal, function(p, q) return kl.kl_divergence(p.base_dist, q.base_dist) end)
  kl.register_kl(D.HalfCauchy, D.HalfCauchy, function(p, q) return kl.kl_divergence(p.base_dist, q.base_dist) end)
  kl.register_kl(D.Pareto, D.Pareto, function(p, q)
    local scale_ratio, alpha_ratio = p.scale / q.scale, q.alpha / p.alpha
    local r = q.alpha * scale_ratio:log() - alpha_ratio:log() + alpha_ratio - 1
    return inf_where(p.scale:lt(q.scale), r)
  end)
  kl.register_kl(D.Pareto, D.Exponential, function(p, q)
    local prod = p.scale * q.rate
    local r = (p.alpha / prod):log() - p.alpha:reciprocal() + p.alpha * prod / (p.alpha - 1) - 1
    return inf_where(p.alpha:le(1), r)
  end)
  kl.register_kl(D.Pareto, D.Gamma, function(p, q)
    local common = p.scale:log() + p.alpha:reciprocal()
    local t1 = p.alpha:log() - common
    local t2 = q.concentration:lgamma() - q.concentration * q.rate:log()
    local t3 = (-q.concentration + 1) * common
    local t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return inf_where(p.alpha:le(1), t1 + t2 + t3 + t4 - 1)
  end)
  kl.register_kl(D.Pareto, D.Normal, function(p, q)
    local var_normal = q.scale ^ 2 * 2
    local common = p.scale / (p.alpha - 1)
    local t1 = (q.scale * p.alpha / p.scale * math.sqrt(2 * math.pi)):log()
    local t2 = p.alpha:reciprocal()
    local t3 = p.alpha * common ^ 2 / (p.alpha - 2)
    local t4 = (p.alpha * common - q.loc) ^ 2
    return inf_where(p.alpha:le(2), t1 - t2 + (t3 + t4) / var_normal - 1)
  end)
  kl.register_kl(D.Uniform, D.Pareto, function(p, q)
    local w = p.high - p.low
    local t1 = (q.alpha * q.scale:pow(q.alpha) * w):log()
    local t2 = (x_log_x(p.high) - x_log_x(p.low) - w) / w
    return inf_where(p.low:lt(q.scale), t2 * (q.alpha + 1) - t1)
  end)
  for _, pn in ipairs { "Beta", "Exponential", "Gamma", "Gumbel", "Laplace", "Normal" } do
    kl.register_kl(D[pn], D.Pareto, function(p) return inf_like(p[D[pn]._param_names[1]]) end)
  end
  for _, qn in ipairs { "Beta", "Uniform" } do
    kl.register_kl(D.Pareto, D[qn], function(p) return inf_like(p.scale) end)
  end
  -- ContinuousBernoulli's pairs; the two with a Uniform keep torch's
  -- comparisons (inf where the Uniform's support merely touches [0, 1])
  local function into_cb(p, q) return -p:entropy() - p.mean * q.logits - (-q.probs):log1p() - q:_log_norm() end
  kl.register_kl(D.ContinuousBernoulli, D.ContinuousBernoulli, function(p, q)
    return p.mean * (p.logits - q.logits) + p:_log_norm() + (-p.probs):log1p() - q:_log_norm() - (-q.probs):log1p()
  end)
  kl.register_kl(D.Beta, D.ContinuousBernoulli, into_cb)
  kl.register_kl(D.Uniform, D.ContinuousBernoulli, function(p, q)
    return inf_where(p.high:ge(1):logical_or(p.low:le(0)), into_cb(p, q))
  end)
  kl.register_kl(D.ContinuousBernoulli, D.Exponential, function(p, q)
    return -p:entropy() - q.rate:log() + q.rate * p.mean
  end)
  kl.register_kl(D.ContinuousBernoulli, D.Normal, function(p, q)
    local t2 = ((q.loc / q.scale) ^ 2 + LOG_2PI) * 0.5 + q.scale:log()
    local t3 = (p.variance + p.mean ^ 2 - q.loc * p.mean * 2) / (q.scale ^ 2 * 2)
    return -p:entropy() + t2 + t3
  end)
  kl.register_kl(D.ContinuousBernoulli, D.Uniform, function(p, q)
    return inf_where(q.low:ge(0):logical_or(q.high:le(1)), -p:entropy() + (q.high - q.low):log())
  end)
  kl.register_kl(D.ContinuousBernoulli, D.Pareto, function(p) return inf_like(p.probs) end)
  for _, pn in ipairs { "Exponential", "Gamma", "Gumbel", "Laplace", "Normal", "Pareto" } do
    kl.register_kl(D[pn], D.ContinuousBernoulli, function(p) return inf_like(p[D[pn]._param_names[1]]) end)
  end
  kl.register_kl(D.TransformedDistribution, D.TransformedDistribution, function(p, q)
    local same = #p.transforms == #q.transforms
    local plain = { ExpTransform = true, SigmoidTransform = true, TanhTransform = true }
    for i = 1, #p.transforms do
      local a, b = p.transforms[i], q.transforms[i]
      same = same and (rawequal(a, b) or (a.name == b.name and plain[a.name] == true))
    end
    if not same then
      errors.raise("distributions.kl_divergence: TransformedDistributions with different transforms (torch's neither; "
        .. "parameterized transforms must be the same objects)")
    end
    return kl.kl_divergence(p.base_dist, q.base_dist)
  end)
  kl.register_kl(D.Uniform, D.Normal, function(p, q)
    local w = p.high - p.low
    local t1 = (q.scale * math.sqrt(math.pi * 2) / w):log()
    local t2 = w ^ 2 / 12
    local t3 = ((p.high + p.low - q.loc * 2) / 2) ^ 2
    return t1 + (t2 + t3) * 0.5 / q.scale ^ 2
  end)
end

return kl
