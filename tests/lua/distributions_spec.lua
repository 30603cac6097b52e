-- ember.distributions against torch.distributions (PyTorch 1.13): values and
-- gradients from tests/fixtures/distributions.lua (tests/gen_distributions.py),
-- rsample's pathwise gradient by a float64 gradcheck under a fixed seed,
-- samples checked statistically (ember's generator is not torch's), and the
-- validation errors.
local ember = require "ember"
local D = require "ember.distributions"
local parity = require "tests.lua.helpers.parity"
local gradcheck = require "tests.lua.helpers.gradcheck"
local fx = require "tests.fixtures.distributions"

local T, check, raises_here = parity.T, parity.check, parity.raises_here
local f64 = { dtype = "float64" }

local NOGRAD = { total_count = true }

-- the case's parameters as float64 leaves (requiring grad where torch's did)
local function leaves(params)
  local out = {}
  for k, spec in pairs(params) do
    if type(spec) == "number" then -- Multinomial's integer total_count
      out[k] = math.tointeger(spec) or spec
    else
      local t = T(spec)
      if not NOGRAD[k] then t:requires_grad_() end
      out[k] = t
    end
  end
  return out
end

-- check() where want may hold inf and nan: those must be the same in got,
-- the finite rest within tol
local function check_special(what, got, want, tol)
  assert.are.same(want.shape, got.shape, what .. " shape")
  local g, w = parity.values(got), parity.values(want)
  local finite = {}
  for i = 1, #w do
    if w[i] ~= w[i] then
      assert(g[i] ~= g[i], ("%s[%d]: %s, want nan"):format(what, i, g[i]))
    elseif w[i] == math.huge or w[i] == -math.huge then
      assert.are.equal(w[i], g[i], ("%s[%d]"):format(what, i))
    else
      finite[#finite + 1] = i
    end
  end
  local scale = 0
  for _, i in ipairs(finite) do scale = math.max(scale, math.abs(w[i])) end
  for _, i in ipairs(finite) do
    assert(math.abs(g[i] - w[i]) <= tol * math.max(scale, 1e-300),
      ("%s[%d]: %.17g, want %.17g"):format(what, i, g[i], w[i]))
  end
end

-- out against want.value, then the gradients of sum(out * R) against
-- want.grads (a parameter that got no gradient: torch's must be zero)
local function check_with_grads(what, ps, out, want)
  check_special(what, out, T(want.value), 1e-12)
  for _, p in pairs(ps) do if ember.is_tensor(p) then p.grad = nil end end
  if next(want.grads) == nil then return end -- torch's is a constant
  local R = T(want.R);
  (out * R):sum():backward()
  for k, g in pairs(want.grads) do
    local got = ps[k].grad
    if got == nil then
      assert(T(g):abs():max():item() == 0, what .. ": no gradient for " .. k .. ", torch's is not zero")
    else
      check_special(what .. " d/d" .. k, got, T(g), 1e-10)
    end
  end
end

describe("distributions against torch.distributions", function()
  for _, c in ipairs(fx.cases) do
    describe(c.name, function()
      local function make()
        local ps = leaves(c.params)
        local opts = {}
        for k, v in pairs(ps) do opts[k] = v end
        return D[c.dist](opts), ps
      end
      local value = T(c.value)

      it("shapes", function()
        local d = make()
        assert.are.same(c.batch_shape, { table.unpack(d.batch_shape) })
        assert.are.same(c.event_shape, { table.unpack(d.event_shape) })
      end)

      it("log_prob and its gradients", function()
        local d, ps = make()
        check_with_grads("log_prob", ps, d:log_prob(value), c.log_prob)
      end)

      if c.entropy then
        it("entropy and its gradients", function()
          local d, ps = make()
          check_with_grads("entropy", ps, d:entropy(), c.entropy)
        end)
      end

      if c.mean then
        it("mean, variance, stddev", function()
          local d = make()
          check_special("mean", d.mean, T(c.mean), 1e-12)
          check_special("variance", d.variance, T(c.variance), 1e-12)
          check_special("stddev", d.stddev, T(c.stddev), 1e-12)
        end)
      end

      if c.cdf then
        it("cdf, icdf and their gradients", function()
          local d, ps = make()
          check_with_grads("cdf", ps, d:cdf(value), c.cdf)
          d, ps = make()
          check_with_grads("icdf", ps, d:icdf(T(c.icdf_value)), c.icdf)
        end)
      end
    end)
  end

  it("in float32: float32 results within 1e-5 of torch's float64 ones", function()
    for _, c in ipairs(fx.cases) do
      local opts = {}
      for k, spec in pairs(c.params) do opts[k] = type(spec) == "number" and math.tointeger(spec) or T(spec, "float32"):float() end
      local d = D[c.dist](opts)
      local v = T(c.value)
      if v.dtype == "float64" then v = v:float() end
      local checks = { { "log_prob", d:log_prob(v), c.log_prob.value } }
      if c.entropy then checks[#checks + 1] = { "entropy", d:entropy(), c.entropy.value } end
      if c.cdf then checks[#checks + 1] = { "cdf", d:cdf(v), c.cdf.value } end
      for _, ch in ipairs(checks) do
        assert.are.equal("float32", ch[2].dtype, c.name .. " " .. ch[1] .. " dtype")
        check_special(c.name .. " " .. ch[1] .. " (float32)", ch[2], T(ch[3]), 1e-5)
      end
      assert.are.equal("float32", d:sample({ 2 }).dtype == "int64" and "float32" or d:sample({ 2 }).dtype, c.name .. " sample dtype")
    end
  end)

  it("Independent(Normal, 1): log_prob, entropy, kl", function()
    local c = fx.independent
    local ps = leaves(c.params)
    local d = D.Independent(D.Normal(ps.loc, ps.scale), 1)
    assert.are.same({ 2 }, { table.unpack(d.batch_shape) })
    assert.are.same({ 3 }, { table.unpack(d.event_shape) })
    check_with_grads("log_prob", ps, d:log_prob(T(c.value)), c.log_prob)
    d = D.Independent(D.Normal(ps.loc, ps.scale), 1)
    check_with_grads("entropy", ps, d:entropy(), c.entropy)
    local q = D.Independent(D.Normal(T(c.q.loc), T(c.q.scale)), 1)
    check("kl", D.kl_divergence(d, q), T(c.kl), 1e-12)
  end)
end)

describe("TransformedDistribution of a Normal against torch's", function()
  local TR = D.transforms
  for _, c in ipairs(fx.transformed) do
    it(c.name, function()
      local function make()
        local ps = leaves(c.params)
        local ts = {}
        for i, sp in ipairs(c.transforms) do
          if sp.name == "AffineTransform" then
            ts[i] = TR.AffineTransform(type(sp.loc) == "table" and T(sp.loc) or sp.loc, type(sp.scale) == "table" and T(sp.scale) or sp.scale)
          elseif sp.name == "PowerTransform" then
            ts[i] = TR.PowerTransform(sp.exponent)
          else
            ts[i] = TR[sp.name]()
          end
        end
        return D.TransformedDistribution(D.Normal(ps.loc, ps.scale), ts), ps
      end
      local d, ps = make()
      check_with_grads("log_prob", ps, d:log_prob(T(c.value)), c.log_prob)
      if c.cdf then
        d, ps = make()
        check_with_grads("cdf", ps, d:cdf(T(c.value)), c.cdf)
        d, ps = make()
        check_with_grads("icdf", ps, d:icdf(T(c.icdf_value)), c.icdf)
      end
    end)
  end

  it("rsample's gradient (gradcheck) and samples: a tanh-squashed Normal's quantiles", function()
    gradcheck.check(function(m, s)
      ember.manual_seed(5)
      return D.TransformedDistribution(D.Normal(m, s), { TR.TanhTransform() }):rsample({ 3 })
    end, { ember.tensor({ 0.2, -0.5 }, f64), ember.tensor({ 0.7, 1.3 }, f64) })
    local d = D.TransformedDistribution(D.Normal(ember.tensor(0.3, f64), ember.tensor(0.8, f64)), { TR.TanhTransform(), TR.AffineTransform(1.0, 2.0) })
    ember.manual_seed(6)
    local n = 40000
    local x = d:sample({ n })
    for _, q in ipairs { 0.1, 0.5, 0.9 } do
      local frac = x:le(d:icdf(ember.tensor(q, f64))):double():mean():item()
      assert(math.abs(frac - q) <= 6 * math.sqrt(q * (1 - q) / n), ("P(X <= icdf(%g)) = %g"):format(q, frac))
    end
    assert.is_false(D.TransformedDistribution(D.Bernoulli(0.5), { TR.ExpTransform() }).has_rsample)
    raises_here(function() D.TransformedDistribution(D.Normal(0.0, 1.0), { 3 }) end, "transforms[1] is not a transform")
    raises_here(function() D.TransformedDistribution(D.Normal(0.0, 1.0), { TR.ExpTransform() }):log_prob(ember.tensor(-1.0)) end,
      "the value must be positive (> 0)")
  end)
end)

describe("MixtureSameFamily against torch's", function()
  for _, c in ipairs(fx.mixture) do
    it(c.name, function()
      local function make()
        local ps = leaves(c.params)
        local mix = ps.logits and D.Categorical{ logits = ps.logits } or D.Categorical(ps.probs)
        local comp = D.Normal(ps.loc, ps.scale)
        if c.name == "gmm_2d" then comp = D.Independent(comp, 1) end
        return D.MixtureSameFamily(mix, comp), ps
      end
      for _, what in ipairs { "log_prob", "cdf", "mean", "variance" } do
        if c[what] then
          local d, ps = make()
          local out
          if what == "log_prob" or what == "cdf" then out = d[what](d, T(c.value)) else out = d[what] end
          check_with_grads(c.name .. " " .. what, ps, out, c[what])
        end
      end
    end)
  end

  it("samples: moments of a batch of mixtures; the checks of its arguments", function()
    local mix = D.Categorical(ember.tensor({ { 0.2, 0.3, 0.5 }, { 0.6, 0.3, 0.1 } }, f64))
    local d = D.MixtureSameFamily(mix, D.Normal(ember.tensor({ { -3.0, 0.0, 2.0 }, { 1.0, 5.0, -4.0 } }, f64), ember.tensor({ { 0.5, 1.0, 0.7 }, { 1.0, 0.3, 2.0 } }, f64)))
    ember.manual_seed(21)
    local n = 40000
    local x = d:sample({ n })
    assert.are.same({ n, 2 }, { table.unpack(x.shape) })
    local xm, xv = x:mean(1), x:var(1)
    for b = 1, 2 do
      local mu, v = d.mean[b]:item(), d.variance[b]:item()
      assert(math.abs(xm[b]:item() - mu) <= 6 * math.sqrt(v / n), ("mean %d: %g vs %g"):format(b, xm[b]:item(), mu))
      assert(math.abs(xv[b]:item() - v) <= 0.05 * v, ("variance %d: %g vs %g"):format(b, xv[b]:item(), v))
    end
    raises_here(function() D.MixtureSameFamily(D.Bernoulli(0.5), D.Normal(ember.zeros(2), 1.0)) end, "mixture_distribution must be a distributions.Categorical")
    raises_here(function() D.MixtureSameFamily(D.Categorical(ember.ones(3)), D.Normal(ember.zeros(2), 1.0)) end,
      "the mixture has 3 categories but component_distribution's last batch dim is 2")
  end)
end)

describe("kl_divergence against torch's", function()
  for _, c in ipairs(fx.kl) do
    it(c.dist .. " || " .. c.q_dist, function()
      local ps = {}
      local po, qo = {}, {}
      for k, spec in pairs(c.p) do
        local t = T(spec)
        if not NOGRAD[k] then t:requires_grad_() end
        ps["p_" .. k], po[k] = t, t
      end
      for k, spec in pairs(c.q) do
        local t = T(spec)
        if not NOGRAD[k] then t:requires_grad_() end
        ps["q_" .. k], qo[k] = t, t
      end
      check_with_grads("kl", ps, D.kl_divergence(D[c.dist](po), D[c.q_dist](qo)), c.kl)
    end)
  end

  it("is inf where torch's is (supports not nested, zero probability in q)", function()
    local U = D.Uniform(ember.tensor({ 0, 0 }, f64), ember.tensor({ 1, 3 }, f64))
    local V = D.Uniform(ember.tensor({ 0.5, -1 }, f64), ember.tensor({ 2, 4 }, f64))
    check_special("uniform", D.kl_divergence(U, V), T(fx.kl_inf.uniform), 1e-15)
    local p = D.Categorical(ember.tensor({ 0.5, 0.5, 0 }, f64))
    local q = D.Categorical(ember.tensor({ { 0.5, 0, 0.5 }, { 0.2, 0.3, 0.5 } }, f64))
    local k = D.kl_divergence(p, q)
    assert.are.same(parity.values(T(fx.kl_inf.categorical)), parity.values(k))
    local b = D.kl_divergence(D.Bernoulli(ember.tensor({ 0, 1, 0.5 }, f64)), D.Bernoulli(ember.tensor({ 0.5, 0.5, 0 }, f64)))
    assert.are.same(parity.values(T(fx.kl_inf.bernoulli)), parity.values(b))
  end)

  it("TransformedDistributions with the same transforms: the bases' KL (LogNormal's)", function()
    local TR = D.transforms
    local p = D.TransformedDistribution(D.Normal(ember.tensor({ 0.3, -1.0 }, f64), ember.tensor({ 1.0, 0.5 }, f64)), { TR.ExpTransform() })
    local q = D.TransformedDistribution(D.Normal(ember.tensor({ 0.0, 0.5 }, f64), ember.tensor({ 2.0, 0.7 }, f64)), { TR.ExpTransform() })
    local want = D.kl_divergence(D.LogNormal(p.base_dist.loc, p.base_dist.scale), D.LogNormal(q.base_dist.loc, q.base_dist.scale))
    assert.are.same(parity.values(want), parity.values(D.kl_divergence(p, q)))
    local r = D.TransformedDistribution(D.Normal(0.0, 1.0), { TR.AffineTransform(0.0, 2.0) })
    local t = D.TransformedDistribution(D.Normal(0.0, 1.0), { TR.AffineTransform(0.0, 2.0) })
    raises_here(function() D.kl_divergence(r, t) end, "TransformedDistributions with different transforms")
  end)

  it("refuses KL(Binomial || Binomial) with fewer trials in p than in q (no closed form; torch refuses it too)", function()
    raises_here(function() D.kl_divergence(D.Binomial(2, ember.tensor(0.3, f64)), D.Binomial(5, ember.tensor(0.4, f64))) end,
      "where p's total_count < q's has no closed form: refused")
  end)

  it("refuses a pair it does not know, naming both", function()
    raises_here(function() D.kl_divergence(D.Normal(0.0, 1.0), D.Cauchy(0.0, 1.0)) end,
      "no KL(Normal || Cauchy) registered (for p a Normal: q a Beta, ContinuousBernoulli, Exponential, Gamma, Gumbel, Laplace, Normal, Pareto, Uniform)")
    raises_here(function() D.kl_divergence(D.Normal(0.0, 1.0), 3) end, "expected two distributions")
  end)
end)

describe("rsample's pathwise gradient (float64 gradcheck, fixed seed)", function()
  local function pos(...) return ember.tensor({ ... }, f64) end
  local cases = {
    { "Normal", { pos(0.3, -1.0, 2.0), pos(0.5, 1.5, 2.0) } },
    { "Uniform", { pos(-1.0, 0.0, 2.0), pos(0.5, 3.0, 2.5) } },
    { "Exponential", { pos(0.5, 1.5, 3.0) } },
    { "Laplace", { pos(0.3, -1.0, 2.0), pos(0.5, 1.5, 2.0) } },
    { "LogNormal", { pos(0.3, -1.0, 0.2), pos(0.5, 0.7, 1.0) } },
    { "Gumbel", { pos(0.3, -1.0, 2.0), pos(0.5, 1.5, 2.0) } },
    { "Cauchy", { pos(0.3, -1.0, 2.0), pos(0.5, 1.5, 2.0) } },
    { "HalfNormal", { pos(0.5, 1.5, 2.0) } },
    { "HalfCauchy", { pos(0.5, 1.5, 2.0) } },
    { "Pareto", { pos(0.5, 1.5, 2.0), pos(1.5, 2.5, 4.0) } },
    { "Weibull", { pos(0.5, 1.5, 2.0), pos(0.8, 1.5, 3.0) } },
    { "ContinuousBernoulli", { pos(0.2, 0.45, 0.9) } },
    { "Kumaraswamy", { pos(0.5, 1.5, 3.0), pos(0.8, 2.0, 1.2) } },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      gradcheck.check(function(...)
        ember.manual_seed(7)
        return D[c[1]](...):rsample({ 4 }):tanh()
      end, c[2])
    end)
  end

  it("RelaxedBernoulli and RelaxedOneHotCategorical", function()
    gradcheck.check(function(t, l)
      ember.manual_seed(7)
      return D.RelaxedBernoulli(t, { logits = l }):rsample({ 3 })
    end, { ember.tensor({ 0.5, 1.5 }, f64), ember.tensor({ 0.3, -1.0 }, f64) })
    gradcheck.check(function(t, l)
      ember.manual_seed(7)
      return D.RelaxedOneHotCategorical(t, { logits = l }):rsample({ 3 })
    end, { ember.tensor(0.8, f64), ember.tensor({ { 0.3, -1.0, 0.5 }, { 1.0, 0.0, -0.5 } }, f64) })
  end)

  it("LowRankMultivariateNormal", function()
    gradcheck.check(function(m, w, d)
      ember.manual_seed(7)
      return D.LowRankMultivariateNormal(m, w, d):rsample({ 4 }):tanh()
    end, { pos(0.3, -1.0, 2.0), ember.tensor({ { 1.0, 0.2 }, { 0.5, -0.3 }, { 0.0, 1.0 } }, f64), pos(1.0, 2.0, 0.5) })
  end)

  it("MultivariateNormal", function()
    local loc = pos(0.3, -1.0, 2.0)
    local L = ember.tensor({ { 1.0, 0, 0 }, { 0.3, 0.8, 0 }, { -0.5, 0.2, 1.3 } }, f64)
    gradcheck.check(function(m, l)
      ember.manual_seed(7)
      -- the lower triangle only: the constraint is checked on l itself
      return D.MultivariateNormal(m, { scale_tril = l:tril() }):rsample({ 4 }):tanh()
    end, { loc, L })
  end)

  it("is reproducible after manual_seed and differs without", function()
    local d = D.Normal(ember.zeros(5, f64), ember.ones(5, f64))
    ember.manual_seed(3); local a = d:sample({ 2 })
    ember.manual_seed(3); local b = d:sample({ 2 })
    assert.are.same(parity.values(a), parity.values(b))
    assert.are_not.same(parity.values(a), parity.values(d:sample({ 2 })))
  end)

  it("sample() has no gradient, rsample() has; no rsample where torch's is absent", function()
    local mu = ember.zeros(3, f64):requires_grad_()
    assert.is_false(D.Normal(mu, 1.0):sample().requires_grad)
    assert.is_true(D.Normal(mu, 1.0):rsample().requires_grad)
    -- Gamma, Beta, Dirichlet, StudentT, FisherSnedecor have one (linalg_distributions_parity_spec.lua)
    for _, d in ipairs { D.Bernoulli(0.5), D.Categorical(ember.ones(3)), D.Poisson(1.0), D.Geometric(0.5) } do
      assert.is_false(d.has_rsample)
      raises_here(function() d:rsample() end, "rsample is not available")
      raises_here(function() D.Poisson(2.0):entropy() end,
        "distributions.Poisson: has no entropy() (torch.distributions has none for it either)")
    end
  end)
end)

-- samples: statistics with tolerances of many standard errors (N draws)
describe("samples follow the distribution", function()
  local N = 40000
  local function close(what, got, want, se)
    assert(math.abs(got - want) <= 6 * se, ("%s: %.6g, want %.6g (6 standard errors: %.3g)"):format(what, got, want, 6 * se))
  end

  -- the empirical cdf at the quartiles of the distribution
  local continuous = {
    D.Normal(1.5, 2.0), D.Uniform(-1.0, 3.0), D.Exponential(2.5), D.Laplace(-1.0, 0.5), D.LogNormal(0.2, 0.6),
    D.Gumbel(1.0, 2.0), D.Cauchy(0.5, 1.5), D.HalfNormal(1.5), D.HalfCauchy(0.7),
    D.Pareto(1.5, 2.5), D.Weibull(2.0, 0.8),
    D.ContinuousBernoulli(0.3), D.ContinuousBernoulli(0.9),
    D.Kumaraswamy(2.0, 0.7),
  }
  for _, d in ipairs(continuous) do
    it(d.__name .. ": the empirical cdf at its quartiles", function()
      d = d:expand({}) -- the float32 parameters as float64
      ember.manual_seed(11)
      local x = d:sample({ N }):double()
      for _, q in ipairs { 0.1, 0.25, 0.5, 0.75, 0.9 } do
        local at = d:icdf(ember.tensor(q)):double()
        local frac = x:le(at):double():mean():item()
        close(("%s P(X <= icdf(%g))"):format(d.__name, q), frac, q, math.sqrt(q * (1 - q) / N))
      end
    end)
  end

  local moments = {
    { D.Gamma(ember.tensor({ 0.4, 1.0, 3.5 }, f64), ember.tensor({ 1.0, 2.0, 0.5 }, f64)) },
    { D.Beta(ember.tensor({ 0.5, 2.0, 5.0 }, f64), ember.tensor({ 0.7, 3.0, 1.0 }, f64)) },
    { D.Dirichlet(ember.tensor({ { 0.5, 2.0, 5.0 }, { 1.0, 1.0, 0.3 } }, f64)) },
    { D.Poisson(ember.tensor({ 0.3, 4.0, 25.0 }, f64)) },
    { D.Binomial(ember.tensor({ 3, 10, 1 }, f64), ember.tensor({ 0.2, 0.5, 0.9 }, f64)) },
    { D.Bernoulli(ember.tensor({ 0.1, 0.5, 0.8 }, f64)) },
    { D.Geometric(ember.tensor({ 0.2, 0.5, 0.9 }, f64)) },
    { D.Chi2(ember.tensor({ 0.7, 3.0, 8.0 }, f64)) },
    { D.FisherSnedecor(ember.tensor({ 3.0, 10.0 }, f64), ember.tensor({ 12.0, 20.0 }, f64)) },
    { D.LowRankMultivariateNormal(ember.tensor({ 1.0, -2.0, 0.5 }, f64), ember.tensor({ { 1.0, 0.2 }, { 0.5, -0.3 }, { 0.0, 1.0 } }, f64), ember.tensor({ 1.0, 2.0, 0.5 }, f64)) },
    { D.NegativeBinomial(ember.tensor({ 0.5, 3.0, 10.0 }, f64), ember.tensor({ 0.3, 0.6, 0.2 }, f64)) },
    { D.Multinomial(6, ember.tensor({ { 0.2, 0.3, 0.5 }, { 0.7, 0.2, 0.1 } }, f64)) },
    { D.StudentT(ember.tensor({ 5.0, 9.0 }, f64), ember.tensor({ 1.0, -2.0 }, f64), ember.tensor({ 0.5, 2.0 }, f64)) },
    { D.MultivariateNormal(ember.tensor({ 1.0, -2.0, 0.5 }, f64), { scale_tril = ember.tensor({ { 1.0, 0, 0 }, { 0.5, 2.0, 0 }, { -1.0, 0.3, 0.7 } }, f64) }) },
  }
  for _, m in ipairs(moments) do
    local d = m[1]
    it(d.__name .. ": mean and variance", function()
      ember.manual_seed(12)
      local x = d:sample({ N }):double()
      local mean, var = d.mean, d.variance
      local xm = x:mean(1)
      local xv = ((x - xm) ^ 2):mean(1)
      local m4 = ((x - xm) ^ 4):mean(1)
      for i = 1, mean:numel() do
        local mu, v = mean:reshape(-1)[i]:item(), var:reshape(-1)[i]:item()
        close(d.__name .. " mean " .. i, xm:reshape(-1)[i]:item(), mu, math.sqrt(v / N))
        local v4 = m4:reshape(-1)[i]:item()
        close(d.__name .. " variance " .. i, xv:reshape(-1)[i]:item(), v, math.sqrt(math.max(v4 - v * v, 1e-12) / N))
      end
    end)
  end

  it("relaxed samples: RelaxedBernoulli exceeds 0.5 with probability probs, RelaxedOneHotCategorical's argmax is Categorical(probs)", function()
    local p = ember.tensor({ 0.2, 0.5, 0.85 }, f64)
    ember.manual_seed(14)
    local x = D.RelaxedBernoulli(ember.tensor(0.4, f64), p):sample({ N })
    for i = 1, 3 do
      local pi = p[i]:item()
      close("P(X > 0.5) " .. i, x:select(2, i):gt(0.5):double():mean():item(), pi, math.sqrt(pi * (1 - pi) / N))
    end
    local probs = ember.tensor({ 0.1, 0.2, 0.7 }, f64)
    local y = D.RelaxedOneHotCategorical(ember.tensor(2.0, f64), probs):sample({ N })
    local top = y:argmax(-1)
    for k = 1, 3 do
      local pk = probs[k]:item()
      close("P(argmax = " .. k .. ")", top:eq(k):double():mean():item(), pk, math.sqrt(pk * (1 - pk) / N))
    end
    close("rows sum to 1", y:sum(-1):mean():item(), 1, 1e-15)
    -- the temperature: P(X <= x) = sigmoid(T logit(x) - logits) for a RelaxedBernoulli and
    -- for the first coordinate of a two-category RelaxedOneHotCategorical (logits l1 - l2)
    local function sig(z) return 1 / (1 + math.exp(-z)) end
    local T = 0.4
    for _, at in ipairs { 0.2, 0.7 } do
      local want = sig(T * math.log(at / (1 - at)) - math.log(0.2 / 0.8))
      close("RelaxedBernoulli P(X <= " .. at .. ")", x:select(2, 1):le(at):double():mean():item(), want, math.sqrt(want * (1 - want) / N))
    end
    local z = D.RelaxedOneHotCategorical(ember.tensor(0.3, f64), { logits = ember.tensor({ 0.4, -0.2 }, f64) }):sample({ N })
    for _, at in ipairs { 0.2, 0.7 } do
      local want = sig(0.3 * math.log(at / (1 - at)) - 0.6)
      close("RelaxedOneHotCategorical P(X1 <= " .. at .. ")", z:select(2, 1):le(at):double():mean():item(), want, math.sqrt(want * (1 - want) / N))
    end
  end)

  it("VonMises: angles in [-pi, pi), E[cos(X - loc)] = I1(k)/I0(k) = 1 - variance, E[sin(X - loc)] = 0", function()
    local d = D.VonMises(ember.tensor({ 0.5, 3.0, -2.0 }, f64), ember.tensor({ 2.0, 0.3, 8.0 }, f64))
    ember.manual_seed(15)
    local x = d:sample({ N })
    assert(x:min():item() >= -math.pi and x:max():item() < math.pi)
    local c = (x - d.loc):cos()
    local sn = (x - d.loc):sin()
    local a = -d.variance + 1
    for i = 1, 3 do
      local ci, si = c:select(2, i), sn:select(2, i)
      close("E[cos] " .. i, ci:mean():item(), a[i]:item(), math.sqrt(ci:var():item() / N))
      close("E[sin] " .. i, si:mean():item(), 0, math.sqrt(si:var():item() / N))
    end
  end)

  it("Categorical and OneHotCategorical: the frequencies of the categories (1-based), batched", function()
    local probs = ember.tensor({ { 0.1, 0.2, 0.7 }, { 0.5, 0.25, 0.25 } }, f64)
    ember.manual_seed(13)
    local x = D.Categorical(probs):sample({ N })
    assert.are.same({ N, 2 }, { table.unpack(x.shape) })
    assert.are.equal("int64", x.dtype)
    local oh = D.OneHotCategorical(probs):sample({ N })
    for b = 1, 2 do
      for k = 1, 3 do
        local p = probs[b][k]:item()
        close(("P(X = %d) of batch %d"):format(k, b), x:select(2, b):eq(k):double():mean():item(), p, math.sqrt(p * (1 - p) / N))
        close(("one-hot P(X = %d) of batch %d"):format(k, b), oh:select(2, b):select(2, k):mean():item(), p, math.sqrt(p * (1 - p) / N))
      end
    end
  end)
end)

describe("distributions' API", function()
  it("require and ember.distributions are the same table", function()
    assert.are.equal(D, ember.distributions)
  end)

  it("validates parameters at the user's line, naming the distribution", function()
    raises_here(function() D.Normal(0.0, -1.0) end, "distributions.Normal: scale must be positive (> 0), found -1")
    raises_here(function() D.Normal(0.0, ember.tensor({ 1.0, -100.0 })) end, "scale must be positive (> 0), found -100")
    raises_here(function() D.Normal(0.0, 1.0):log_prob(ember.tensor({ 0.0, 0 / 0 })) end, "the value must be real (the support), found nan")
    raises_here(function() D.Uniform(1.0, 1.0) end, "distributions.Uniform: low must be < high")
    raises_here(function() D.Bernoulli(1.5) end, "distributions.Bernoulli: probs must be in [0, 1], found 1.5")
    raises_here(function() D.Bernoulli(0.5, 0.0) end, "give either probs or logits")
    raises_here(function() D.Categorical(ember.tensor({ 0.5, -0.5 })) end, "probs must be nonnegative")
    raises_here(function() D.Gamma(0.0, 1.0) end, "distributions.Gamma: concentration must be positive")
    raises_here(function() D.Binomial(2.5, 0.5) end, "total_count must be a nonnegative integer, found 2.5")
    raises_here(function() D.Normal(ember.zeros(2), ember.ones(3)) end, "the parameters do not broadcast")
    raises_here(function() D.Normal{ loc = 0.0, scael = 1.0 } end, "unknown option 'scael'")
    raises_here(function() D.MultivariateNormal(ember.zeros(2), { covariance_matrix = ember.eye(2), scale_tril = ember.eye(2) }) end,
      "give exactly one of covariance_matrix, precision_matrix and scale_tril (got covariance_matrix, scale_tril)")
    raises_here(function() D.MultivariateNormal(ember.zeros(2), { covariance_matrix = ember.tensor({ { 1, 2 }, { 2, 1 } }) }) end,
      "covariance_matrix must be symmetric positive definite (The factorization could not be completed because the input is not positive-definite")
    raises_here(function() D.MultivariateNormal(ember.zeros(2), { precision_matrix = ember.tensor({ { 1, 0.5 }, { 0, 1 } }) }) end,
      "precision_matrix must be symmetric positive definite (it is not symmetric)")
    raises_here(function() D.MultivariateNormal(ember.zeros(2), { scale_tril = ember.tensor({ { 1, 1 }, { 0, 1 } }) }) end,
      "scale_tril must be lower triangular with a positive diagonal")
  end)

  it("validates values: support, event shape, broadcasting", function()
    raises_here(function() D.Exponential(1.0):log_prob(ember.tensor(-1.0)) end, "distributions.Exponential: log_prob: the value must be nonnegative (>= 0) (the support), found -1")
    raises_here(function() D.Bernoulli(0.5):log_prob(ember.tensor(0.5)) end, "the value must be 0 or 1")
    raises_here(function() D.Categorical(ember.ones(3)):log_prob(ember.tensor(4, { dtype = "int64" })) end, "a category in 1..3")
    raises_here(function() D.Poisson(1.0):log_prob(ember.tensor(1.5)) end, "a nonnegative integer")
    raises_here(function() D.Normal(ember.zeros(3), 1.0):log_prob(ember.zeros(2)) end, "does not broadcast with the batch shape [3]")
    raises_here(function() D.MultivariateNormal(ember.zeros(3), { scale_tril = ember.eye(3) }):log_prob(ember.zeros(2)) end,
      "does not end with the event shape [3]")
    raises_here(function() D.Normal(0.0, 1.0):icdf(ember.tensor(1.5)) end, "icdf: the value must be in [0, 1]")
    -- off: no check (torch's validate_args=False)
    assert.are.equal(-math.huge, D.Exponential(1.0, { validate_args = false }):log_prob(ember.tensor(-1.0)):item() * 0 - math.huge)
    local lp = D.Bernoulli(0.5, { validate_args = false }):log_prob(ember.tensor(0.5)):item()
    assert.is_true(math.abs(lp - math.log(0.5)) < 1e-6)
  end)

  it("enumerate_support: the probabilities over it sum to one; printing names the given parameters", function()
    local probs = ember.tensor({ { 0.2, 0.3, 0.5 }, { 0.6, 0.3, 0.1 } }, f64)
    for _, d in ipairs { D.Binomial(4, ember.tensor({ 0.3, 0.6 }, f64)), D.Bernoulli(ember.tensor({ 0.3, 0.6 }, f64)),
                         D.Categorical(probs), D.OneHotCategorical(probs) } do
      local s = d:enumerate_support()
      local n = s.shape[1]
      assert.are.same({ n, 2 }, { table.unpack(s.shape, 1, 2) })
      local total = d:log_prob(s):exp():sum(1)
      assert((total - 1):abs():max():item() < 1e-12, d.__name .. ": " .. tostring(total))
      assert.are.same({ n, 1 }, { table.unpack(d:enumerate_support(false).shape, 1, 2) })
    end
    assert.are.equal("distributions.Bernoulli(logits: [2])", tostring(D.Bernoulli{ logits = ember.zeros(2) }))
    assert.are.equal("distributions.Normal(loc: 0, scale: 2)", tostring(D.Normal(0.0, 2.0)))
    assert.are.equal("distributions.Categorical(probs: [2, 3])", tostring(D.Categorical(probs)))
  end)

  it("values given as numbers, tables or integer tensors are read in the parameters' dtype", function()
    local rate = ember.tensor({ 2.0, 3.0 }, f64)
    local want = parity.values(D.Poisson(rate):log_prob(ember.tensor({ 1.0, 2.0 }, f64)))
    assert.are.same(want, parity.values(D.Poisson(rate):log_prob(ember.tensor({ 1, 2 }, { dtype = "int64" }))))
    assert.are.same(want, parity.values(D.Poisson(rate):log_prob({ 1, 2 })))
    local b = D.Bernoulli(ember.tensor({ 0.3, 0.6 }, f64))
    assert.are.same(parity.values(b:log_prob(ember.tensor({ 1.0, 0.0 }, f64))), parity.values(b:log_prob(ember.tensor({ true, false }))))
    local c = D.Categorical(ember.tensor({ 0.2, 0.3, 0.5 }, f64))
    assert.are.same(parity.values(c:log_prob(ember.tensor({ 1, 3 }, { dtype = "int64" }))), parity.values(c:log_prob({ 1, 3 })))
    assert.are.equal("float64", D.Normal(ember.zeros(2, f64), 1.0):log_prob(0.5).dtype)
    raises_here(function() D.Normal(0.0, 1.0):log_prob({ "a" }) end, "the value must be a tensor, a number or a table of numbers")
  end)

  it("Categorical with masked (-inf) logits, as RL action masks: torch's entropy, log_prob and gradients, never sampled", function()
    local l = ember.tensor({ 1.0, -math.huge, 0.5 }, f64):requires_grad_()
    local d = D.Categorical{ logits = l }
    local e = d:entropy() + d:log_prob(ember.tensor(1, { dtype = "int64" }))
    e:backward()
    -- torch 1.13: tensor(0.1888...), grad [0.2600..., 0, -0.2600...]
    assert(math.abs(e:item() - 0.18877033439907276) < 1e-12, tostring(e:item()))
    assert.are.same({ 0 }, { l.grad[2]:item() })
    assert(math.abs(l.grad[1]:item() - 0.26003881269734824) < 1e-12 and math.abs(l.grad[3]:item() + 0.26003881269734824) < 1e-12, tostring(l.grad))
    assert.is_false(d:sample({ 1000 }):eq(2):any():item())
    assert.are.equal(-math.huge, d:log_prob(ember.tensor(2, { dtype = "int64" })):item())
  end)

  it("sample shapes, expand, Independent", function()
    local d = D.Normal(ember.zeros(3, f64), 1.0)
    assert.are.same({ 5, 2, 3 }, { table.unpack(d:sample({ 5, 2 }).shape) })
    assert.are.same({ 4, 3 }, { table.unpack(d:sample(4).shape) })
    local e = d:expand({ 2, 3 })
    assert.are.same({ 2, 3 }, { table.unpack(e.batch_shape) })
    assert.are.same({ 2, 3 }, { table.unpack(e:log_prob(ember.zeros(3, f64)).shape) })
    local c = D.Categorical(ember.ones(2, 4)):expand({ 3, 2 })
    assert.are.same({ 3, 2 }, { table.unpack(c:sample().shape) })
    local oh = D.OneHotCategorical(ember.ones(4)):expand({ 2 })
    assert.are.same({ 5, 2, 4 }, { table.unpack(oh:sample({ 5 }).shape) })
    raises_here(function() d:expand({ 2 }) end, "does not broadcast to [2]")
    local i = D.Independent(D.Normal(ember.zeros(2, 3), 1.0), 2)
    assert.are.same({}, { table.unpack(i.batch_shape) })
    assert.are.same({ 2, 3 }, { table.unpack(i.event_shape) })
    raises_here(function() D.Independent(D.Normal(ember.zeros(2), 1.0), 2) end, "more than the base's 1 batch dims")
  end)
end)
