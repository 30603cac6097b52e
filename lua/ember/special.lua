--- ember.special: torch.special's functions (PyTorch 1.13's names and
-- arguments), elementwise with broadcasting, composed from ember's ops, so
-- every float dtype and autograd come free. Integer and bool inputs compute
-- in float32, as torch's. The values at the edges are torch's: erfc (ember.erfc),
-- erfcx, ndtr and log_ndtr keep their relative accuracy in the far tails (the
-- scaled ones by the continued fraction past 2, not 1 - erf), ndtri is refined by Newton's steps on
-- ndtr, i0 / i1 sum their power series up to |x| 30 and the asymptotic
-- series past it, zeta is Hurwitz's (Euler-Maclaurin) and polygamma(n, x)
-- for n >= 1 is (-1)^(n+1) n! zeta(n + 1, x). The names torch.special
-- shares with ember (erf, erfinv, expit = sigmoid, logit, xlogy, gammaln
-- = lgamma, digamma = psi, expm1, exp2, log1p, round, sinc, logsumexp,
-- softmax, log_softmax) are those functions. Errors name
-- special.<function> and are raised at the caller's line.
-- Not here: gammainc / gammaincc, the Bessel functions j0 / j1 / y0 / y1 and
-- the orthogonal polynomials of torch 2.x.
-- @module ember.special
-- @usage local special = ember.special
-- print(special.erfc(ember.tensor({0, 10}, {dtype = "float64"})))   --> tensor([1.0000e+00, 2.0885e-45], shape=[2], dtype=float64, device=cpu)
local core = require "ember.core"
local errors = require "ember._errors"

local M = {}
local SQRT2, SQRTPI, LOG2PI = math.sqrt(2), math.sqrt(math.pi), math.log(2 * math.pi)

local function fail(op, fmt, ...) errors.raise("ember.special." .. op .. ": " .. fmt, ...) end

-- x as a float tensor (a number: a 0-d tensor of torch's default dtype)
local function floating(op, x, what)
  if type(x) == "number" then return core.tensor(x, { dtype = core.get_default_dtype() }) end
  if not core.is_tensor(x) then fail(op, "%s must be a tensor or a number, got %s", what or "input", type(x)) end
  if x:is_floating_point() then return x end
  return x:to(core.get_default_dtype())
end

local function full_like(x, v) return core.full({}, v, { dtype = x.dtype, device = x.device }) end

-- two operands in one float dtype, numbers taking the tensor's
local function pair(op, a, b)
  if type(a) == "number" and core.is_tensor(b) then
    b = floating(op, b, "other")
    return full_like(b, a), b
  end
  a = floating(op, a, "input")
  if type(b) == "number" then return a, full_like(a, b) end
  b = floating(op, b, "other")
  if a.dtype ~= b.dtype then fail(op, "input is %s but other is %s (convert one)", a.dtype, b.dtype) end
  return a, b
end

-- erfc for x >= 2 (the caller keeps smaller x out): exp(-x^2) / sqrt(pi)
-- over the continued fraction x + (1/2)/(x + 1/(x + (3/2)/(x + ...))), 60
-- terms from the bottom (relative error below 1e-15 from x = 2 on)
local function erfcx_tail(x)
  local t = x
  for k = 60, 1, -1 do t = x + (k / 2) / t end
  return (t * SQRTPI):reciprocal()
end

-- erfc(x) accurate in both tails: ember.erfc (lua/ember/_tensor_extra.lua)
local function erfc(x) return x:erfc() end

--- erfc(x) = 1 - erf(x), accurate where it is tiny (torch.special.erfc; ember.erfc).
-- @tparam Tensor x
-- @treturn Tensor
-- @usage print(ember.special.erfc(ember.tensor(5.0, {dtype = "float64"})))   --> tensor(1.5375e-12, shape=[], dtype=float64, device=cpu)
function M.erfc(x) return erfc(floating("erfc", x)) end

--- The scaled complementary error function exp(x^2) erfc(x)
-- (torch.special.erfcx), finite for large x (about 1 / (x sqrt(pi))).
-- @tparam Tensor x
-- @treturn Tensor
-- @usage print(ember.special.erfcx(ember.tensor(1e10, {dtype = "float64"})))   --> tensor(5.6419e-11, shape=[], dtype=float64, device=cpu)
function M.erfcx(x)
  x = floating("erfcx", x)
  local big = x:ge(2)
  local xs = core.where(big, x, full_like(x, 2))
  local xl = core.where(big, full_like(x, 0), x)
  return core.where(big, erfcx_tail(xs), (xl * xl):exp() * erfc(xl))
end

--- The standard normal CDF (torch.special.ndtr): erfc(-x / sqrt 2) / 2.
-- @tparam Tensor x
-- @treturn Tensor
-- @usage print(ember.special.ndtr(ember.tensor(-10.0, {dtype = "float64"})))   --> tensor(7.6199e-24, shape=[], dtype=float64, device=cpu)
function M.ndtr(x)
  x = floating("ndtr", x)
  return erfc(-x / SQRT2) * 0.5
end

--- log of the standard normal CDF (torch.special.log_ndtr), finite far into
-- the lower tail (about -x^2 / 2 there) and accurate near 0 in the upper.
-- @tparam Tensor x
-- @treturn Tensor
-- @usage print(ember.special.log_ndtr(ember.tensor(-40.0, {dtype = "float64"})))   --> tensor(-804.6084, shape=[], dtype=float64, device=cpu)
function M.log_ndtr(x)
  x = floating("log_ndtr", x)
  -- lower tail: log(erfcx(z) / 2) - z^2, z = -x / sqrt 2 >= 2
  local low = x:le(-2 * SQRT2)
  local z = core.where(low, -x / SQRT2, full_like(x, 2))
  local lower = (erfcx_tail(z) * 0.5):log() - z * z
  local xh = core.where(low, full_like(x, 0), x)
  -- elsewhere log(1 - q) with q = ndtr(-x) the other tail
  local upper = (-(erfc(xh / SQRT2) * 0.5)):log1p()
  local mid = (erfc(-xh / SQRT2) * 0.5):log()
  return core.where(low, lower, core.where(xh:gt(0), upper, mid))
end

--- The standard normal quantile (torch.special.ndtri): x with ndtr(x) = p,
-- -inf at 0, inf at 1, NaN outside [0, 1].
-- @tparam Tensor p
-- @treturn Tensor
-- @usage print(ember.special.ndtri(ember.tensor({0.5, 0.975}, {dtype = "float64"})))   --> tensor([0.0000, 1.9600], shape=[2], dtype=float64, device=cpu)
function M.ndtri(p)
  p = floating("ndtri", p)
  -- the smaller tail q = min(p, 1 - p), x <= 0 for it, the sign restored
  local upper = p:gt(0.5)
  local q = core.where(upper, 1 - p, p)
  local inner = q:gt(0):logical_and(q:le(0.5))
  local qs = core.where(inner, q, full_like(p, 0.25))
  -- start: erfinv where 2q - 1 keeps q's digits, else the tail's
  -- q ~ pdf(x) / |x|: x^2 ~ 2L - log(4 pi L), L = -log q
  local tiny = qs:lt(1e-8)
  local L = core.where(tiny, -qs:log(), full_like(p, 20))
  local x = core.where(tiny, -(L * 2 - (L * 4 * math.pi):log()):sqrt(), (qs * 2 - 1):erfinv() * SQRT2)
  -- Newton's steps on log ndtr (accurate however small q is):
  -- x -= (log ndtr(x) - log q) * ndtr(x) / pdf(x)
  local lq = qs:log()
  for _ = 1, 3 do
    local l = M.log_ndtr(x)
    local log_pdf = -(x * x) * 0.5 - 0.5 * LOG2PI
    x = x - (l - lq) * (l - log_pdf):exp()
  end
  local r = core.where(upper, -x, x)
  r = core.where(p:eq(0), full_like(p, -math.huge), core.where(p:eq(1), full_like(p, math.huge), r))
  r = core.where(p:eq(0.5), full_like(p, 0), r)
  return core.where(p:lt(0):logical_or(p:gt(1)):logical_or(p:isnan()), full_like(p, 0 / 0), r)
end

-- the modified Bessel functions I0 and I1, exp(-|x|)-scaled: the power
-- series up to |x| 30, the asymptotic series past it
local function bessel_scaled(x, order)
  local ax = x:abs()
  local big = ax:gt(30)
  local xs = core.where(big, full_like(x, 0), ax)
  local h = xs * xs * 0.25
  -- sum_k h^k / (k! (k + order)!), times (x/2)^order
  local term = core.ones_like(xs)
  local sum = core.ones_like(xs)
  for k = 1, 90 do
    term = term * h / (k * (k + order))
    sum = sum + term
  end
  if order == 1 then sum = sum * xs * 0.5 end
  local small = sum * (-xs):exp()
  -- e^-x I(x) ~ 1/sqrt(2 pi x) sum_k (-1)^k prod_{j<=k} (4 n^2 - (2j-1)^2) / (j 8 x)
  local xb = core.where(big, ax, full_like(x, 31))
  local mu = 4 * order * order
  local t = core.ones_like(xb)
  local s = core.ones_like(xb)
  for j = 1, 30 do
    t = -t * (mu - (2 * j - 1) ^ 2) / (xb * (8 * j))
    s = s + t
  end
  local large = s / (xb * 2 * math.pi):sqrt()
  local r = core.where(big, large, small)
  if order == 1 then r = core.where(x:lt(0), -r, r) end -- I1 is odd
  return r
end

--- The modified Bessel function of the first kind, order 0 (torch.special.i0).
-- @tparam Tensor x
-- @treturn Tensor
-- @usage print(ember.special.i0(ember.tensor({0, 1}, {dtype = "float64"})))   --> tensor([1.0000, 1.2661], shape=[2], dtype=float64, device=cpu)
function M.i0(x)
  x = floating("i0", x)
  return bessel_scaled(x, 0) * x:abs():exp()
end

--- exp(-|x|) i0(x) (torch.special.i0e), finite for any x.
-- @tparam Tensor x
-- @treturn Tensor
-- @usage print(ember.special.i0e(ember.tensor(1.0, {dtype = "float64"})))   --> tensor(0.4658, shape=[], dtype=float64, device=cpu)
function M.i0e(x) return bessel_scaled(floating("i0e", x), 0) end

--- The modified Bessel function of the first kind, order 1 (torch.special.i1).
-- @tparam Tensor x
-- @treturn Tensor
-- @usage print(ember.special.i1(ember.tensor(1.0, {dtype = "float64"})))   --> tensor(0.5652, shape=[], dtype=float64, device=cpu)
function M.i1(x)
  x = floating("i1", x)
  return bessel_scaled(x, 1) * x:abs():exp()
end

--- exp(-|x|) i1(x) (torch.special.i1e).
-- @tparam Tensor x
-- @treturn Tensor
-- @usage print(ember.special.i1e(ember.tensor(1.0, {dtype = "float64"})))   --> tensor(0.2079, shape=[], dtype=float64, device=cpu)
function M.i1e(x) return bessel_scaled(floating("i1e", x), 1) end

-- B_2j / (2j)! for j = 1..12, the Euler-Maclaurin corrections
local BERN = {}
do
  local b = { 1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798,
    -174611 / 330, 854513 / 138, -236364091 / 2730 }
  local f = 1
  for j = 1, #b do
    f = f * (2 * j - 1) * (2 * j)
    BERN[j] = b[j] / f
  end
end

-- Hurwitz zeta(s, q) = sum_k (q + k)^-s for s > 1: N terms, then the
-- Euler-Maclaurin tail at a = q + N
local function hurwitz(s, q)
  local N = 12
  if q:numel() > 0 then N = N + math.max(0, math.ceil(-q:min():item())) end -- a = q + N > 11
  local sum = core.zeros_like(q + s)
  for k = 0, N - 1 do sum = sum + (q + k):pow(-s) end
  local a = q + N
  local tail = a:pow(1 - s) / (s - 1) + a:pow(-s) * 0.5
  -- sum_j B_2j/(2j)! s (s+1) ... (s+2j-2) a^(-s-2j+1)
  local fac = s * a:pow(-s - 1)
  for j = 1, #BERN do
    tail = tail + fac * BERN[j]
    fac = fac * (s + 2 * j - 1) * (s + 2 * j) / (a * a)
  end
  return sum + tail
end

--- The Hurwitz zeta function sum_k (q + k)^-x (torch.special.zeta): inf at
-- x = 1, NaN for x < 1; for q <= 0, inf at the integers, the sum itself
-- for an integer x, NaN else (torch's, Cephes' domain).
-- @tparam Tensor|number x
-- @tparam Tensor|number q
-- @treturn Tensor
-- @usage print(ember.special.zeta(ember.tensor(2.0, {dtype = "float64"}), 1.0))   --> tensor(1.6449, shape=[], dtype=float64, device=cpu)
function M.zeta(x, q)
  x, q = pair("zeta", x, q)
  -- q <= 0 has a value only for integer x at non-integer q (the sum itself)
  local ok = x:gt(1):logical_and(q:gt(0):logical_or(q:ne(q:floor()):logical_and(x:eq(x:floor()))))
  local xs = core.where(ok, x, full_like(x, 2))
  local qs = core.where(ok, q, full_like(q, 1))
  local r = hurwitz(xs, qs)
  local nan, inf = full_like(r, 0 / 0), full_like(r, math.huge)
  -- q <= 0: a pole at the integers, else NaN (x > 1)
  local qbad = q:le(0):logical_and(ok:logical_not())
  r = core.where(qbad, core.where(q:eq(q:floor()), inf, nan), r)
  r = core.where(x:lt(1), nan, core.where(x:eq(1), inf, r))
  return core.where(x:isnan():logical_or(q:isnan()), nan, r)
end

--- The n-th derivative of digamma (torch.special.polygamma(n, x)), n a
-- nonnegative integer: digamma for n = 0, (-1)^(n+1) n! zeta(n + 1, x) else.
-- @tparam integer n
-- @tparam Tensor x
-- @treturn Tensor
-- @usage print(ember.special.polygamma(1, ember.tensor(1.0, {dtype = "float64"})))   --> tensor(1.6449, shape=[], dtype=float64, device=cpu)
function M.polygamma(n, x)
  if math.type(n) ~= "integer" and not (type(n) == "number" and n == math.floor(n)) then
    fail("polygamma", "n must be an integer, got %s", tostring(n))
  end
  if n < 0 then fail("polygamma", "n must be non-negative, got %d", n) end
  x = floating("polygamma", x)
  if n == 0 then return x:digamma() end
  local f = 1
  for k = 2, n do f = f * k end
  return M.zeta(full_like(x, n + 1) + x * 0, x) * ((n % 2 == 1) and f or -f)
end

--- The multivariate log-gamma log Gamma_p(x) (torch.special.multigammaln):
-- p (p - 1) / 4 log pi + sum_{i<p} lgamma(x - i / 2); every x must be > (p - 1) / 2.
-- @tparam Tensor x
-- @tparam integer p >= 1
-- @treturn Tensor
-- @usage print(ember.special.multigammaln(ember.tensor(2.5, {dtype = "float64"}), 2))   --> tensor(0.8570, shape=[], dtype=float64, device=cpu)
function M.multigammaln(x, p)
  if math.type(p) ~= "integer" or p < 1 then fail("multigammaln", "p must be an integer >= 1, got %s", tostring(p)) end
  x = floating("multigammaln", x)
  if x:numel() > 0 and x:le((p - 1) / 2):any():item() then
    fail("multigammaln", "All elements must be greater than (p-1)/2 = %g", (p - 1) / 2)
  end
  local r = x:lgamma()
  for i = 1, p - 1 do r = r + (x - i / 2):lgamma() end
  return r + p * (p - 1) / 4 * math.log(math.pi)
end

--- -x log x (torch.special.entr): 0 at 0, -inf for x < 0.
-- @tparam Tensor x
-- @treturn Tensor
-- @usage print(ember.special.entr(ember.tensor({0, 0.5, -1}, {dtype = "float64"})))   --> tensor([0.0000, 0.3466, -inf], shape=[3], dtype=float64, device=cpu)
function M.entr(x)
  x = floating("entr", x)
  local pos = x:gt(0)
  local xs = core.where(pos, x, full_like(x, 1))
  local r = core.where(pos, -xs * xs:log(), full_like(x, 0))
  r = core.where(x:lt(0), full_like(x, -math.huge), r)
  return core.where(x:isnan(), x, r)
end

--- x log1p(y), 0 where x is 0 and y is not NaN (torch.special.xlog1py).
-- @tparam Tensor|number x
-- @tparam Tensor|number y
-- @treturn Tensor
-- @usage print(ember.special.xlog1py(ember.tensor({0, 2}, {dtype = "float64"}), ember.tensor({-1, 1}, {dtype = "float64"})))   --> tensor([0.0000, 1.3863], shape=[2], dtype=float64, device=cpu)
function M.xlog1py(x, y)
  x, y = pair("xlog1py", x, y)
  local zero = x:eq(0):logical_and(y:isnan():logical_not())
  local ys = core.where(zero, core.zeros_like(y), y)
  return core.where(zero, core.zeros_like(x + y), x * ys:log1p())
end

--- torch.special.logit(x, eps): log(z / (1 - z)), z = x clamped into
-- [eps, 1 - eps] when eps is given.
-- @tparam Tensor x
-- @tparam[opt] number eps
-- @treturn Tensor
-- @usage print(ember.special.logit(ember.tensor({0, 0.5}, {dtype = "float64"}), 1e-6))   --> tensor([-13.8155, 0.0000], shape=[2], dtype=float64, device=cpu)
function M.logit(x, eps)
  if eps ~= nil and type(eps) ~= "number" then fail("logit", "eps must be a number, got %s", type(eps)) end
  return floating("logit", x):logit(eps)
end

--- torch.special.xlogy(x, y): x log y, 0 where x is 0 and y is not NaN.
-- @tparam Tensor|number x
-- @tparam Tensor|number y
-- @treturn Tensor
-- @usage print(ember.special.xlogy(ember.tensor(0.0, {dtype = "float64"}), 0.0))   --> tensor(0.0000, shape=[], dtype=float64, device=cpu)
function M.xlogy(x, y)
  x, y = pair("xlogy", x, y)
  return core.xlogy(x, y)
end

-- torch.special's names for ember's own functions
local unary = { erf = "erf", erfinv = "erfinv", expit = "sigmoid", gammaln = "lgamma", digamma = "digamma",
  psi = "digamma", expm1 = "expm1", exp2 = "exp2", log1p = "log1p", sinc = "sinc" }
for name, method in pairs(unary) do
  M[name] = function(x)
    x = floating(name, x)
    return x[method](x)
  end
end

--- torch.special.round(x, decimals): round half to even.
-- @tparam Tensor x
-- @treturn Tensor
function M.round(x, ...) return core.round(x, ...) end
--- torch.special.logsumexp(x, dim, keepdim)
-- @tparam Tensor x
-- @treturn Tensor
function M.logsumexp(x, ...) return core.logsumexp(floating("logsumexp", x), ...) end
--- torch.special.softmax(x, dim, dtype)
-- @tparam Tensor x
-- @treturn Tensor
function M.softmax(x, ...) return core.softmax(floating("softmax", x), ...) end
--- torch.special.log_softmax(x, dim, dtype)
-- @tparam Tensor x
-- @treturn Tensor
function M.log_softmax(x, ...) return core.log_softmax(floating("log_softmax", x), ...) end

-- Errors (ours and the ops') move to the caller's line.
for k, f in pairs(M) do
  if type(f) == "function" then M[k] = errors.wrap(f) end
end

return M
