-- ember/_helpers.lua: PyTorch's everyday tensor helpers, built from core
-- ops so that autograd, every dtype and every backend come for free:
-- triu/tril, eye, linspace, randint, *_like, sort/argsort/topk, std, norm,
-- all/any, isnan/isinf/isfinite, equal/isclose/allclose, prod, cumsum/cumprod,
-- repeat_interleave, masked_select, flip, roll,
-- mm/dot/outer, square, reciprocal, logsumexp, amax/amin, unbind, tile,
-- uniform_/normal_ (Torch7's table indexing t[{i, {a, b}, {}}] is _indexing.lua).
-- init.lua loads it; each helper is both a tensor method (x:triu(1)) and a
-- function (ember.triu(x, 1)), and so are the everyday C methods (ember.exp).
--
-- Only the index computations of sort and masked_select are C
-- (ember._argsort, ember._nonzero_flat in core/lua/l_sort.c); the values
-- and their gradients come from gather and index_select. Dims, indices and
-- returned indices are 1-based, as everywhere in the Lua API.
--
-- Errors are raised at the caller's line: every public function runs
-- through `guard` (ember._errors.wrap).
local core = require "ember.core"
local T = core.Tensor -- the tensor methods table

local M = {}

-- Errors (ours, and those of the C ops we call) move to the user's line.
local guard = require("ember._errors").wrap
M.guard = guard

local function fail(op, fmt, ...)
  error(("ember.%s: " .. fmt):format(op, ...), 0)
end

-- v as an integer when it is a number of integral value (3.0 is 3, as the
-- binding's shapes take it; a string is not a number here), else nil.
local function int_value(v)
  return type(v) == "number" and math.tointeger(v) or nil
end

local function check_tensor(op, x, what)
  if not core.is_tensor(x) then
    if what == nil and (x == nil or type(x) == "number") then -- x.f() for x:f(), the usual slip
      fail(op, "argument 1 must be a tensor, got %s (call tensor methods with a colon: x:%s(...), not x.%s(...))",
        type(x), op, op)
    end
    fail(op, "%s must be a tensor, got %s", what or "argument 1", type(x))
  end
  return x
end

-- A user's 1-based dim (negative from the end) as a positive 1-based dim;
-- a 0-d x has dim 1 (or -1), as torch's dim 0 of a scalar. The one check of
-- the Lua ops (_functional and _compat use it too).
local function check_dim(op, x, d)
  local n = x:dim()
  local di = math.tointeger(d) -- 2.0 is 2
  if not di then fail(op, "dim must be an integer, got %s", type(d) == "number" and tostring(d) or type(d)) end
  d = di
  local lo = n == 0 and -1 or -n
  local hi = n == 0 and 1 or n
  if d == 0 then fail(op, "dim 0 is not a dim: dims are 1-based (1 is the first, -1 the last)") end
  if d < lo or d > hi then
    fail(op, "dim %d is out of range for a tensor with %d dims (expected %d..%d or -%d..-1)", d, n, 1,
      hi, hi)
  end
  if n == 0 then return 1 end
  return d < 0 and n + 1 + d or d
end
M.check_dim = check_dim

-- The dim argument (nil, a dim or a list of dims) of an op composed of
-- another reduction (all, any, norm, std, nansum, ...), checked under the
-- op's own name: the inner sum's or var's error would name sum or var.
local function check_dims(op, x, dim)
  if type(dim) == "number" then check_dim(op, x, dim)
  elseif type(dim) == "table" then
    for _, d in ipairs(dim) do if type(d) == "number" then check_dim(op, x, d) end end
  end
end
M.check_dims = check_dims

-- Have tensors a and b the same shape (not merely broadcastable ones)?
function M.same_shape(a, b)
  if a:dim() ~= b:dim() then return false end
  for i = 1, a:dim() do
    if a:size(i) ~= b:size(i) then return false end
  end
  return true
end

-- Creation options: a table {dtype=, device=, requires_grad=} or just a
-- dtype name ("int64" stands for {dtype = "int64"}), as the C creators take.
local function check_opts(op, opts)
  if type(opts) == "string" then return { dtype = opts } end
  if opts ~= nil and type(opts) ~= "table" then
    fail(op, "expected an options table {dtype=, device=, requires_grad=} or a dtype name, got %s", type(opts))
  end
  for k in pairs(opts or {}) do -- a misspelt option is refused, as the C creators do
    if k ~= "dtype" and k ~= "device" and k ~= "requires_grad" then
      fail(op, "unknown option '%s' (options are: dtype, device, requires_grad)", tostring(k))
    end
  end
  return opts or {}
end
M.creation_opts = check_opts

local function opts_like(x, opts, op)
  opts = check_opts(op, opts)
  return { dtype = opts.dtype or x.dtype, device = opts.device or x.device,
           requires_grad = opts.requires_grad }
end

local function set(name, fn, method)
  local g = guard(fn)
  M[name] = g
  core[name] = g
  if method then T[name] = g end
end

-- Shared with ember/_functional.lua, which adds functions the same way.
M.fail, M.check_tensor, M.set = fail, check_tensor, set

-- The value of x[key] = value, a tensor, in dtype and broadcast to the
-- indexed result's shape (a table), or PyTorch's error naming op.
function M.index_value(op, value, dtype, shape)
  local n, ok = value:dim(), value:dim() <= #shape
  for i = 0, ok and n - 1 or -1 do
    local s = value:size(n - i)
    ok = ok and (s == 1 or s == shape[#shape - i])
  end
  if not ok then
    fail(op, "shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of shape [%s]",
      require("ember._errors").shape_str(value), table.concat(shape, ", "))
  end
  return value:to(dtype):expand(shape)
end

-- The 1-based positions a user's int64 index tensor names along a dim of
-- size n, as x[i] counts them: -1 the last, -n the first (torch's negative
-- indices, x[idx] / index_put / take). Only a tensor holding negatives is
-- rewritten; one below -n is refused naming op (positions past n are left
-- to the op that reads them). `of` names what n counts (default "a dim of
-- size <n>").
function M.positions(op, idx, n, of)
  if idx:numel() == 0 then return idx end
  local neg = idx:lt(0)
  if not neg:any():item() then return idx end
  local lo = idx:min():item()
  if lo < -n then
    fail(op, "index %d is out of range for %s (1-based: 1..%d or -%d..-1)", lo, of or ("a dim of size " .. n), n, n)
  end
  return core.where(neg, idx + (n + 1), idx)
end

-- ---- triangles and eye ------------------------------------------------------

-- A bool [R, C] mask on x's device: col - row >= k (upper) or <= k (lower).
local function band_mask(x, k, upper)
  local R, C = x:size(-2), x:size(-1)
  local o = { dtype = "int64", device = x.device }
  local diff = core.arange(1, C + 1, o):view(1, C) - core.arange(1, R + 1, o):view(R, 1)
  return upper and diff:ge(k) or diff:le(k)
end

local function triangle(op, upper)
  return function(x, diagonal)
    check_tensor(op, x)
    if x:dim() < 2 then fail(op, "expected a tensor with at least 2 dims, got %d", x:dim()) end
    diagonal = diagonal or 0
    if math.type(diagonal) ~= "integer" then
      fail(op, "diagonal must be an integer, got %s", tostring(diagonal))
    end
    return core.where(band_mask(x, diagonal, upper), x, core.zeros({}, { dtype = x.dtype, device = x.device }))
  end
end
set("triu", triangle("triu", true), true)
set("tril", triangle("tril", false), true)

set("eye", function(n, m, opts)
  if type(m) == "table" or type(m) == "string" then m, opts = nil, m end
  m = m or n
  for _, v in ipairs { n or "nothing", m or "nothing" } do -- (ipairs would stop at a nil n)
    local vi = int_value(v)
    if not vi or vi < 0 then fail("eye", "sizes must be integers >= 0, got %s", tostring(v)) end
  end
  n, m = int_value(n), int_value(m)
  opts = check_opts("eye", opts)
  local o = { dtype = "int64", device = opts.device }
  local e = core.arange(1, n + 1, o):view(n, 1):eq(core.arange(1, m + 1, o):view(1, m))
  e = e:to(opts.dtype or core.get_default_dtype())
  if opts.requires_grad then e:requires_grad_(true) end
  return e
end)

-- ---- linspace and randint ------------------------------------------------------

local function check_number(op, v, what)
  if type(v) ~= "number" then fail(op, "%s must be a number, got %s", what, type(v)) end
  return v
end

-- steps values from start to stop inclusive, computed in float64 from the
-- nearer end as PyTorch does, then converted (default: ember.get_default_dtype()).
set("linspace", function(start, stop, steps, opts)
  check_number("linspace", start, "start")
  check_number("linspace", stop, "end")
  local steps_given = steps
  steps = int_value(steps)
  if not steps or steps < 0 then
    fail("linspace", "steps must be an integer >= 0, got %s", tostring(steps_given))
  end
  opts = check_opts("linspace", opts)
  local o = { dtype = "float64", device = opts.device }
  local ok, r = pcall(function() -- too many steps to allocate: arange's error, named here
    if steps <= 1 then return core.full({ steps }, start, o) end
    local step = (stop - start) / (steps - 1)
    local i = core.arange(0, steps, o)
    return core.where(i:lt(steps / 2), i * step + start, (i - (steps - 1)) * step + stop)
  end)
  if not ok then fail("linspace", "%s", require("ember._errors").strip_library_position(tostring(r))) end
  r = r:to(opts.dtype or core.get_default_dtype())
  if opts.requires_grad then r:requires_grad_(true) end
  return r
end)

-- Integers uniform in [low, high): randint(high, shape [, opts]) or
-- randint(low, high, shape [, opts]); int64 unless opts.dtype says otherwise.
set("randint", function(a, b, c, d)
  local low, high, shape, opts
  if type(b) == "number" then low, high, shape, opts = a, b, c, d else low, high, shape, opts = 0, a, b, c end
  for _, v in ipairs { { low, "low" }, { high, "high" } } do
    if math.type(v[1]) ~= "integer" then fail("randint", "%s must be an integer, got %s", v[2], tostring(v[1])) end
  end
  if high <= low then fail("randint", "high (%d) must be greater than low (%d)", high, low) end
  if type(shape) ~= "table" then fail("randint", "the shape must be a table like {2, 3}, got %s", type(shape)) end
  opts = check_opts("randint", opts)
  local u = core.rand(shape, { dtype = "float64", device = opts.device })
  local r = (u * (high - low)):long():minimum(core.full({}, high - low - 1, { dtype = "int64", device = u.device }))
  return (r + low):to(opts.dtype or "int64")
end)

-- randperm(n [, opts]): the C draw (int64), then opts' dtype, device and requires_grad.
local c_randperm = core.randperm
set("randperm", function(n, opts)
  opts = check_opts("randperm", opts)
  local r = c_randperm(n):to(opts.dtype or "int64"):to(opts.device or "cpu")
  if opts.requires_grad then r:requires_grad_(true) end
  return r
end)

-- ---- *_like -------------------------------------------------------------------

local function like(op, make)
  return function(x, ...)
    check_tensor(op, x)
    return make(x, ...)
  end
end
set("zeros_like", like("zeros_like", function(x, opts) return core.zeros(x.shape, opts_like(x, opts, "zeros_like")) end))
set("ones_like", like("ones_like", function(x, opts) return core.ones(x.shape, opts_like(x, opts, "ones_like")) end))
set("full_like", like("full_like", function(x, value, opts)
  if type(value) ~= "number" and type(value) ~= "boolean" then
    fail("full_like", "value must be a number, got %s", type(value))
  end
  if type(value) == "boolean" then value = value and 1 or 0 end
  return core.full(x.shape, value, opts_like(x, opts, "full_like"))
end))
set("rand_like", like("rand_like", function(x, opts) return core.rand(x.shape, opts_like(x, opts, "rand_like")) end))
set("randn_like", like("randn_like", function(x, opts) return core.randn(x.shape, opts_like(x, opts, "randn_like")) end))

-- ---- sorting --------------------------------------------------------------------

-- (values, indices) sorted along dim (default -1, the last), ascending
-- unless descending; stable: equal values keep their order. NaN is largest.
local function sort(x, dim, descending, ...)
  if select("#", ...) > 0 then core._noextra("sort", "dim, descending", 3, x, dim, descending, ...) end
  check_tensor("sort", x)
  if type(dim) == "boolean" then dim, descending = nil, dim end
  if x:dim() == 0 then return x:clone(), core.ones({}, { dtype = "int64", device = x.device }) end
  local d = check_dim("sort", x, dim or -1)
  local idx = core._argsort(x, d, descending)
  return x:gather(d, idx), idx
end
set("sort", sort, true)

set("argsort", function(x, dim, descending, ...)
  if select("#", ...) > 0 then core._noextra("argsort", "dim, descending", 3, x, dim, descending, ...) end
  check_tensor("argsort", x)
  if type(dim) == "boolean" then dim, descending = nil, dim end
  if x:dim() == 0 then return core.ones({}, { dtype = "int64", device = x.device }) end
  return core._argsort(x, check_dim("argsort", x, dim or -1), descending)
end, true)

-- x:topk(k [, dim=-1 [, largest=true [, sorted=true]]]) -> values, indices.
set("topk", function(x, k, dim, largest, sorted, ...)
  if select("#", ...) > 0 then core._noextra("topk", "k, dim, largest, sorted", 5, x, k, dim, largest, sorted, ...) end
  check_tensor("topk", x)
  if largest == nil then largest = true end
  local d = x:dim() == 0 and 1 or check_dim("topk", x, dim or -1)
  local n = x:dim() == 0 and 1 or x:size(d)
  if math.type(k) ~= "integer" or k < 0 or k > n then
    fail("topk", "k must be an integer in 0..%d (the size of dim %d), got %s", n, d, tostring(k))
  end
  if x:dim() == 0 then return x:clone(), core.ones({}, { dtype = "int64", device = x.device }) end
  local _ = sorted -- the k results always come sorted, which sorted=false allows too
  local idx = core._argsort(x, d, largest):narrow(d, 1, k)
  return x:gather(d, idx), idx
end, true)

-- ---- reductions -------------------------------------------------------------------

-- s^e (0 < e < 1) whose gradient is 0 where s is 0: a zero norm or
-- spread has a zero gradient, as torch's norm and std (not 0 * inf = NaN).
local function root(name)
  return core.Function {
    name = name,
    forward = function(ctx, s, e)
      local y = e == 0.5 and s:sqrt() or s ^ e
      ctx.e = e
      ctx:save_for_backward(s, y)
      return y
    end,
    backward = function(ctx, g)
      local s, y = table.unpack(ctx.saved)
      local d = g * y * ctx.e / s
      return core.where(s:eq(0), core.zeros({}, { dtype = d.dtype, device = d.device }), d)
    end,
  }
end
local NORM_ROOT, STD_ROOT = root("norm"), root("std")

set("std", function(x, ...)
  check_tensor("std", x)
  if not x:is_floating_point() then -- var's error would name var
    fail("std", "expected a float tensor, got %s %s (convert it first, e.g. x:double())", x.dtype,
      require("ember._errors").shape_str(x))
  end
  check_dims("std", x, (...))
  return STD_ROOT(x:var(...), 0.5)
end, true)

-- x:norm([p=2 [, dim [, keepdim]]]): the vector p-norm over all elements, or
-- along dim (a number or a table of dims; one dim for p = +-inf).
set("norm", function(x, p, dim, keepdim, ...)
  if select("#", ...) > 0 then core._noextra("norm", "p, dim, keepdim", 4, x, p, dim, keepdim, ...) end
  check_tensor("norm", x)
  if type(p) == "table" and getmetatable(p) == nil then -- x:norm{p =, dim =, keepdim =}, torch's keywords
    if dim ~= nil or keepdim ~= nil then fail("norm", "expected ({p =, dim =, keepdim =}) alone, got more arguments") end
    for k in pairs(p) do
      if k ~= "p" and k ~= "dim" and k ~= "keepdim" then fail("norm", "unknown option '%s' (expected p, dim, keepdim)", tostring(k)) end
    end
    p, dim, keepdim = p.p, p.dim, p.keepdim
  end
  if p == nil or p == "fro" then p = 2 end
  check_dims("norm", x, dim)
  if type(p) ~= "number" then fail("norm", "p must be a number, \"fro\", math.huge or -math.huge, got %s", tostring(p)) end
  if not core.Tensor.is_floating_point(x) then
    fail("norm", "expected a float tensor, got %s (convert with :double() or :float())", x.dtype)
  end
  local a = x:abs()
  -- +-inf: ties share the gradient (amax), as torch's
  if p == math.huge then return a:amax(dim, keepdim) end
  if p == -math.huge then return a:amin(dim, keepdim) end
  if p == 0 then return a:ne(0):to(x.dtype):sum(dim, keepdim) end
  if p == 1 then return a:sum(dim, keepdim) end
  if p == 2 then return NORM_ROOT((x * x):sum(dim, keepdim), 0.5) end
  if p > 0 then return NORM_ROOT((a ^ p):sum(dim, keepdim), 1 / p) end
  return (a ^ p):sum(dim, keepdim) ^ (1 / p)
end, true)

local function truth(x)
  if x.dtype == "bool" then return x end
  return x:ne(0)
end

-- x:all([dim [, keepdim]]) / x:any(...): bool, over everything or along dim.
set("all", function(x, dim, keepdim)
  check_tensor("all", x)
  check_dims("all", x, dim)
  return truth(x):logical_not():sum(dim, keepdim):eq(0)
end, true)
set("any", function(x, dim, keepdim)
  check_tensor("any", x)
  check_dims("any", x, dim)
  return truth(x):sum(dim, keepdim):gt(0)
end, true)

local function is_float(x) return x.dtype == "float32" or x.dtype == "float64" or x.dtype == "bfloat16" end
T.is_floating_point = function(x) return is_float(check_tensor("is_floating_point", x)) end

set("isnan", function(x)
  check_tensor("isnan", x)
  if not is_float(x) then return core.zeros(x.shape, { dtype = "bool", device = x.device }) end
  return x:ne(x)
end, true)
set("isinf", function(x)
  check_tensor("isinf", x)
  if not is_float(x) then return core.zeros(x.shape, { dtype = "bool", device = x.device }) end
  return x:abs():eq(math.huge)
end, true)
set("isfinite", function(x)
  check_tensor("isfinite", x)
  if not is_float(x) then return core.ones(x.shape, { dtype = "bool", device = x.device }) end
  return x:eq(x):logical_and(x:abs():ne(math.huge))
end, true)

-- ---- comparing whole tensors ------------------------------------------------------

-- ember.equal(a, b) / a:equal(b): whether a and b have the same shape and
-- the same elements (torch.equal; NaN equals nothing), as a Lua boolean.
set("equal", function(a, b)
  check_tensor("equal", a)
  check_tensor("equal", b, "argument 2")
  if a:dim() ~= b:dim() then return false end
  for i = 1, a:dim() do
    if a:size(i) ~= b:size(i) then return false end
  end
  return a:numel() == 0 or a:eq(b):all():item()
end, true)

-- The options of isclose and allclose: (rtol, atol, equal_nan) or a table.
local function close_opts(op, rtol, atol, equal_nan)
  if type(rtol) == "table" then
    local o = rtol
    for k in pairs(o) do
      if k ~= "rtol" and k ~= "atol" and k ~= "equal_nan" then
        fail(op, "unknown option '%s' (expected rtol, atol, equal_nan)", tostring(k))
      end
    end
    rtol, atol, equal_nan = o.rtol, o.atol, o.equal_nan
  end
  rtol, atol = rtol or 1e-5, atol or 1e-8
  if type(rtol) ~= "number" or not (rtol >= 0) then fail(op, "rtol must be a number >= 0, got %s", tostring(rtol)) end
  if type(atol) ~= "number" or not (atol >= 0) then fail(op, "atol must be a number >= 0, got %s", tostring(atol)) end
  return rtol, atol, equal_nan
end

-- Where |a - b| <= atol + rtol * |b| (broadcasting; equal infinities are
-- close, NaN only with equal_nan), compared in float64: a bool tensor.
local function isclose(op, a, b, rtol, atol, equal_nan)
  check_tensor(op, a)
  check_tensor(op, b, "argument 2")
  rtol, atol, equal_nan = close_opts(op, rtol, atol, equal_nan)
  local x, y = a:double(), b:double()
  -- torch's rule: equal, or a finite |a - b| within the bound (|a - b| is
  -- inf against an infinity, which rtol * inf would otherwise admit)
  local err = (x - y):abs()
  local close = err:isfinite():logical_and(err:le(y:abs() * rtol + atol)):logical_or(x:eq(y))
  if equal_nan then close = close:logical_or(x:ne(x):logical_and(y:ne(y))) end
  return close
end

-- ember.isclose(a, b [, rtol = 1e-5 [, atol = 1e-8 [, equal_nan = false]]])
-- or (a, b, {rtol =, atol =, equal_nan =}), and a:isclose(b, ...): the bool
-- tensor of where a and b are close, as torch.isclose.
set("isclose", function(a, b, rtol, atol, equal_nan)
  return isclose("isclose", a, b, rtol, atol, equal_nan)
end, true)

-- ember.allclose(a, b, ...) / a:allclose(b, ...): whether isclose holds
-- everywhere, as torch.allclose, as a Lua boolean.
set("allclose", function(a, b, rtol, atol, equal_nan)
  local close = isclose("allclose", a, b, rtol, atol, equal_nan)
  return close:numel() == 0 or close:all():item()
end, true)

-- ---- scans and rearrangements ---------------------------------------------------

-- A log-step (Hillis-Steele) scan along dim: y = y (+ or *) y shifted by k,
-- k = 1, 2, 4, ..., the shifted-in places holding the identity (0 or 1),
-- so the backward is autograd's (a product's too, zeros included); bool
-- counts as int64, as in PyTorch.
local function scan(op, x, dim, combine, identity)
  check_tensor(op, x)
  if dim == nil then fail(op, "dim is required (1-based; -1 is the last)") end
  if x.dtype == "bool" then x = x:long() end
  if x:dim() == 0 then check_dim(op, x, dim); return x:clone() end
  local d = check_dim(op, x, dim)
  local n = x:size(d)
  local y, k = x, 1
  while k < n do
    local shape = x:size()
    shape[d] = k
    local pad = core.full(shape, identity, { dtype = x.dtype, device = x.device })
    y = combine(y, core.cat({ pad, y:narrow(d, 1, n - k) }, d))
    k = k * 2
  end
  if rawequal(y, x) then y = x:clone() end
  return y
end

-- The (dim, opts) of op(x, dim [, opts]) or op(x, {dim =, dtype =}): torch's
-- dim= and dtype= keywords (softmax, cumsum, ...); a dtype name may stand
-- for opts, and a dtype converts x first. Returns x and dim.
function M.dim_and_dtype(op, x, dim, opts)
  if type(dim) == "table" and getmetatable(dim) == nil and dim[1] == nil then
    if opts ~= nil then fail(op, "expected (dim [, options]) or ({dim =, dtype =}), got two tables") end
    dim, opts = nil, dim
  end
  if opts == nil then return x, dim end
  local dt = opts
  if type(opts) == "table" then
    for k in pairs(opts) do
      if k ~= "dtype" and k ~= "dim" then fail(op, "unknown option '%s' (expected dim, dtype)", tostring(k)) end
    end
    if opts.dim ~= nil then
      if dim ~= nil then fail(op, "dim given twice (%s and dim = %s)", tostring(dim), tostring(opts.dim)) end
      dim = opts.dim
    end
    dt = opts.dtype
  end
  if dt ~= nil then
    if type(dt) ~= "string" then fail(op, "dtype must be a dtype name, got %s", type(dt)) end
    x = check_tensor(op, x):to(dt)
  end
  return x, dim
end

-- x:cumsum(dim), x:cumprod(dim): running sums and products along dim.
-- x:cumsum(dim [, {dtype =}]) or x:cumsum{dim =, dtype =}: a dtype (or a
-- dtype name) converts x first, as torch's dtype=.
set("cumsum", function(x, dim, opts)
  x, dim = M.dim_and_dtype("cumsum", x, dim, opts)
  return scan("cumsum", x, dim, function(a, b) return a + b end, 0)
end, true)
set("cumprod", function(x, dim, opts)
  x, dim = M.dim_and_dtype("cumprod", x, dim, opts)
  return scan("cumprod", x, dim, function(a, b) return a * b end, 1)
end, true)

-- x:prod([dim [, keepdim]]): the product of all elements (0-d), or along
-- dim, by halving (the two halves multiplied, an odd last slice carried),
-- so the gradient is autograd's, exact where elements are zero; bool
-- counts as int64, as in PyTorch.
set("prod", function(x, dim, keepdim)
  check_tensor("prod", x)
  if x.dtype == "bool" then x = x:long() end
  if dim == nil then
    -- an empty product is 1, still on x's graph (its gradient is empty), as torch's
    if x:numel() == 0 then return core.ones({}, { dtype = x.dtype, device = x.device }) + x:sum() * 0 end
    return core.prod(x:reshape(-1), 1)
  end
  if x:dim() == 0 then check_dim("prod", x, dim); return x:clone() end
  local d = check_dim("prod", x, dim)
  local y = x
  if y:size(d) == 0 then
    local shape = x:size()
    shape[d] = 1
    y = core.ones(shape, { dtype = x.dtype, device = x.device }) + x:sum(d, true) * 0
  end
  while y:size(d) > 1 do
    local m = y:size(d)
    local h = m // 2
    local half = y:narrow(d, 1, h) * y:narrow(d, h + 1, h)
    y = m % 2 == 1 and core.cat({ half, y:narrow(d, m, 1) }, d) or half
  end
  if rawequal(y, x) then y = x:clone() end
  if not keepdim then y = y:squeeze(d) end
  return y
end, true)

-- x:repeat_interleave(repeats [, dim]): each slice along dim repeated
-- `repeats` times (an integer, or a 1-d int64 tensor or list with one count
-- per slice), as torch.repeat_interleave; without dim, of x flattened.
-- An index_select, so the gradient sums the copies.
set("repeat_interleave", function(x, repeats, dim)
  check_tensor("repeat_interleave", x)
  if dim == nil then x, dim = x:reshape(-1), 1 end
  local d = check_dim("repeat_interleave", x, dim)
  local n = x:size(d)
  local counts = {}
  if math.type(repeats) == "integer" then
    if repeats < 0 then fail("repeat_interleave", "repeats must be >= 0, got %d", repeats) end
    for i = 1, n do counts[i] = repeats end
  else
    if core.is_tensor(repeats) then
      if repeats.dtype ~= "int64" or repeats:dim() > 1 then
        fail("repeat_interleave", "repeats must be an integer or a 1-d int64 tensor, got a %d-d %s tensor",
          repeats:dim(), repeats.dtype)
      end
      repeats = repeats:dim() == 0 and { repeats:item() } or repeats:totable()
    end
    if type(repeats) ~= "table" then
      fail("repeat_interleave", "repeats must be an integer, a list or a 1-d int64 tensor, got %s", type(repeats))
    end
    if #repeats == 1 then for i = 1, n do counts[i] = repeats[1] end else counts = repeats end
    if #counts ~= n then
      fail("repeat_interleave", "repeats has %d counts for %d slices along dim %d", #counts, n, d)
    end
  end
  -- the total is checked before anything is built (a Lua list of the
  -- indices hung on repeats = 2^62); the indices are the slice each
  -- position falls in, found in the counts' running sums
  local total, ends = 0, {}
  for i, c in ipairs(counts) do
    if math.type(c) ~= "integer" or c < 0 then
      fail("repeat_interleave", "repeats must hold integers >= 0, got %s", tostring(c))
    end
    if c > (1 << 40) - total then
      fail("repeat_interleave", "repeats add up to more than 2^40 slices along dim %d", d)
    end
    total = total + c
    ends[i] = total
  end
  if total == 0 then
    local shape = x:size()
    shape[d] = 0
    return core.zeros(shape, { dtype = x.dtype, device = x.device })
  end
  local ok, idx = pcall(function()
    local opts = { dtype = "int64", device = x.device }
    return core.searchsorted(core.tensor(ends, opts), core.arange(1, total + 1, opts))
  end)
  if not ok then fail("repeat_interleave", "%s", require("ember._errors").strip_library_position(tostring(idx))) end
  return x:index_select(d, idx)
end, true)

local function broadcast_shape(op, a, b)
  local na, nb = #a, #b
  local n = math.max(na, nb)
  local out = {}
  for i = 1, n do
    local x = a[na - n + i] or 1
    local y = b[nb - n + i] or 1
    if x ~= y and x ~= 1 and y ~= 1 then
      fail(op, "shapes %s and %s do not broadcast", tostring(a), tostring(b))
    end
    out[i] = (x == 1) and y or x
  end
  return out
end

-- x:masked_select(mask) -> 1-d: the elements where mask (bool, broadcast
-- with x) is true, in row-major order.
set("masked_select", function(x, mask)
  check_tensor("masked_select", x)
  check_tensor("masked_select", mask, "mask")
  if mask.dtype ~= "bool" then fail("masked_select", "mask must be a bool tensor, got %s", mask.dtype) end
  local shape = broadcast_shape("masked_select", x.shape, mask.shape)
  local pos = core._nonzero_flat(mask:expand(shape))
  return x:expand(shape):reshape(-1):index_select(1, pos)
end, true)

local function dim_list(op, x, dims)
  if type(dims) == "number" then dims = { dims } end
  if type(dims) ~= "table" or #dims == 0 then
    fail(op, "dims must be a dim or a table of dims, got %s", type(dims) == "table" and "an empty table" or type(dims))
  end
  local out, seen = {}, {}
  for i, d in ipairs(dims) do
    out[i] = check_dim(op, x, d)
    if seen[out[i]] then fail(op, "dim %d appears twice", out[i]) end
    seen[out[i]] = true
  end
  return out
end

-- x:flip(dims): reverses the order along each of dims.
set("flip", function(x, dims)
  check_tensor("flip", x)
  if type(dims) == "table" and next(dims) == nil then return x:clone() end -- torch's flip(()): no dims, a copy
  if x:dim() == 0 then dim_list("flip", x, dims); return x:clone() end
  local y = x
  for _, d in ipairs(dim_list("flip", x, dims)) do
    local n = x:size(d)
    if n > 1 then y = y:index_select(d, core.arange(n, 0, -1, { dtype = "int64", device = x.device })) end
  end
  if rawequal(y, x) then y = x:clone() end
  return y
end, true)

-- x:roll(shifts [, dims]): elements shifted by shifts[i] along dims[i]
-- (wrapping around); without dims, x is flattened, rolled and reshaped.
set("roll", function(x, shifts, dims)
  check_tensor("roll", x)
  if dims == nil then
    if type(shifts) ~= "number" then fail("roll", "without dims, shifts must be one number, got %s", type(shifts)) end
    if x:dim() == 0 then return x:clone() end
    return M.roll(x:reshape(-1), shifts, 1):reshape(x.shape)
  end
  if type(shifts) == "number" then shifts = { shifts } end
  local ds = dim_list("roll", x, dims)
  if type(shifts) ~= "table" or #shifts ~= #ds then
    fail("roll", "shifts and dims must have the same length, got %d and %d",
      type(shifts) == "table" and #shifts or 0, #ds)
  end
  local y = x
  for i, d in ipairs(ds) do
    local s = shifts[i]
    if math.type(s) ~= "integer" then fail("roll", "shifts must be integers, got %s", tostring(s)) end
    local n = x:dim() == 0 and 1 or x:size(d) -- a 0-d x's dim 1 has one element (check_dim)
    s = n > 0 and s % n or 0
    if s ~= 0 then y = core.cat({ y:narrow(d, n - s + 1, s), y:narrow(d, 1, n - s) }, d) end
  end
  if rawequal(y, x) then y = x:clone() end
  return y
end, true)

-- ---- products and small conveniences -------------------------------------------------

local shape_str = require("ember._errors").shape_str

local function check_ndim(op, x, n, what)
  check_tensor(op, x, what)
  if x:dim() ~= n then fail(op, "%s must have %d dims, got shape %s", what, n, shape_str(x)) end
end

-- torch.mm: matmul without broadcasting, for exactly 2-d tensors.
-- The products (mm, dot, outer; matmul and bmm in C) refuse a third
-- argument: Torch7's result-first res:mm(a, b) would be res @ a here.
set("mm", function(a, b, ...)
  if select("#", ...) > 0 then core._noextra("mm", "mat2", 2, a, b, ...) end
  check_ndim("mm", a, 2, "argument 1")
  check_ndim("mm", b, 2, "argument 2")
  if a:size(2) ~= b:size(1) then fail("mm", "shapes %s and %s cannot be multiplied", shape_str(a), shape_str(b)) end
  return a:matmul(b)
end, true)
T.bmm = core.bmm -- the C op ember.bmm, as a method too

set("dot", function(a, b, ...)
  if select("#", ...) > 0 then core._noextra("dot", "other", 2, a, b, ...) end
  check_ndim("dot", a, 1, "argument 1")
  check_ndim("dot", b, 1, "argument 2")
  if a:size(1) ~= b:size(1) then fail("dot", "lengths differ: %d and %d", a:size(1), b:size(1)) end
  return (a * b):sum()
end, true)
set("outer", function(a, b, ...)
  if select("#", ...) > 0 then core._noextra("outer", "vec2", 2, a, b, ...) end
  check_ndim("outer", a, 1, "argument 1")
  check_ndim("outer", b, 1, "argument 2")
  return a:view(a:size(1), 1) * b:view(1, b:size(1))
end, true)

set("square", function(x) return check_tensor("square", x) * x end, true)
-- 1 / x; an integer tensor gives the default dtype (float32), as in PyTorch.
set("reciprocal", function(x)
  check_tensor("reciprocal", x)
  if not is_float(x) then x = x:to(core.get_default_dtype()) end
  return x:pow(-1)
end, true)

-- log(sum(exp(x))) along dim, shifted by the (detached) max so that large
-- values do not overflow; a slice of -inf gives -inf, an empty one too.
set("logsumexp", function(x, dim, keepdim)
  check_tensor("logsumexp", x)
  if dim == nil then fail("logsumexp", "dim is required (1-based; -1 is the last)") end
  -- dim: one, or a table of dims (torch's tuple)
  local d = {}
  for i, v in ipairs(type(dim) == "table" and dim or { dim }) do d[i] = check_dim("logsumexp", x, v) end
  if #d == 0 then fail("logsumexp", "dim is required (1-based; -1 is the last)") end
  local m = x:detach()
  if m:numel() == 0 then -- nothing to shift by: an empty slice sums to 0, log 0 = -inf (torch's)
    local shape = {}
    for i = 1, x:dim() do shape[i] = x:size(i) end
    for _, v in ipairs(d) do shape[v] = 1 end
    m = core.zeros(shape, { dtype = m.dtype, device = m.device })
  else
    for _, v in ipairs(d) do m = m:max(v, true) end
  end
  m = core.where(m:isfinite(), m, core.zeros({}, { dtype = m.dtype, device = m.device }))
  local r = (x - m):exp():sum(d, true):log() + m
  if not keepdim and x:dim() > 0 then -- (a 0-d x reduces to 0-d, as torch's)
    table.sort(d, function(a, b) return a > b end)
    for _, v in ipairs(d) do r = r:squeeze(v) end
  end
  return r
end, true)

-- The values of max / min over dims (kept), the gradient shared evenly by
-- the elements equal to the result (NaN equal to a NaN result), as
-- torch.amax's (max(dim)'s goes to the one index it returns).
local function extreme_dims(name, is_max)
  return core.Function {
    name = name,
    forward = function(ctx, x, dims, keepdim)
      local y = x
      for _, d in ipairs(dims) do y = (is_max and y:max(d, true) or y:min(d, true)) end
      ctx.dims = dims
      ctx:save_for_backward(x, y)
      if keepdim then return y end
      for i = #dims, 1, -1 do y = y:squeeze(dims[i]) end
      return y
    end,
    backward = function(ctx, g)
      local x, y = table.unpack(ctx.saved)
      local mask = x:eq(y):logical_or(x:ne(x):logical_and(y:ne(y))):to(x.dtype)
      return mask * (g:view(y.shape) / mask:sum(ctx.dims, true))
    end,
  }
end
local AMAX, AMIN = extreme_dims("amax", true), extreme_dims("amin", false)

-- x:amax([dim [, keepdim]]): the largest values over dim, a table of dims,
-- or all (torch.amax); amin the smallest.
local function amax_amin(op, f, x, dim, keepdim)
  check_tensor(op, x)
  if dim == nil then
    if x:numel() == 0 then fail(op, "the tensor is empty (%s %s): give a dim to reduce", x.dtype, shape_str(x)) end
    return op == "amax" and x:max() or x:min()
  end
  local dims, seen = {}, {}
  for _, d in ipairs(type(dim) == "table" and dim or { dim }) do
    d = check_dim(op, x, d)
    if seen[d] then fail(op, "dim %d repeated", d) end
    if x:dim() > 0 and x:size(d) == 0 then
      fail(op, "cannot reduce over dim %d of size 0 (input %s %s)", d, x.dtype, shape_str(x))
    end
    seen[d] = true
    dims[#dims + 1] = d
  end
  if x:dim() == 0 then return x:clone() end -- over torch's dim 0 of a scalar: itself
  table.sort(dims)
  return f(x, dims, keepdim == true)
end
set("amax", function(x, dim, keepdim) return amax_amin("amax", AMAX, x, dim, keepdim) end, true)
set("amin", function(x, dim, keepdim) return amax_amin("amin", AMIN, x, dim, keepdim) end, true)

-- the slices along dim (default 1), as a list of views
set("unbind", function(x, dim)
  check_tensor("unbind", x)
  local d = check_dim("unbind", x, dim or 1)
  local out = {}
  for i = 1, x:size(d) do out[i] = x:select(d, i) end
  return out
end, true)

-- x repeated reps[i] times along each dim (torch.tile; Torch7's
-- repeatTensor): more reps than dims prepend dims of size 1.
-- The repeats of tile and repeat, integers >= 0 (2.0 is 2), in a new list;
-- errors name op.
local function check_reps(op, reps)
  local out = {}
  for i, r in ipairs(reps) do
    out[i] = int_value(r)
    if not out[i] or out[i] < 0 then fail(op, "repeat %d must be an integer >= 0, got %s", i, tostring(r)) end
  end
  return out
end

set("tile", function(x, ...)
  check_tensor("tile", x)
  local reps = check_reps("tile", select("#", ...) == 1 and type((...)) == "table" and (...) or { ... })
  local n = math.max(#reps, x:dim())
  local shape, full = {}, {}
  for i = 1, n do
    shape[i] = i <= n - x:dim() and 1 or x:size(i - (n - x:dim()))
    full[i] = i <= n - #reps and 1 or reps[i - (n - #reps)]
  end
  local inter, expanded, out = {}, {}, {}
  for i = 1, n do
    inter[2 * i - 1], inter[2 * i] = 1, shape[i]
    expanded[2 * i - 1], expanded[2 * i] = full[i], shape[i]
    out[i] = full[i] * shape[i]
  end
  return x:reshape(inter):expand(expanded):reshape(out)
end, true)

-- x["repeat"](x, 2, 3) / x:repeatTensor(2, 3): PyTorch's Tensor.repeat (Lua
-- reserves the name; Torch7's repeatTensor): tile with at least x:dim() repeats.
local function repeat_(op)
  return function(x, ...)
    check_tensor(op, x)
    local reps = check_reps(op, select("#", ...) == 1 and type((...)) == "table" and (...) or { ... })
    if #reps < x:dim() then
      fail(op, "the number of repeats (%d) can not be smaller than the number of dims of the tensor (%d)",
        #reps, x:dim())
    end
    return x:tile(reps)
  end
end
set("repeat", repeat_("repeat"), true)
set("repeatTensor", repeat_("repeatTensor"), true)

T.expand_as = guard(function(x, other) return x:expand(check_tensor("expand_as", other, "argument 2").shape) end)
T.view_as = guard(function(x, other) return x:view(check_tensor("view_as", other, "argument 2").shape) end)
T.type_as = guard(function(x, other) return x:to(check_tensor("type_as", other, "argument 2").dtype) end)
T.nelement = guard(function(x) return check_tensor("nelement", x):numel() end) -- torch's name (Torch7's nElement)

-- in-place random fills for initialising weights (torch.nn.init's), with
-- autograd off so that a parameter can be filled
local function fill_random(op, x, make, a, b)
  check_tensor(op, x)
  if not is_float(x) then fail(op, "needs a floating-point tensor, got %s", x.dtype) end
  core.no_grad(function() x:copy_(make(x.shape, { dtype = x.dtype, device = x.device }) * b + a) end)
  return x
end
T.uniform_ = guard(function(x, a, b)
  a, b = a or 0, b or 1
  if type(a) ~= "number" or type(b) ~= "number" or not (a <= b) then
    fail("uniform_", "expected numbers a <= b, got %s and %s", tostring(a), tostring(b))
  end
  return fill_random("uniform_", x, core.rand, a, b - a)
end)
T.normal_ = guard(function(x, mean, std)
  mean, std = mean or 0, std or 1
  if type(mean) ~= "number" or type(std) ~= "number" or not (std >= 0) then
    fail("normal_", "expected a number mean and std >= 0, got %s and %s", tostring(mean), tostring(std))
  end
  return fill_random("normal_", x, core.randn, mean, std)
end)

-- ---- ember.<op>(x, ...) -----------------------------------------------------------

-- PyTorch (torch.exp(x)) and Torch7 offer most tensor methods as functions
-- too: ember.exp(x) is x:exp(), the very same function, so help() shows
-- the method's entry (lua/ember/_doc.lua).
local FUNCTIONAL = {
  "abs", "add", "sub", "mul", "div", "pow", "neg", "exp", "log", "log1p", "expm1", "erf", "sqrt", "rsqrt", "sin", "cos",
  "atan", "asin", "acos", "erfinv", "lgamma", "digamma",
  "tanh", "sigmoid", "relu", "gelu", "silu", "elu", "clamp", "maximum", "minimum",
  "floor", "ceil", "round", "trunc", "sign",
  "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
  "sum", "mean", "var", "max", "min", "argmax", "argmin", "numel",
  "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "t", "narrow", "select",
  "split", "chunk", "gather", "index_select", "scatter_add", "masked_fill", "clone", "detach",
}
for _, k in ipairs(FUNCTIONAL) do
  if core[k] == nil and T[k] ~= nil then core[k] = T[k] end
end

return M
