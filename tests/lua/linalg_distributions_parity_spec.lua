-- ember.linalg, ember.einsum, ember.special and ember.distributions as a
-- PyTorch 1.13 user calls them. The numerics come from
-- tests/fixtures/linalg_distributions_parity.lua (tests/gen_linalg_distributions_parity_fixtures.py,
-- torch.linalg and torch.distributions in float64). rsample of Gamma and the
-- distributions drawn from it: the implicit gradient of
-- torch._standard_gamma_grad from tests/fixtures/gamma_grad_plateau.lua
-- (tests/gen_gamma_grad_plateau_fixtures.py), and the closed forms of the means'
-- gradients.
local ember = require "ember"
local D = require "ember.distributions"
local autograd = require "ember.autograd"
local parity = require "tests.lua.helpers.parity"
local fx = dofile("tests/fixtures/linalg_distributions_parity.lua")
local T = function(spec) return parity.T(spec, "float64") end
local raises_here = parity.raises_here
local L = ember.linalg

local function case(name) return parity.case(fx, name) end

-- parity.check where want may hold nan and +-inf: got must have them at the
-- same places, and the finite rest within tol
local function check_nonfinite(what, got, want, tol)
  assert.are.same(want.shape, got.shape, what .. " shape")
  got, want = got:double():reshape(-1), want:reshape(-1)
  local wn, gn = want:isnan(), got:isnan()
  assert(wn:eq(gn):all():item(), what .. ": nan at other places: got " .. tostring(got) .. ", want " .. tostring(want))
  local wi = want:isinf()
  assert(wi:eq(got:isinf()):all():item() and (want:eq(got)):logical_or(wi:logical_not()):all():item(),
    what .. ": inf at other places: got " .. tostring(got) .. ", want " .. tostring(want))
  local fin = wn:logical_or(wi):logical_not()
  if fin:any():item() then parity.check(what, got[fin], want[fin], tol) end
end

-- out and the gradients of sum(out * R) of f(inputs...) against case c
local function check_grad(c, f, tol)
  local xs = {}
  for i, x in ipairs(c.inputs) do xs[i] = T(x):requires_grad_() end
  local out = f(table.unpack(xs))
  parity.check(c.name .. " out", out, T(c.out), tol)
  ;(out * T(c.R)):sum():backward()
  for i, g in ipairs(c.grads) do parity.check(c.name .. " grad " .. i, xs[i].grad, T(g), tol) end
end

describe("linalg.norm of a 1-D input with ord given", function()
  it("is the vector norm of that ord, as torch's", function()
    local n = 0
    for _, c in ipairs(fx.cases) do
      if c.name:find("^linalg_norm_1d_") then
        parity.check(c.name, L.norm(T(c.x), c.ord), T(c.out), 1e-14)
        n = n + 1
      end
    end
    assert.are.equal(7, n)
  end)
  it("a string ord or a 0-D input is still an error naming the op", function()
    raises_here(function() L.norm(ember.ones(3), "fro") end, "matrix_norm: A must have at least 2 dimensions")
    raises_here(function() L.norm(ember.tensor(3.0), 2) end, "norm: input must be 1-D or 2-D")
    raises_here(function() L.norm(ember.ones(2, 3), "fro", 1) end, "dim must be a table of 2 dims, got a table of 1")
  end)
end)

describe("linalg.cross of inputs with different numbers of dims", function()
  it("is refused as torch's, naming both shapes (was: 'dim 3 must have size 3 in both')", function()
    raises_here(function() L.cross(ember.ones(2, 3, 3), ember.ones(3, 3)) end,
      "linalg.cross: inputs must have the same number of dimensions (as torch's), got [2, 3, 3] and [3, 3]")
    assert.are.same({ 2, 4, 3 }, L.cross(ember.randn(2, 1, 3), ember.randn(1, 4, 3)).shape)
  end)
end)

describe("linalg.cholesky_ex", function()
  it("is differentiable where the factorization succeeded, as torch's", function()
    check_grad(case("linalg_cholesky_ex"), function(a) return (L.cholesky_ex(a)) end, 1e-10)
    check_grad(case("linalg_cholesky"), function(a) return L.cholesky(a) end, 1e-10)
    check_grad(case("linalg_eigh_vals"), function(a) return L.eigvalsh(a) end, 1e-10)
  end)
  it("passes gradcheck on a symmetric input", function()
    local A = T(case("linalg_cholesky_ex").inputs[1]):requires_grad_()
    assert.is_true(autograd.gradcheck(function(a)
      local s = (a + a:transpose(-1, -2)) * 0.5
      return (L.cholesky_ex(s, { upper = true }))
    end, { A }))
  end)
end)

describe("linalg's batched values against torch's", function()
  it("solve, inv, det, slogdet, lstsq, pinv, matrix_rank, matrix_power, norms, eigvalsh, svdvals, cond, matrix_exp", function()
    local c = case("linalg_values")
    local A, S, Tm, B, R = T(c.A), T(c.S), T(c.T), T(c.B), T(c.R)
    local function chk(k, got) parity.check(k, got, T(c[k]), 1e-10) end
    chk("solve", L.solve(A, B:narrow(2, 1, 3)))
    chk("inv", L.inv(A))
    chk("det", L.det(A))
    local sign, logabs = L.slogdet(A)
    chk("slogdet_sign", sign)
    chk("slogdet_logabs", logabs)
    chk("lstsq", (L.lstsq(Tm, B)))
    chk("pinv_R", L.pinv(R))
    assert.are.same(T(c.rank_R):totable(), L.matrix_rank(R):totable())
    assert.are.same(T(c.rank_R_tol):totable(), L.matrix_rank(R, { atol = 1.0, rtol = 0.0 }):totable())
    chk("mpow_3", L.matrix_power(A, 3))
    chk("mpow_m2", L.matrix_power(A, -2))
    for o, k in pairs { fro = "fro", nuc = "nuc", [2] = "2", [-2] = "m2", [1] = "1", [-1] = "m1", [math.huge] = "inf",
      [-math.huge] = "minf" } do
      chk("mnorm_" .. k, L.matrix_norm(Tm, o))
    end
    chk("vnorm_3_dims", L.vector_norm(Tm, 3, { 1, 3 }, true))
    chk("eigvalsh", L.eigvalsh(S))
    chk("svdvals", L.svdvals(Tm))
    chk("cond", L.cond(A))
    chk("cond_fro", L.cond(A, "fro"))
    chk("matrix_exp", L.matrix_exp(A * 0.3))
    chk("multi_dot", L.multi_dot({ Tm[1], A[1], B[1]:narrow(1, 1, 3) }))
    chk("cholesky_inverse", ember.cholesky_inverse(L.cholesky(S)))
  end)
end)

-- a fixture's arguments as ember's: tensors, numbers, the keyword table last
local function build(c)
  local args = {}
  for i, a in ipairs(c.args) do args[i] = type(a) == "table" and T(a) or a end
  local kw = nil
  for k, v in pairs(c.kw) do
    kw = kw or {}
    kw[k] = T(v)
  end
  if kw then args[#args + 1] = kw end
  return D[c.ctor](table.unpack(args))
end

describe("distributions against torch.distributions", function()
  for _, c in ipairs(fx.cases) do
    if c.name:find("^dist_") then
      it(c.name, function()
        local d = build(c)
        local x = T(c.x)
        local chk = check_nonfinite
        chk(c.name .. " log_prob", d:log_prob(x), T(c.log_prob), 1e-12)
        if c.entropy then chk(c.name .. " entropy", d:entropy(), T(c.entropy), 1e-12) end
        if c.mean then chk(c.name .. " mean", d.mean, T(c.mean), 1e-12) end
        if c.variance then chk(c.name .. " variance", d.variance, T(c.variance), 1e-12) end
        if c.mode then
          local want = T(c.mode)
          if c.ctor == "Categorical" then want = want + 1 end -- ember's categories are 1-based
          chk(c.name .. " mode", d.mode, want, 1e-12)
        end
        if c.cdf then chk(c.name .. " cdf", d:cdf(x), T(c.cdf), 1e-12) end
        if c.icdf then chk(c.name .. " icdf", d:icdf(T(c.q)), T(c.icdf), 1e-12) end
      end)
    end
  end
end)

describe("kl_divergence against torch's registered pairs", function()
  for _, c in ipairs(fx.cases) do
    if c.name:find("^kl_") then
      it(c.name, function()
        check_nonfinite(c.name, D.kl_divergence(build(c.p), build(c.q)), T(c.kl), 1e-11)
      end)
    end
  end
end)

describe("composite and multivariate distributions against torch's", function()
  local tol = 1e-11
  local function chk(c, what, got) check_nonfinite(c.name .. " " .. what, got, T(c[what]), tol) end

  it("Independent(Normal, 1)", function()
    local c = case("comp_independent")
    local d = D.Independent(D.Normal(T(c.loc), T(c.scale)), 1)
    chk(c, "log_prob", d:log_prob(T(c.x)))
    chk(c, "entropy", d:entropy())
  end)
  it("MixtureSameFamily of Normals and of Independent Normals", function()
    local c = case("comp_mixture")
    local d = D.MixtureSameFamily(D.Categorical({ logits = T(c.logits) }), D.Normal(T(c.loc), T(c.scale)))
    chk(c, "log_prob", d:log_prob(T(c.x)))
    chk(c, "mean", d.mean)
    chk(c, "variance", d.variance)
    chk(c, "cdf", d:cdf(T(c.x)))
    c = case("comp_mixture_indep")
    d = D.MixtureSameFamily(D.Categorical({ logits = T(c.logits) }), D.Independent(D.Normal(T(c.loc), T(c.scale)), 1))
    chk(c, "log_prob", d:log_prob(T(c.x)))
    chk(c, "mean", d.mean)
    chk(c, "variance", d.variance)
  end)
  it("TransformedDistribution with torch's transform names on distributions", function()
    local c = case("comp_transformed")
    local d = D.TransformedDistribution(D.Normal(T(c.loc), T(c.scale)), { D.AffineTransform(2.0, 3.0), D.ExpTransform() })
    chk(c, "log_prob", d:log_prob(T(c.x)))
    chk(c, "cdf", d:cdf(T(c.x)))
    c = case("comp_sigmoid")
    d = D.TransformedDistribution(D.Normal(T(c.loc), T(c.scale)), { D.SigmoidTransform() })
    chk(c, "log_prob", d:log_prob(T(c.x)))
    c = case("comp_tanh")
    d = D.TransformedDistribution(D.Normal(T(c.loc), T(c.scale)), { D.TanhTransform() })
    chk(c, "log_prob", d:log_prob(T(c.x)))
  end)
  it("MultivariateNormal by covariance, scale_tril and precision", function()
    local c = case("comp_mvn")
    local loc = T(c.loc)
    local q = D.MultivariateNormal(loc:flip(1), { covariance_matrix = T(c.cov):flip(1) })
    for _, kw in ipairs { { covariance_matrix = T(c.cov) }, { scale_tril = T(c.scale_tril) }, { precision_matrix = T(c.precision) } } do
      local d = D.MultivariateNormal(loc, kw)
      chk(c, "log_prob", d:log_prob(T(c.x)))
      chk(c, "entropy", d:entropy())
      chk(c, "variance", d.variance)
      chk(c, "scale_tril", d.scale_tril)
      chk(c, "precision", d.precision_matrix)
      chk(c, "kl", D.kl_divergence(d, q))
    end
  end)
  it("LowRankMultivariateNormal", function()
    local c = case("comp_lowrank")
    local d = D.LowRankMultivariateNormal(T(c.loc), T(c.W), T(c.diag))
    chk(c, "log_prob", d:log_prob(T(c.x)))
    chk(c, "entropy", d:entropy())
    chk(c, "variance", d.variance)
    chk(c, "covariance", d.covariance_matrix)
  end)
  it("Categorical (ember's values 1-based)", function()
    local c = case("comp_categorical")
    local d = D.Categorical({ logits = T(c.logits) })
    chk(c, "log_prob", d:log_prob(T(c.x) + 1))
    chk(c, "entropy", d:entropy())
    chk(c, "kl", D.kl_divergence(d, D.Categorical({ logits = T(c.logits):flip(1) })))
    check_nonfinite("categorical mode", d.mode, T(c.mode) + 1, 0)
    check_nonfinite("onehot mode", D.OneHotCategorical({ logits = T(c.logits) }).mode, T(c.onehot_mode), 0)
  end)
  it("mode (torch 1.13's property) of Dirichlet, Beta, Independent and MultivariateNormal", function()
    local c = case("comp_dirichlet_mode")
    chk(c, "mode", D.Dirichlet(T(c.c)).mode)
    local f = function(...) return ember.tensor({ ... }, { dtype = "float64" }) end
    chk(c, "beta_mode", D.Beta(f(0.5, 2.0, 0.7), f(0.4, 3.0, 1.5)).mode)
    c = case("comp_independent")
    chk(c, "mode", D.Independent(D.Normal(T(c.loc), T(c.scale)), 1).mode)
    local loc = T(case("comp_mvn").loc)
    parity.check("mvn mode", D.MultivariateNormal(loc, { covariance_matrix = T(case("comp_mvn").cov) }).mode, loc, 0)
    raises_here(function() local _ = D.Kumaraswamy(2.0, 3.0).mode end, "has no mode")
  end)
  it("RelaxedBernoulli and RelaxedOneHotCategorical log_prob", function()
    local c = case("comp_relaxed_bernoulli")
    chk(c, "log_prob", D.RelaxedBernoulli(ember.tensor(0.7, { dtype = "float64" }), { logits = T(c.logits) }):log_prob(T(c.x)))
    c = case("comp_relaxed_onehot")
    chk(c, "log_prob", D.RelaxedOneHotCategorical(ember.tensor(0.7, { dtype = "float64" }), { logits = T(c.logits) }):log_prob(T(c.x)))
  end)
end)

describe("ember.special against torch.special", function()
  local S = ember.special
  local tol = 1e-13
  local function chk(c, got, t) check_nonfinite(c.name, got, T(c.out), t or tol) end

  it("the one-argument functions at 0, negatives, the tails, inf and nan", function()
    for _, n in ipairs { "erfc", "erfcx", "ndtr", "log_ndtr", "i0", "i0e", "i1", "i1e", "entr", "expit", "gammaln",
      "digamma" } do
      local c = case("special_" .. n)
      chk(c, S[n](T(c.x)))
    end
    for _, n in ipairs { "i0", "i0e", "i1", "i1e" } do
      local c = case("special_" .. n .. "_range")
      chk(c, S[n](T(c.x)))
    end
  end)
  it("ndtri, zeta, polygamma, multigammaln, xlog1py, xlogy, logit(eps)", function()
    local c = case("special_ndtri")
    chk(c, S.ndtri(T(c.x)))
    c = case("special_zeta")
    chk(c, S.zeta(T(c.x), T(c.q)), 1e-12)
    for _, n in ipairs { 0, 1, 2, 3, 5 } do
      c = case("special_polygamma_" .. n)
      -- torch's trigamma is good to about 1e-10; ours is held to mpmath's below
      chk(c, S.polygamma(n, T(c.x)), n == 1 and 1e-9 or 1e-12)
    end
    c = case("special_trigamma_mpmath")
    chk(c, S.polygamma(1, T(c.x)), 1e-14)
    c = case("special_multigammaln")
    chk(c, S.multigammaln(T(c.x), c.p))
    c = case("special_xlog1py")
    chk(c, S.xlog1py(T(c.x), T(c.y)))
    c = case("special_xlogy")
    chk(c, S.xlogy(T(c.x), T(c.y)))
    c = case("special_logit_eps")
    chk(c, S.logit(T(c.x), c.eps))
  end)
  it("gradients as torch's", function()
    for _, n in ipairs { "erfc", "erfcx", "ndtr", "log_ndtr", "i0", "i0e", "i1", "i1e", "entr", "ndtri" } do
      check_grad(case("special_grad_" .. n), S[n], 1e-11)
    end
    check_grad(case("special_grad_zeta"), function(q) return S.zeta(ember.tensor(3.0, { dtype = "float64" }), q) end, 1e-11)
    check_grad(case("special_grad_polygamma"), function(x) return S.polygamma(2, x) end, 1e-11)
  end)
  it("errors name the function at the caller's line", function()
    raises_here(function() S.polygamma(-1, ember.ones(2)) end, "ember.special.polygamma: n must be non-negative")
    raises_here(function() S.polygamma(1.5, ember.ones(2)) end, "ember.special.polygamma: n must be an integer")
    raises_here(function() S.multigammaln(ember.ones(2), 3) end, "ember.special.multigammaln: All elements must be greater than (p-1)/2")
    raises_here(function() S.erfc("x") end, "ember.special.erfc: input must be a tensor or a number")
    raises_here(function() S.zeta(ember.ones(2), ember.ones(2, { dtype = "float64" })) end, "ember.special.zeta: input is float32 but other is float64")
  end)
  it("integer inputs compute in float32, as torch's", function()
    assert.are.equal("float32", S.erfc(ember.tensor({ 1, 2 }, { dtype = "int64" })).dtype)
  end)
end)

describe("einsum as torch.einsum", function()
  local o = { dtype = "float64" }
  it("takes torch's sublist form (0-25 A-Z, 26-51 a-z, '...')", function()
    local a, b = ember.randn(2, 3, o), ember.randn(3, 4, o)
    parity.check("sublist", ember.einsum(a, { 0, 1 }, b, { 1, 2 }, { 0, 2 }), a:matmul(b), 1e-14)
    parity.check("sublist implicit", ember.einsum(a, { 27, 28 }, b, { 28, 29 }), a:matmul(b), 1e-14)
    local x = ember.randn(5, 2, 3, o)
    parity.check("sublist ellipsis", ember.einsum(x, { "...", 0, 1 }, { "...", 1, 0 }), x:transpose(-1, -2), 0)
    parity.check("sublist trace", ember.einsum(a:matmul(a:t()), { 3, 3 }, {}), a:matmul(a:t()):trace(), 1e-14)
    raises_here(function() ember.einsum(a, { 0, 52 }) end, "ember.einsum: operand 1's sublist: subscript 52 must be an integer in [0, 52)")
    raises_here(function() ember.einsum(a, a) end, "the equation must be a string, got a tensor (in torch's sublist form")
    raises_here(function() ember.einsum(a, { 0, 1 }, b) end, "operand 2 has no sublist")
  end)
  it("operands of two dtypes are an einsum error (was ember.matmul's)", function()
    raises_here(function() ember.einsum("i,i->", ember.ones(3), ember.ones(3, o)) end,
      "ember.einsum: operand 2 is float64 but operand 1 is float32")
  end)
end)

local f64 = { dtype = "float64" }
local gamma_fx = dofile("tests/fixtures/gamma_grad_plateau.lua")

-- P(a, x), the regularized lower incomplete gamma function, by its series
-- x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n)) (float64)
local function lgamma(a) return ember.tensor(a, f64):lgamma():item() end
local function gammainc(a, x)
  local term, sum = 1, 1
  for n = 1, 2000 do
    term = term * x / (a + n)
    sum = sum + term
    if term < sum * 1e-17 then break end
  end
  return math.exp(a * math.log(x) - x - lgamma(a + 1)) * sum
end

describe("rsample of Gamma and the distributions drawn from it", function()
  local G = gamma_fx.gamma_grad
  it("the implicit gradient dx/da matches torch._standard_gamma_grad on every branch", function()
    local got = D.Gamma._standard_grad(T(G.x), T(G.alpha))
    parity.check("standard_gamma_grad", got, T(G.grad), 1e-10)
  end)
  it("and is -(dP/da) / (dP/dx) by finite differences of the CDF (torch's approximations' error)", function()
    for _, ax in ipairs { { 0.5, 0.3 }, { 2.0, 1.5 }, { 3.0, 4.0 }, { 12.0, 11.0 }, { 20.0, 40.0 }, { 5.0, 0.5 } } do
      local a, x, h = ax[1], ax[2], 1e-5
      local pdf = math.exp((a - 1) * math.log(x) - x - lgamma(a))
      local want = -(gammainc(a + h, x) - gammainc(a - h, x)) / (2 * h) / pdf
      local got = D.Gamma._standard_grad(ember.tensor(x, f64), ember.tensor(a, f64)):item()
      assert(math.abs(got - want) < 2e-3 * math.abs(want), ("a=%g x=%g: %g vs %g"):format(a, x, got, want))
    end
  end)
  it("a draw's gradient is the implicit one at that draw, over the rate; the rate's is -x / rate", function()
    local a = ember.tensor({ 0.4, 2.0, 9.0 }, f64):requires_grad_()
    local r = ember.tensor({ 1.0, 3.0, 0.5 }, f64):requires_grad_()
    ember.manual_seed(7)
    local d = D.Gamma(a, r)
    assert.is_true(d.has_rsample)
    local x = d:rsample()
    x:sum():backward()
    local z = x:detach() * r:detach()
    parity.check("d x / d a", a.grad, D.Gamma._standard_grad(z, a:detach()) / r:detach(), 1e-12)
    parity.check("d x / d rate", r.grad, -x:detach() / r:detach(), 1e-12)
    -- sample() is still the plain draw: its values, no gradient
    assert.is_false(d:sample({ 2 }).requires_grad)
  end)
  it("the gradients of the means match their closed forms (Gamma, Chi2, Beta, Dirichlet, StudentT, F)", function()
    local N = 40000
    local function grad_of(param, fn)
      ember.manual_seed(11)
      fn():backward()
      return param.grad
    end
    local function near(what, got, want, tol)
      assert(math.abs(got - want) < tol, ("%s: %g, expected %g"):format(what, got, want))
    end
    local a = ember.tensor(2.0, f64):requires_grad_()
    near("Gamma d mean / d a", grad_of(a, function() return D.Gamma(a, 3.0):rsample({ N }):mean() end):item(), 1 / 3, 0.01)
    local k = ember.tensor(3.0, f64):requires_grad_()
    near("Chi2 d mean / d df", grad_of(k, function() return D.Chi2(k):rsample({ N }):mean() end):item(), 1, 0.02)
    local b1, b0 = ember.tensor(2.0, f64):requires_grad_(), ember.tensor(3.0, f64):requires_grad_()
    ember.manual_seed(11)
    D.Beta(b1, b0):rsample({ N }):mean():backward()
    near("Beta d mean / d a", b1.grad:item(), 3 / 25, 0.005)
    near("Beta d mean / d b", b0.grad:item(), -2 / 25, 0.005)
    local c = ember.tensor({ 1.0, 2.0, 3.0 }, f64):requires_grad_()
    ember.manual_seed(11)
    local x = D.Dirichlet(c):rsample({ N })
    assert(ember.allclose(x:sum(-1), ember.ones(N, f64)))
    x:mean(1)[1]:backward()
    near("Dirichlet d mean1 / d c1", c.grad[1]:item(), 5 / 36, 0.005)
    near("Dirichlet d mean1 / d c2", c.grad[2]:item(), -1 / 36, 0.005)
    local df = ember.tensor(5.0, f64):requires_grad_()
    ember.manual_seed(11)
    local s = D.StudentT(df, 0.0, 1.0):rsample({ N })
    ;(s * s):mean():backward() -- E[s^2] = df / (df - 2)
    near("StudentT d var / d df", df.grad:item(), -2 / 9, 0.03)
    local d1, d2 = ember.tensor(4.0, f64):requires_grad_(), ember.tensor(8.0, f64):requires_grad_()
    ember.manual_seed(11)
    D.FisherSnedecor(d1, d2):rsample({ N }):mean():backward() -- mean d2 / (d2 - 2)
    near("F d mean / d df1", d1.grad:item(), 0, 0.01)
    near("F d mean / d df2", d2.grad:item(), -2 / 36, 0.01)
  end)
  it("float32 draws keep their dtype and shape", function()
    local a = ember.tensor({ 2.0, 0.5 }):requires_grad_()
    local x = D.Beta(a, 1.0):rsample({ 3 })
    assert.are.equal("float32", x.dtype)
    assert(x.shape == ember.Size { 3, 2 })
    x:sum():backward()
    assert.are.equal("float32", a.grad.dtype)
  end)
end)
