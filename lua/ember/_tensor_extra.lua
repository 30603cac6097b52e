-- ember/_tensor_extra.lua: torch's smaller everyday functions that ember
-- lacked, composed from core ops: asinh / acosh / atanh (and the arc*
-- names), erfc, sinc, signbit, copysign, isposinf / isneginf, fmax / fmin,
-- logaddexp2, float_power, heaviside, dist, cov, corrcoef, block_diag,
-- diagflat, column_stack / row_stack, hsplit / vsplit / dsplit,
-- trapezoid, vander, combinations, gcd / lcm, put, renorm. Functions and, where
-- torch has one, tensor methods. ember/_tensor_more.lua loads it.
local core = require "ember.core"
local helpers = require "ember._helpers"
local shape_str = require("ember._errors").shape_str
local check_opts = require("ember._functional").check_opts

local fail, check_tensor, set = helpers.fail, helpers.check_tensor, helpers.set
local dim_of = helpers.check_dim
local LN2 = math.log(2)
local BIG = 2 ^ 28 -- past it asinh(x) = log(2|x|) and acosh(x) = log(2x) in double

local function floating(op, x)
  check_tensor(op, x)
  if x:is_floating_point() then return x end
  return x:to(core.get_default_dtype()) -- torch's default dtype for integer inputs
end

local function full_like(x, v) return core.full(x.shape, v, { dtype = x.dtype, device = x.device }) end

-- ---- inverse hyperbolic functions, sinc --------------------------------------------------------

-- asinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), exact near 0;
-- log(2|x|) past 2^28 (each branch fed values it cannot overflow on, so
-- no NaN reaches the gradient through where).
local function asinh(x)
  x = floating("asinh", x)
  local a = x:abs()
  local small = a:clamp(nil, BIG)
  local s = (small + small * small / ((small * small + 1):sqrt() + 1)):log1p()
  local l = (a:clamp(BIG, nil)):log() + LN2
  return core.where(a:gt(BIG), l, s) * core.where(x:lt(0), full_like(x, -1), full_like(x, 1))
end
-- acosh(x) = log1p(t + sqrt(2t + t^2)), t = x - 1 (exact near 1); log(2x) past 2^28; NaN below 1.
local function acosh(x)
  x = floating("acosh", x)
  local t = x:clamp(nil, BIG) - 1
  local s = (t + (t * 2 + t * t):sqrt()):log1p()
  local l = x:clamp(BIG, nil):log() + LN2
  return core.where(x:gt(BIG), l, s)
end
-- atanh(x) = sign(x) log1p(2|x| / (1 - |x|)) / 2; inf at 1, NaN past it.
local function atanh(x)
  x = floating("atanh", x)
  local a = x:abs()
  local r = (a * 2 / (1 - a)):log1p() * 0.5
  return core.where(x:lt(0), -r, r)
end
for name, fn in pairs { asinh = asinh, acosh = acosh, atanh = atanh } do
  set(name, fn, true)
  set("arc" .. name:sub(2), fn, true) -- torch's arcsinh, arccosh, arctanh
end

-- ember.sinc(x): sin(pi x) / (pi x), 1 at 0 (torch.sinc; gradient 0 there).
set("sinc", function(x)
  x = floating("sinc", x)
  local zero = x:eq(0)
  local px = core.where(zero, full_like(x, 1), x) * math.pi
  return core.where(zero, full_like(x, 1), px:sin() / px)
end, true)

-- ember.erfc(x): 1 - erf(x) without its cancellation (torch.erfc): 1 - erf
-- below |x| = 2.5 (relative error < 1e-13 there), the continued fraction
-- exp(-x^2) / sqrt(pi) / (x + (1/2) / (x + (2/2) / (x + ...))) of 60 terms
-- above it (to 1e-15), 2 - erfc(-x) for x < 0. Gradient -2 exp(-x^2) / sqrt(pi).
local ERFC = core.Function {
  name = "erfc",
  forward = function(ctx, x)
    local a = x:detach():abs()
    local big = a:clamp(2.5, nil)
    local t = big
    for k = 60, 1, -1 do t = big + (k / 2) / t end
    local r = core.where(a:lt(2.5), 1 - a:erf(), (-(big * big)):exp() / math.sqrt(math.pi) / t)
    ctx:save_for_backward(x)
    return core.where(x:lt(0), 2 - r, r)
  end,
  backward = function(ctx, g)
    local x = ctx.saved[1]
    return g * (-(x * x)):exp() * (-2 / math.sqrt(math.pi))
  end,
}
set("erfc", function(x) return ERFC(floating("erfc", x)) end, true)

-- ---- signs, infinities, NaN-ignoring extremes ---------------------------------------------------

-- ember.signbit(x): whether x's sign bit is set (-0.0 included; NaN false), bool.
local function signbit(x)
  check_tensor("signbit", x)
  if x.dtype == "bool" then return core.zeros(x.shape, { dtype = "bool", device = x.device }) end
  if not x:is_floating_point() then return x:lt(0) end
  return x:lt(0):logical_or(x:eq(0):logical_and((1 / x):lt(0)))
end
set("signbit", signbit, true)

-- ember.copysign(a, b): |a| with b's sign (b a tensor or a number; -0.0 counts), float.
set("copysign", function(a, b)
  a = floating("copysign", a)
  if type(b) == "number" then b = core.full({}, b, { dtype = a.dtype, device = a.device }) end
  check_tensor("copysign", b, "other")
  local m = a:abs()
  return core.where(signbit(b), -m, m)
end, true)

set("isposinf", function(x) check_tensor("isposinf", x); return x:eq(math.huge) end, true)
set("isneginf", function(x) check_tensor("isneginf", x); return x:eq(-math.huge) end, true)

-- ember.fmax(a, b) / fmin: maximum / minimum where a NaN loses to a number (torch.fmax).
local function nan_ignoring(op, pick)
  return function(a, b)
    check_tensor(op, a)
    if type(b) == "number" then b = core.full({}, b, { dtype = a.dtype, device = a.device }) end
    check_tensor(op, b, "other")
    local m = pick(a, b)
    if not (a:is_floating_point() or b:is_floating_point()) then return m end
    return core.where(a:isnan(), b, core.where(b:isnan(), a, m))
  end
end
set("fmax", nan_ignoring("fmax", core.maximum), true)
set("fmin", nan_ignoring("fmin", core.minimum), true)

-- ember.logaddexp2(a, b): log2(2^a + 2^b) without overflow (torch.logaddexp2).
set("logaddexp2", function(a, b)
  a = floating("logaddexp2", a)
  if type(b) == "number" then b = core.full({}, b, { dtype = a.dtype, device = a.device }) end
  check_tensor("logaddexp2", b, "other")
  return core.logaddexp(a * LN2, b * LN2) / LN2
end, true)

-- ember.float_power(a, b): a^b in float64 (torch.float_power).
set("float_power", function(a, b)
  if core.is_tensor(a) then a = a:to("float64") elseif type(a) ~= "number" then fail("float_power", "a must be a tensor or a number") end
  if core.is_tensor(b) then b = b:to("float64") elseif type(b) ~= "number" then fail("float_power", "exponent must be a tensor or a number") end
  if not core.is_tensor(a) and not core.is_tensor(b) then fail("float_power", "a or the exponent must be a tensor") end
  return core.pow(a, b)
end, true)

-- ember.heaviside(x, values): 0 where x < 0, 1 where x > 0, values where x == 0 (torch.heaviside).
set("heaviside", function(x, values)
  check_tensor("heaviside", x)
  check_tensor("heaviside", values, "values")
  if values.dtype ~= x.dtype then fail("heaviside", "values must have x's dtype %s, got %s", x.dtype, values.dtype) end
  return core.where(x:eq(0), values, x:gt(0):to(x.dtype))
end, true)

-- ember.dist(a, b [, p = 2]): the p-norm of a - b (torch.dist). Differentiable.
set("dist", function(a, b, p)
  check_tensor("dist", a)
  check_tensor("dist", b, "other")
  return (a - b):norm(p or 2)
end, true)

-- ---- statistics -----------------------------------------------------------------------------

-- ember.cov(x [, {correction = 1}]): the covariance matrix of the rows of x
-- (variables) over its columns (observations), as torch.cov without
-- weights; a 1-d x gives a 0-d variance. Differentiable.
local function cov(op, x, opts)
  x = floating(op, x)
  opts = check_opts(op, opts, { correction = true, fweights = true, aweights = true })
  if opts.fweights ~= nil or opts.aweights ~= nil then fail(op, "fweights and aweights are not supported") end
  if x:dim() > 2 then fail(op, "x must have at most 2 dims, got %s", shape_str(x)) end
  local c = opts.correction or 1
  if math.type(c) ~= "integer" then fail(op, "correction must be an integer, got %s", tostring(c)) end
  local m = x:dim() < 2 and x:reshape(1, -1) or x
  local n = m:size(2)
  local xm = m - m:mean(2, true)
  local r = xm:matmul(xm:t()) / math.max(n - c, 0)
  return x:dim() < 2 and r:reshape({}) or r
end
set("cov", function(x, opts) return cov("cov", x, opts) end, true)

-- ember.corrcoef(x): Pearson's correlation of the rows of x (torch.corrcoef), clamped to [-1, 1].
set("corrcoef", function(x)
  local c = cov("corrcoef", x)
  if c:dim() == 0 then return c / c end
  local d = c:diagonal():sqrt()
  return (c / d:unsqueeze(2) / d:unsqueeze(1)):clamp(-1, 1)
end, true)

-- ---- building and splitting -----------------------------------------------------------------

local RANK = { bool = 1, int64 = 2, bfloat16 = 3, float32 = 4, float64 = 5 }

-- ember.block_diag(a, b, ...): the tensors (0-d, 1-d as a row, or 2-d) on
-- the diagonal of a zero matrix, in the widest of their dtypes (torch.block_diag). Differentiable.
set("block_diag", function(...)
  local ts, dtype = table.pack(...), "bool"
  local rows, cols, device = 0, 0, nil
  for i = 1, ts.n do
    local t = ts[i]
    check_tensor("block_diag", t, "tensor " .. i)
    if t:dim() > 2 then fail("block_diag", "tensor %d must have at most 2 dims, got %s", i, shape_str(t)) end
    t = t:dim() == 0 and t:reshape(1, 1) or t:dim() == 1 and t:unsqueeze(1) or t
    ts[i] = t
    if (RANK[t.dtype] or 0) > (RANK[dtype] or 0) then dtype = t.dtype end
    rows, cols, device = rows + t:size(1), cols + t:size(2), device or t.device
  end
  if ts.n == 0 then return core.zeros(1, 0) end
  local parts, at = {}, 0
  for i = 1, ts.n do
    local t = ts[i]:to(dtype)
    local r, c = t:size(1), t:size(2)
    local row = { t }
    if at > 0 then table.insert(row, 1, core.zeros({ r, at }, { dtype = dtype, device = device })) end
    if cols - at - c > 0 then row[#row + 1] = core.zeros({ r, cols - at - c }, { dtype = dtype, device = device }) end
    parts[i] = #row == 1 and t or core.cat(row, 2)
    at = at + c
  end
  return core.cat(parts, 1)
end)

-- ember.diagflat(x [, offset = 0]): x flattened on a diagonal of a square matrix (torch.diagflat).
set("diagflat", function(x, offset)
  check_tensor("diagflat", x)
  return core.diag(x:reshape(-1), offset or 0)
end, true)

-- ember.column_stack({a, b, ...}): 0-d and 1-d tensors as columns, joined
-- along dim 2 (torch.column_stack); ember.row_stack is vstack.
set("column_stack", function(ts)
  if type(ts) ~= "table" or core.is_tensor(ts) or #ts == 0 then fail("column_stack", "expected a non-empty list of tensors") end
  local parts = {}
  for i, t in ipairs(ts) do
    check_tensor("column_stack", t, "element " .. i)
    parts[i] = t:dim() <= 1 and t:reshape(-1, 1) or t
  end
  return core.cat(parts, 2)
end)
set("row_stack", function(ts) return core.vstack(ts) end)

-- x:hsplit(n or {indices}) / vsplit / dsplit: tensor_split along dim 2 (1
-- for 1-d) / 1 / 3; a number must divide the dim (torch.hsplit...).
local function dir_split(op, min_dim, dim_for)
  return function(x, s)
    check_tensor(op, x)
    if x:dim() < min_dim then fail(op, "x must have at least %d dims, got %s", min_dim, shape_str(x)) end
    local d = dim_for(x)
    if math.type(s) == "integer" then
      if s < 1 or x:size(d) % s ~= 0 then
        fail(op, "dim %d of size %d cannot be split into %s equal parts", d, x:size(d), tostring(s))
      end
    elseif type(s) ~= "table" then
      fail(op, "expected a number of parts or a list of 1-based split positions, got %s", type(s))
    end
    return x:tensor_split(s, d)
  end
end
set("hsplit", dir_split("hsplit", 1, function(x) return x:dim() == 1 and 1 or 2 end), true)
set("vsplit", dir_split("vsplit", 2, function() return 1 end), true)
set("dsplit", dir_split("dsplit", 3, function() return 3 end), true)

-- The areas of the trapezoids along dim (one fewer than y's elements) and
-- dim, for trapezoid and cumulative_trapezoid: (y[i] + y[i+1]) / 2 times
-- x's step (x a tensor of sample points) or dx.
local function trapezoids(op, y, x, opts)
  check_tensor(op, y)
  if type(x) == "table" and not core.is_tensor(x) then x, opts = nil, x end
  opts = check_opts(op, opts, { dx = true, dim = true })
  local d = dim_of(op, y, opts.dim or -1)
  local n = y:dim() == 0 and 1 or y:size(d)
  if n <= 1 then return (y:dim() == 0 and y:reshape(1) or y):narrow(d, 1, 0), d end
  local mid = (y:narrow(d, 2, n - 1) + y:narrow(d, 1, n - 1)) / 2
  if x == nil then return mid * (opts.dx or 1), d end
  check_tensor(op, x, "x")
  local dx = x:dim() == 1 and core.diff(x) or core.diff(x, { dim = d })
  if x:dim() == 1 and y:dim() > 1 then
    local view = {}
    for i = 1, y:dim() do view[i] = i == d and n - 1 or 1 end
    dx = dx:reshape(view)
  end
  return mid * dx, d
end

-- ember.trapezoid(y [, x] [, {dx = 1, dim = -1}]): the trapezoidal rule
-- along dim, with sample points x (a tensor) or spacing dx (torch.trapezoid). Differentiable.
set("trapezoid", function(y, x, opts)
  local t, d = trapezoids("trapezoid", y, x, opts)
  return t:sum(d)
end)
-- ember.cumulative_trapezoid(y [, x] [, {dx = 1, dim = -1}]): its running
-- sums, one element shorter than y along dim (torch.cumulative_trapezoid). Differentiable.
set("cumulative_trapezoid", function(y, x, opts)
  local t, d = trapezoids("cumulative_trapezoid", y, x, opts)
  return t:cumsum(d)
end)
set("trapz", function(...) return core.trapezoid(...) end)

-- ember.vander(x [, n = #x [, {increasing = false}]]): columns of powers
-- of the 1-d x, highest first (torch.vander). Differentiable.
set("vander", function(x, n, opts)
  local op = "vander"
  check_tensor(op, x)
  if type(n) == "table" then n, opts = nil, n end
  opts = check_opts(op, opts, { increasing = true })
  if x:dim() ~= 1 then fail(op, "x must be 1-d, got %s", shape_str(x)) end
  n = n or x:size(1)
  if math.type(n) ~= "integer" or n < 0 then fail(op, "n must be an integer >= 0, got %s", tostring(n)) end
  if n == 0 then return core.zeros({ x:size(1), 0 }, { dtype = x.dtype, device = x.device }) end
  local cols = { core.ones({ x:size(1), 1 }, { dtype = x.dtype, device = x.device }) }
  if n > 1 then cols[2] = x:unsqueeze(2):expand(x:size(1), n - 1) end
  local r = core.cat(cols, 2):cumprod(2)
  return opts.increasing and r or r:flip(2)
end)

-- ember.combinations(x [, r = 2 [, {with_replacement = false}]]): the
-- r-element combinations of the 1-d x as rows, in lexicographic order of
-- positions (torch.combinations). Differentiable.
set("combinations", function(x, r, opts)
  local op = "combinations"
  check_tensor(op, x)
  if type(r) == "table" then r, opts = nil, r end
  opts = check_opts(op, opts, { with_replacement = true })
  if x:dim() ~= 1 then fail(op, "x must be 1-d, got %s", shape_str(x)) end
  r = r or 2
  if math.type(r) ~= "integer" or r < 0 then fail(op, "r must be an integer >= 0, got %s", tostring(r)) end
  local n, rep, idx, cur = x:size(1), opts.with_replacement == true, {}, {}
  local function walk(k, from)
    if k > r then
      for i = 1, r do idx[#idx + 1] = cur[i] end
      return
    end
    for i = from, n do
      cur[k] = i
      walk(k + 1, rep and i or i + 1)
    end
  end
  if r > 0 then walk(1, 1) end
  if #idx == 0 then return core.zeros(r == 0 and { 0 } or { 0, r }, { dtype = x.dtype, device = x.device }) end
  return x:index_select(1, core.tensor(idx, { dtype = "int64", device = x.device })):reshape(-1, r)
end)

-- ember.gcd(a, b) / lcm: elementwise, of int64 tensors (broadcast; b may be a number), non-negative (torch.gcd).
local function gcd1(a, b)
  a, b = math.abs(a), math.abs(b)
  while b ~= 0 do a, b = b, a % b end
  return a
end
local function int_pair(op, fn)
  return function(a, b)
    check_tensor(op, a)
    if math.type(b) == "integer" then b = core.full({}, b, { dtype = "int64", device = a.device }) end
    check_tensor(op, b, "other")
    if a.dtype ~= "int64" or b.dtype ~= "int64" then fail(op, "expects int64 tensors, got %s and %s", a.dtype, b.dtype) end
    local ok, shape = pcall(core.broadcast_shapes, a.shape, b.shape)
    if not ok then fail(op, "shapes %s and %s do not broadcast", shape_str(a), shape_str(b)) end
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    if n == 0 then return core.zeros(shape, { dtype = "int64", device = a.device }) end
    local av = a:expand(shape):reshape(-1):totable()
    local bv = b:expand(shape):reshape(-1):totable()
    for i = 1, n do av[i] = fn(av[i], bv[i]) end
    return core.tensor(av, { dtype = "int64", device = a.device }):reshape(shape)
  end
end
set("gcd", int_pair("gcd", gcd1), true)
set("lcm", int_pair("lcm", function(a, b)
  local g = gcd1(a, b)
  return g == 0 and 0 or math.abs(a // g * b)
end), true)

-- x:renorm(p, dim, maxnorm): each slice along dim whose p-norm exceeds
-- maxnorm scaled down to it, by maxnorm / (norm + 1e-7) as torch.renorm. Differentiable.
set("renorm", function(x, p, dim, maxnorm)
  local op = "renorm"
  check_tensor(op, x)
  if not x:is_floating_point() then fail(op, "expected a float tensor, got %s", x.dtype) end
  if type(p) ~= "number" or p <= 0 then fail(op, "p must be a number > 0, got %s", tostring(p)) end
  if type(maxnorm) ~= "number" or maxnorm < 0 then fail(op, "maxnorm must be a number >= 0, got %s", tostring(maxnorm)) end
  if x:dim() < 2 then fail(op, "x needs at least 2 dims, got %s", shape_str(x)) end
  local d = dim_of(op, x, dim)
  local others = {}
  for i = 1, x:dim() do if i ~= d then others[#others + 1] = i end end
  local norm = x:norm(p, others, true)
  return x * core.where(norm:gt(maxnorm), maxnorm / (norm + 1e-7), full_like(norm, 1))
end, true)

-- x:put(index, source [, accumulate = false]): x (a copy) with x's
-- flattened elements at the 1-based positions index set to (or, with
-- accumulate, increased by) source's (torch.Tensor.put). Differentiable.
set("put", function(x, index, source, accumulate)
  local op = "put"
  check_tensor(op, x)
  check_tensor(op, source, "source")
  if not core.is_tensor(index) or index.dtype ~= "int64" then fail(op, "index must be an int64 tensor of 1-based positions") end
  if index:numel() ~= source:numel() then
    fail(op, "index %s and source %s must have as many elements", shape_str(index), shape_str(source))
  end
  local flat, i, s = x:reshape(-1), index:reshape(-1), source:reshape(-1):to(x.dtype)
  if i:numel() > 0 then
    local lo, hi = i:min():item(), i:max():item()
    if lo < -x:numel() or hi > x:numel() or lo == 0 or hi == 0 then
      fail(op, "index values must be in 1..%d (or -%d..-1), got %d..%d", x:numel(), x:numel(), lo, hi)
    end
    i = core.where(i:lt(0), i + (x:numel() + 1), i)
  end
  local r = accumulate and flat:index_add(1, i, s) or flat:index_copy(1, i, s)
  return r:reshape(x.shape)
end, true)

-- ---- torch's aliases and small predicates -------------------------------------------------------

-- greater / greater_equal / less / less_equal / not_equal: torch's names of gt, ge, lt, le, ne.
for alias, name in pairs { greater = "gt", greater_equal = "ge", less = "lt", less_equal = "le", not_equal = "ne" } do
  set(alias, function(a, b) check_tensor(alias, a); return a[name](a, b) end, true)
end
set("positive", function(x) return check_tensor("positive", x) end, true) -- x itself, as torch.positive
-- ember.rsub(x, other [, {alpha = 1}]): other - alpha x (torch.rsub).
set("rsub", function(x, other, opts)
  check_tensor("rsub", x)
  opts = check_opts("rsub", opts, { alpha = true })
  return core.sub(other, (opts.alpha or 1) == 1 and x or x * opts.alpha)
end)
set("is_signed", function(x) return check_tensor("is_signed", x).dtype ~= "bool" end, true)
set("is_complex", function(x) check_tensor("is_complex", x); return false end, true) -- ember has no complex dtypes
set("isreal", function(x) -- every element of a real tensor is real
  check_tensor("isreal", x)
  return core.ones(x.shape, { dtype = "bool", device = x.device })
end, true)
-- x:is_nonzero(): the one element of x as a boolean (torch.Tensor.is_nonzero).
set("is_nonzero", function(x)
  check_tensor("is_nonzero", x)
  if x:numel() ~= 1 then fail("is_nonzero", "x must have exactly one element, got %s", shape_str(x)) end
  return x:reshape({}):item() ~= 0
end, true)

-- x:sum_to_size(size...): x summed down to a shape it broadcasts from (torch.Tensor.sum_to_size). Differentiable.
set("sum_to_size", function(x, ...)
  local op = "sum_to_size"
  check_tensor(op, x)
  local shape = select("#", ...) == 1 and type((...)) == "table" and { table.unpack((...)) } or { ... }
  local lead = x:dim() - #shape
  local ok = lead >= 0
  for i = 1, #shape do
    local n, m = shape[i], ok and x:size(lead + i)
    if math.type(n) ~= "integer" then fail(op, "size %d must be an integer, got %s", i, tostring(n)) end
    ok = ok and (n == m or n == 1)
  end
  if not ok then fail(op, "x %s cannot be summed to the size [%s]", shape_str(x), table.concat(shape, ", ")) end
  local dims = {}
  for i = 1, lead do dims[#dims + 1] = i end
  for i = 1, #shape do if shape[i] == 1 and x:size(lead + i) ~= 1 then dims[#dims + 1] = lead + i end end
  local y = #dims > 0 and x:sum(dims, true) or x
  return y:reshape(shape)
end, true)
