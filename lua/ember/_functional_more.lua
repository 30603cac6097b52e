-- ember/_functional_more.lua: the tensor functions a PyTorch user types
-- without thinking, composed from core ops (autograd, every dtype and every
-- backend come for free), each a function (ember.lerp(a, b, w)) and, where
-- PyTorch has one, a tensor method (a:lerp(b, w)):
--   elementwise: clamp (tensor bounds too), clamp_min, clamp_max, logit,
--     lerp, addcmul, addcdiv, exp2, log2, log10, sinh, cosh, tan, xlogy,
--     remainder, fmod, floor_divide, nan_to_num;
--   matrices and shapes: diag, trace, diff, mv, movedim/moveaxis,
--     swapaxes/swapdims, broadcast_to, hstack, vstack, dstack, tensor_split,
--     count_nonzero;
--   searching and counting (not differentiable; _searching.lua, which this
--     file loads): nonzero, argwhere, unique, bincount, searchsorted, bucketize.
-- Dims and returned indices are 1-based, as everywhere in the Lua API;
-- keyword arguments come as an options table. _functional.lua loads it.
-- Errors are raised at the caller's line, naming the function.
local core = require "ember.core"
local helpers = require "ember._helpers"
local F = require "ember._functional"
local shape_str = require("ember._errors").shape_str

local T = core.Tensor
local fail, check_tensor, set = helpers.fail, helpers.check_tensor, helpers.set
local check_opts, check_dim, check_number = F.check_opts, F.check_dim, F.check_number
local broadcast_shapes = F.broadcast_shapes

local FLOATS = { float32 = true, float64 = true, bfloat16 = true }
local LN2, LN10 = math.log(2), math.log(10)

-- int64 and bool tensors compute in the default dtype (float32), as PyTorch's float functions do.
local function floating(x)
  if FLOATS[x.dtype] then return x end
  return x:to(core.get_default_dtype())
end

-- A tensor or a number operand of a binary function; at least one of the
-- pair must be a tensor.
local function tensor_or_number(op, a, b)
  local ta, tb = core.is_tensor(a), core.is_tensor(b)
  if not (ta or type(a) == "number") then fail(op, "argument 1 must be a tensor or a number, got %s", type(a)) end
  if not (tb or type(b) == "number") then fail(op, "argument 2 must be a tensor or a number, got %s", type(b)) end
  if not (ta or tb) then fail(op, "one of the arguments must be a tensor, got two numbers") end
  return ta and a or b
end

-- ---- clamp with tensor bounds, clamp_min, clamp_max -------------------------------

local c_clamp = T.clamp -- the C op: number bounds

local function clamp(op, x, lo, hi)
  check_tensor(op, x)
  for _, b in ipairs { { lo, "min" }, { hi, "max" } } do
    if b[1] ~= nil and type(b[1]) ~= "number" and not core.is_tensor(b[1]) then
      fail(op, "%s must be a number, a tensor or nil, got %s", b[2], type(b[1]))
    end
  end
  -- the core's clamp is float-only: an int64 or bool x is composed too, where
  -- maximum/minimum give PyTorch's dtypes (int64 with integer bounds, float32
  -- with a Lua float bound: clamp(int64, 2.5, 6) is [2.5, 5, 6])
  local composed = x.dtype == "int64" or x.dtype == "bool"
  if core.is_tensor(lo) or core.is_tensor(hi) then -- checked here: the composition's errors would name maximum
    local shapes, names = { x.shape }, { "input" }
    if core.is_tensor(lo) then shapes[#shapes + 1], names[#shapes + 1] = lo.shape, "min" end
    if core.is_tensor(hi) then shapes[#shapes + 1], names[#shapes + 1] = hi.shape, "max" end
    broadcast_shapes(op, shapes, names)
  end
  if not composed and not core.is_tensor(lo) and not core.is_tensor(hi) then return c_clamp(x, lo, hi) end
  -- tensor bounds broadcast: torch.clamp is min(max(x, lo), hi) (a NaN bound
  -- gives NaN); a float x takes torch's gradient rule, each element's
  -- gradient going to the one that wins: x where lo <= x <= hi, lo where
  -- x < lo < hi, hi where x > hi or lo > hi (none where x < lo = hi, or NaN)
  if not composed then
    local function t(b)
      if b == nil or core.is_tensor(b) then return b end
      return core.full({}, b, { dtype = x.dtype, device = x.device })
    end
    lo, hi = t(lo), t(hi)
    local v = x:detach()
    if lo then v = v:maximum(lo:detach()) end
    if hi then v = v:minimum(hi:detach()) end
    local mx, ml, mh
    if lo and hi then
      mx = x:ge(lo):logical_and(x:le(hi))
      ml = x:lt(lo):logical_and(lo:lt(hi))
      mh = x:gt(hi):logical_or(lo:gt(hi))
    elseif lo then
      mx, ml = x:ge(lo), x:lt(lo)
    else
      mx, mh = x:le(hi), x:gt(hi)
    end
    if mh then v = core.where(mh, hi, v) end
    if ml then v = core.where(ml, lo, v) end
    return core.where(mx, x, v)
  end
  local y = x
  if lo ~= nil then y = y:maximum(lo) end
  if hi ~= nil then y = y:minimum(hi) end
  if rawequal(y, x) then y = x:clone() end
  return y
end

-- x:clamp(min, max): min and max may be numbers, tensors (broadcast) or nil,
-- not both nil (torch.clamp: "At least one of 'min' or 'max' must not be None").
set("clamp", function(x, lo, hi, ...)
  if select("#", ...) > 0 then core._noextra("clamp", "min, max", 3, x, lo, hi, ...) end
  if lo == nil and hi == nil then fail("clamp", "at least one of 'min' or 'max' must not be nil") end
  return clamp("clamp", x, lo, hi)
end, true)

-- x:round([decimals]) or x:round{decimals =}: torch.round's decimals, the
-- scaled value rounded half to even (round(x * 10^d) / 10^d, as torch).
local c_round = T.round -- the C op
set("round", function(x, opts, ...)
  if select("#", ...) > 0 then core._noextra("round", "decimals", 2, x, opts, ...) end
  local d = opts
  if type(opts) == "table" then d = check_opts("round", opts, { decimals = true }).decimals end
  if d == nil or d == 0 then return c_round(x) end
  if math.type(d) ~= "integer" and not (type(d) == "number" and d == math.floor(d)) then
    fail("round", "decimals must be an integer, got %s", tostring(d))
  end
  check_tensor("round", x)
  if not FLOATS[x.dtype] then fail("round", "decimals needs a float tensor, got %s", x.dtype) end
  local s = 10.0 ^ d
  return c_round(x * s) / s
end, true)

-- x:clamp_min(min) / x:clamp_max(max): clamp with one bound.
set("clamp_min", function(x, lo)
  if lo == nil then fail("clamp_min", "min is required (a number or a tensor)") end
  return clamp("clamp_min", x, lo, nil)
end, true)
set("clamp_max", function(x, hi)
  if hi == nil then fail("clamp_max", "max is required (a number or a tensor)") end
  return clamp("clamp_max", x, nil, hi)
end, true)

-- ---- elementwise ----------------------------------------------------------------

-- x:logit([eps]): log(z / (1 - z)), z = x clamped into [eps, 1 - eps]
-- when eps is given (torch.logit; the gradient is 0 outside those bounds).
set("logit", function(x, eps)
  check_tensor("logit", x)
  local z = floating(x)
  if eps ~= nil then
    if type(eps) ~= "number" or not (eps >= 0 and eps <= 0.5) then
      fail("logit", "eps must be a number in [0, 0.5] or nil, got %s", tostring(eps))
    end
    z = z:clamp(eps, 1 - eps)
  end
  return (z / (1 - z)):log()
end, true)

-- a:lerp(b, w): a + w (b - a), computed as PyTorch does (b - (b - a)(1 - w)
-- where w >= 0.5); w a number or a tensor (broadcast).
set("lerp", function(a, b, w, ...)
  if select("#", ...) > 0 then core._noextra("lerp", "end, weight", 3, a, b, w, ...) end
  check_tensor("lerp", a, "argument 1")
  check_tensor("lerp", b, "argument 2 (end)")
  if type(w) ~= "number" and not core.is_tensor(w) then
    fail("lerp", "weight must be a number or a tensor, got %s", type(w))
  end
  broadcast_shapes("lerp", { a.shape, b.shape, core.is_tensor(w) and w.shape or nil }, { "input", "end", "weight" })
  if type(w) == "number" then
    if w < 0.5 then return a + (b - a) * w end
    return b - (b - a) * (1 - w)
  end
  return core.where(w:lt(0.5), a + w * (b - a), b - (b - a) * (1 - w))
end, true)

-- The value of addcmul and addcdiv: a number, or an options table {value =}.
local function value_of(op, opts)
  if type(opts) == "number" then return opts end
  opts = check_opts(op, opts, { value = true })
  return check_number(op, opts.value or 1, "value")
end

-- x:addcmul(t1, t2 [, {value = 1}]): x + value * t1 * t2 (broadcasting).
set("addcmul", function(x, t1, t2, opts)
  check_tensor("addcmul", x, "input")
  check_tensor("addcmul", t1, "tensor1")
  check_tensor("addcmul", t2, "tensor2")
  broadcast_shapes("addcmul", { x.shape, t1.shape, t2.shape }, { "input", "tensor1", "tensor2" })
  return x + t1 * value_of("addcmul", opts) * t2
end, true)

-- x:addcdiv(t1, t2 [, {value = 1}]): x + value * t1 / t2 (broadcasting).
set("addcdiv", function(x, t1, t2, opts)
  check_tensor("addcdiv", x, "input")
  check_tensor("addcdiv", t1, "tensor1")
  check_tensor("addcdiv", t2, "tensor2")
  broadcast_shapes("addcdiv", { x.shape, t1.shape, t2.shape }, { "input", "tensor1", "tensor2" })
  return x + t1 * value_of("addcdiv", opts) / t2
end, true)

local function unary(name, fn)
  set(name, function(x)
    check_tensor(name, x)
    return fn(floating(x))
  end, true)
end

-- 2^x, log2, log10 (an integer tensor gives float32, as in PyTorch)
unary("exp2", function(x) return 2 ^ x end)
unary("log2", function(x) return x:log() / LN2 end)
unary("log10", function(x) return x:log() / LN10 end)
-- sinh x = 2 sinh(x/2) cosh(x/2) and cosh x = 2 (e^(x/2) / 2) e^(x/2) + ...:
-- expm1 keeps sinh exact near 0, and no intermediate overflows before the
-- result does (e^x alone would at x = 709.8, sinh x only at 710.5).
unary("sinh", function(x)
  local h = x * 0.5
  return (h:expm1() - (-h):expm1()) * 0.5 * (h:exp() + (-h):exp())
end)
unary("cosh", function(x)
  local h = x * 0.5
  local e, f = h:exp(), (-h):exp()
  return e * 0.5 * e + f * 0.5 * f
end)
unary("tan", function(x) return x:sin() / x:cos() end)

-- x:xlogy(y): x * log(y), 0 where x = 0 (unless y is NaN) (torch.xlogy);
-- either may be a number. The gradients are PyTorch's: log(y) for x (0
-- where x = 0 and y <= 0), x / y for y (NaN at x = y = 0, 0 / 0).
set("xlogy", function(x, y)
  local t = tensor_or_number("xlogy", x, y)
  local dt = FLOATS[t.dtype] and t.dtype or core.get_default_dtype()
  local o = { dtype = dt, device = t.device }
  if not core.is_tensor(x) then x = core.full({}, x, o) end
  if not core.is_tensor(y) then y = core.full({}, y, o) end
  x, y = floating(x), floating(y)
  -- where x = 0, log(y) is replaced by 0 for y <= 0 (-inf or NaN) and y = inf
  local zero = x:eq(0):logical_and(y:le(0):logical_or(y:eq(math.huge)))
  return x * core.where(zero, core.zeros({}, { dtype = y.dtype, device = y.device }), y:log())
end, true)

-- ---- remainder, fmod, floor_divide --------------------------------------------------

local function integral(v)
  if core.is_tensor(v) then return v.dtype == "int64" or v.dtype == "bool" end
  return math.type(v) == "integer"
end

-- The C op EM_FMOD (core/include/ember.h): C's fmod, exact, as torch.fmod
-- (floats: the sign of a; bfloat16 computes in float; int64: C's %), with
-- torch's gradient (1 for a, -trunc(a / b) for b).
local c_fmod, c_floor_divide_int = core._fmod, core._floor_divide_int

-- Integer pairs (int64, bool, Lua integers) stay int64, exact over the whole
-- range; a zero divisor is an error, as PyTorch's ZeroDivisionError. Other
-- pairs compute in the float operand's dtype (float32 for an integer tensor
-- beside a number). fn(x, y, int) gets the converted pair (two int64
-- tensors when int).
local function division(op, a, b, fn)
  tensor_or_number(op, a, b)
  if integral(a) and integral(b) then
    local bad = core.is_tensor(b) and b:eq(0):any():item() or b == 0
    if bad then fail(op, "integer division by zero") end
    -- a number becomes a 0-d int64 tensor (exact: the C op's number would be a double)
    local dev = (core.is_tensor(a) and a or b).device
    local function i(v)
      if not core.is_tensor(v) then return core.tensor(v, { dtype = "int64", device = dev }) end
      return v.dtype == "bool" and v:long() or v
    end
    return fn(i(a), i(b), true)
  end
  if core.is_tensor(a) and not FLOATS[a.dtype] then a = core.is_tensor(b) and a:to(b.dtype) or floating(a) end
  if core.is_tensor(b) and not FLOATS[b.dtype] then b = core.is_tensor(a) and b:to(a.dtype) or floating(b) end
  return fn(a, b, false)
end

-- ember.fmod(a, b) / a:fmod(b): the C-style remainder a - trunc(a / b) b,
-- with the sign of a, exactly (C's fmod, as torch.fmod); b may be a number, a a number too.
set("fmod", function(a, b, ...)
  if select("#", ...) > 0 then core._noextra("fmod", "other", 2, a, b, ...) end
  return division("fmod", a, b, function(x, y) return c_fmod(x, y) end)
end, true)

-- ember.remainder(a, b) / a:remainder(b): the Python-style remainder
-- a - floor(a / b) b, with the sign of b (torch.remainder): fmod, plus b
-- where that is non-zero and its sign differs from b's.
set("remainder", function(a, b, ...)
  if select("#", ...) > 0 then core._noextra("remainder", "other", 2, a, b, ...) end
  return division("remainder", a, b, function(x, y)
    local m = c_fmod(x, y)
    local yt = core.is_tensor(y) and y or core.full({}, y, { dtype = m.dtype, device = m.device })
    local flip = m:ne(0):logical_and(yt:lt(0):logical_xor(m:lt(0)))
    return core.where(flip, m + y, m)
  end)
end, true)

-- ember.floor_divide(a, b) / a:floor_divide(b): floor(a / b), rounded as
-- PyTorch 1.13 does ((a - fmod(a, b)) / b, less 1 where the signs of the
-- remainder and b differ); integers in int64, exact; not differentiable
-- (PyTorch's has no gradient).
set("floor_divide", function(a, b)
  return division("floor_divide", a, b, function(x, y, int)
    if int then return c_floor_divide_int(x, y) end
    local m = c_fmod(x, y)
    local yt = core.is_tensor(y) and y or core.full({}, y, { dtype = m.dtype, device = m.device })
    local div = (x - m) / y
    div = core.where(m:ne(0):logical_and(yt:lt(0):logical_xor(m:lt(0))), div - 1, div)
    local fl = div:floor()
    fl = core.where((div - fl):gt(0.5), fl + 1, fl)
    -- a zero quotient takes the sign of a / b, as PyTorch's
    fl = core.where(div:eq(0), (x / y) * 0, fl)
    -- a zero divisor gives a / b (+-inf or NaN)
    local yz = core.is_tensor(y) and y:eq(0) or core.full({}, y == 0, { dtype = "bool", device = m.device })
    return core.where(yz, x / y, fl):detach()
  end)
end, true)

-- ---- add/sub with alpha, div with rounding_mode --------------------------------------

-- The C methods a:add(b), a:sub(b), a:div(b) (and the metamethods + - /)
-- call these with a third argument: PyTorch's keyword arguments.
local mt = debug.getregistry()["ember.Tensor"]
local c_add, c_sub, c_div = core.add, core.sub, core.div

-- alpha b for a + alpha b or a - alpha b (torch.add/sub's alpha; Torch7's
-- and add_'s positional alpha too): alpha a number or {alpha =}. An
-- integer or bool pair takes only an integer alpha, as PyTorch.
local function scaled(op, a, b, opt)
  local alpha = opt
  if type(opt) == "table" then alpha = check_opts(op, opt, { alpha = true }).alpha end
  if alpha ~= nil and type(alpha) ~= "number" then
    fail(op, "alpha must be a number or an options table {alpha =}, got %s", type(alpha))
  end
  if alpha == nil or alpha == 1 then return b end
  tensor_or_number(op, a, b)
  if core.is_tensor(a) and core.is_tensor(b) and a.dtype == "bool" and b.dtype == "bool" then
    return alpha ~= 0 and b or b:logical_and(false) -- bools stay bool, as PyTorch's: alpha counts as true or false
  end
  if integral(a) and integral(b) and math.type(alpha) ~= "integer" then
    if alpha ~= math.floor(alpha) then fail(op, "for integer tensors alpha must be an integer, got %s", alpha) end
    alpha = math.tointeger(alpha)
  end
  return b * alpha
end

mt.__add_options = helpers.guard(function(a, b, opt) return c_add(a, scaled("add", a, b, opt)) end)
mt.__sub_options = helpers.guard(function(a, b, opt) return c_sub(a, scaled("sub", a, b, opt)) end)

-- a:div(b, {rounding_mode =}) or a:div(b, mode): rounded towards zero
-- ("trunc") or down ("floor", as floor_divide); int64 stays int64 (torch.div).
mt.__div_options = helpers.guard(function(a, b, opt)
  local mode = opt
  if type(opt) == "table" then mode = check_opts("div", opt, { rounding_mode = true }).rounding_mode end
  if mode == nil then return c_div(a, b) end
  if mode == "floor" then return core.floor_divide(a, b) end
  if mode ~= "trunc" then
    fail("div", "rounding_mode must be nil, \"trunc\" or \"floor\", got %s", tostring(mode))
  end
  return division("div", a, b, function(x, y, int)
    -- integers: a - fmod(a, b) is a multiple of b (no overflow), so flooring divides it exactly
    if int then return c_floor_divide_int(x - c_fmod(x, y), y) end
    return c_div(x, y):trunc()
  end)
end)

-- The largest finite value of each float dtype.
local FLOAT_MAX = { float32 = 3.4028234663852886e38, float64 = 1.7976931348623157e308,
                    bfloat16 = 3.3895313892515355e38 }

-- x:nan_to_num([{nan = 0, posinf =, neginf =}]) or (x, nan, posinf, neginf):
-- NaN, +inf and -inf replaced (by default with 0 and the dtype's largest
-- and lowest finite values), as torch.nan_to_num; the gradient passes where
-- x is finite. Integer and bool tensors come back as copies.
set("nan_to_num", function(x, nan, posinf, neginf)
  check_tensor("nan_to_num", x)
  if type(nan) == "table" then
    local o = check_opts("nan_to_num", nan, { nan = true, posinf = true, neginf = true })
    nan, posinf, neginf = o.nan, o.posinf, o.neginf
  end
  for _, v in ipairs { { nan, "nan" }, { posinf, "posinf" }, { neginf, "neginf" } } do
    if v[1] ~= nil and type(v[1]) ~= "number" then fail("nan_to_num", "%s must be a number, got %s", v[2], type(v[1])) end
  end
  if not FLOATS[x.dtype] then return x:clone() end
  local big = FLOAT_MAX[x.dtype]
  local o = { dtype = x.dtype, device = x.device }
  local y = core.where(x:ne(x), core.full({}, nan or 0, o), x)
  y = core.where(x:eq(math.huge), core.full({}, posinf or big, o), y)
  return core.where(x:eq(-math.huge), core.full({}, neginf or -big, o), y)
end, true)

-- ---- matrices ------------------------------------------------------------------------

local function check_integer(op, v, what)
  if math.type(v) ~= "integer" then fail(op, "%s must be an integer, got %s", what, tostring(v)) end
  return v
end

local function long(t, device) return core.tensor(t, { dtype = "int64", device = device }) end

-- x:diag([offset = 0]): a 1-d x of n elements gives the square matrix of
-- size n + |offset| with x on that diagonal (above the main one for
-- offset > 0); a 2-d x gives its diagonal as a 1-d tensor (torch.diag).
set("diag", function(x, offset)
  check_tensor("diag", x)
  local k = check_integer("diag", offset or 0, "offset")
  if x:dim() == 1 then
    local n = x:size(1)
    local m = n + math.abs(k)
    local r0, c0 = math.max(-k, 0), math.max(k, 0)
    local pos = {}
    for i = 1, n do pos[i] = (r0 + i - 1) * m + c0 + i end
    local out = core.zeros({ m * m }, { dtype = x.dtype, device = x.device })
    if n > 0 then out = out:scatter_add(1, long(pos, x.device), x) end
    return out:view(m, m)
  end
  if x:dim() ~= 2 then fail("diag", "expected a 1-d or 2-d tensor, got shape %s", shape_str(x)) end
  local R, C = x:size(1), x:size(2)
  local r0, c0 = math.max(-k, 0), math.max(k, 0)
  local n = math.max(math.min(R - r0, C - c0), 0)
  if n == 0 then return core.zeros({ 0 }, { dtype = x.dtype, device = x.device }) end
  local pos = {}
  for i = 1, n do pos[i] = (r0 + i - 1) * C + c0 + i end
  return x:reshape(-1):index_select(1, long(pos, x.device))
end, true)

-- x:trace(): the sum of the main diagonal of a 2-d tensor (torch.trace).
set("trace", function(x)
  check_tensor("trace", x)
  if x:dim() ~= 2 then fail("trace", "expected a 2-d tensor, got shape %s", shape_str(x)) end
  return core.diag(x):sum()
end, true)

-- x:diff([n = 1 [, dim = -1]]) or (x, {n =, dim =, prepend =, append =}):
-- the n-th forward difference x[i + 1] - x[i] along dim (torch.diff);
-- prepend and append (tensors) are joined to x along dim first; bool
-- tensors give logical_xor.
set("diff", function(x, n, dim)
  check_tensor("diff", x)
  local prepend, append
  if type(n) == "table" then
    local o = check_opts("diff", n, { n = true, dim = true, prepend = true, append = true })
    n, dim, prepend, append = o.n, o.dim, o.prepend, o.append
  end
  n = n or 1
  if math.type(n) ~= "integer" or n < 0 then fail("diff", "n must be an integer >= 0, got %s", tostring(n)) end
  if x:dim() == 0 then fail("diff", "expected a tensor with at least 1 dim, got a 0-d tensor") end
  local d = check_dim("diff", x, dim or -1)
  local parts = {}
  for _, p in ipairs { { prepend, "prepend" }, { x }, { append, "append" } } do
    if p[1] ~= nil then
      check_tensor("diff", p[1], p[2])
      if p[1]:dim() ~= x:dim() then
        fail("diff", "%s must have the %d dims of the input, got shape %s", p[2], x:dim(), shape_str(p[1]))
      end
      parts[#parts + 1] = p[1]
    end
  end
  local y = #parts > 1 and core.cat(parts, d) or x
  for _ = 1, n do
    local len = y:size(d)
    if len == 0 then break end
    local hi, lo = y:narrow(d, 2, len - 1), y:narrow(d, 1, len - 1)
    y = y.dtype == "bool" and hi:logical_xor(lo) or hi - lo
  end
  if rawequal(y, x) then y = x:clone() end
  return y
end, true)

-- A:mv(v): the product of a 2-d [n, m] and a 1-d [m] tensor, [n] (torch.mv).
set("mv", function(a, v)
  check_tensor("mv", a, "argument 1")
  check_tensor("mv", v, "argument 2")
  if a:dim() ~= 2 or v:dim() ~= 1 or a:size(2) ~= v:size(1) then
    fail("mv", "expected a matrix [n, m] and a vector [m], got %s and %s", shape_str(a), shape_str(v))
  end
  return a:matmul(v)
end, true)

-- ---- dims and shapes -----------------------------------------------------------------

local function dim_list(op, x, dims, what)
  if type(dims) == "number" then dims = { dims } end
  if type(dims) ~= "table" then fail(op, "%s must be a dim or a table of dims, got %s", what, type(dims)) end
  local out, seen = {}, {}
  for i, d in ipairs(dims) do
    out[i] = check_dim(op, x, d)
    if seen[out[i]] then fail(op, "dim %d appears twice in %s", out[i], what) end
    seen[out[i]] = true
  end
  return out
end

-- x:movedim(source, destination): the dims at source (a dim or a table of
-- dims) moved to the positions destination; the others keep their order
-- (torch.movedim). A view. moveaxis is the same function.
local function movedim(op)
  return function(x, src, dst)
    check_tensor(op, x)
    local s, t = dim_list(op, x, src, "source"), dim_list(op, x, dst, "destination")
    if #s ~= #t then fail(op, "source and destination must name as many dims, got %d and %d", #s, #t) end
    local n = x:dim()
    if n == 0 then return x:view({}) end
    local perm, used = {}, {}
    for i = 1, #s do perm[t[i]], used[s[i]] = s[i], true end
    local rest = 1
    for pos = 1, n do
      if perm[pos] == nil then
        while used[rest] do rest = rest + 1 end
        perm[pos], used[rest] = rest, true
      end
    end
    return x:permute(perm)
  end
end
set("movedim", movedim("movedim"), true)
set("moveaxis", movedim("moveaxis"), true)

-- x:swapaxes(d1, d2), x:swapdims(d1, d2): torch's names for transpose.
for _, name in ipairs { "swapaxes", "swapdims" } do
  set(name, function(x, d1, d2)
    check_tensor(name, x)
    if d1 == nil or d2 == nil then fail(name, "two dims are required, got %s and %s", tostring(d1), tostring(d2)) end
    return x:transpose(check_dim(name, x, d1), check_dim(name, x, d2))
  end, true)
end

-- x:broadcast_to(shape): x expanded to shape (a table or sizes; -1 keeps a
-- size), without copying (torch.broadcast_to, expand).
set("broadcast_to", function(x, ...)
  check_tensor("broadcast_to", x)
  local shape = type((...)) == "table" and (...) or { ... }
  if #shape < x:dim() then
    fail("broadcast_to", "cannot broadcast %s to %d dims: the shape needs at least %d", shape_str(x), #shape, x:dim())
  end
  for i, s in ipairs(shape) do
    if math.type(s) ~= "integer" or s < -1 then
      fail("broadcast_to", "size %d must be an integer >= 0 (or -1), got %s", i, tostring(s))
    end
  end
  return x:expand(shape)
end, true)

local function tensor_list(op, ts)
  if type(ts) ~= "table" or core.is_tensor(ts) or #ts == 0 then
    fail(op, "expected a non-empty list of tensors, got %s", core.is_tensor(ts) and "a tensor" or type(ts))
  end
  for i, t in ipairs(ts) do check_tensor(op, t, "element " .. i) end
  return ts
end

-- torch.atleast_1d/2d/3d of one tensor
local function atleast(x, n)
  if x:dim() >= n then return x end
  if n == 1 or x:dim() == 0 then
    local shape = {}
    for i = 1, n do shape[i] = 1 end
    if x:dim() == 0 then return x:reshape(shape) end
  end
  if n == 2 then return x:unsqueeze(1) end -- [m] -> [1, m]
  if x:dim() == 1 then return x:unsqueeze(1):unsqueeze(3) end -- [m] -> [1, m, 1]
  return x:unsqueeze(3) -- [a, b] -> [a, b, 1]
end

-- ember.atleast_1d(x) / atleast_2d / atleast_3d: x with leading (and, from
-- 2-d to 3-d, trailing) size-1 dims added up to n dims (torch.atleast_*d;
-- a list of tensors gives the list of results).
for n = 1, 3 do
  local name = "atleast_" .. n .. "d"
  set(name, function(x, ...)
    if type(x) == "table" and not core.is_tensor(x) then
      local out = {}
      for i, t in ipairs(tensor_list(name, x)) do out[i] = atleast(t, n) end
      return out
    end
    check_tensor(name, x)
    if select("#", ...) > 0 then fail(name, "takes one tensor or a list of tensors") end
    return atleast(x, n)
  end)
end

-- ember.hstack({a, b, ...}): joined along dim 2, or along dim 1 when they
-- are 1-d (torch.hstack); 0-d tensors count as 1-d.
set("hstack", function(ts)
  tensor_list("hstack", ts)
  local parts = {}
  for i, t in ipairs(ts) do parts[i] = atleast(t, 1) end
  return core.cat(parts, parts[1]:dim() == 1 and 1 or 2)
end)
-- ember.vstack({a, b, ...}): joined along dim 1 after making each at least
-- 2-d ([n] is [1, n]) (torch.vstack).
set("vstack", function(ts)
  tensor_list("vstack", ts)
  local parts = {}
  for i, t in ipairs(ts) do parts[i] = atleast(t, 2) end
  return core.cat(parts, 1)
end)
-- ember.dstack({a, b, ...}): joined along dim 3 after making each at least
-- 3-d ([n] is [1, n, 1], [m, n] is [m, n, 1]) (torch.dstack).
set("dstack", function(ts)
  tensor_list("dstack", ts)
  local parts = {}
  for i, t in ipairs(ts) do parts[i] = atleast(t, 3) end
  return core.cat(parts, 3)
end)

-- x:tensor_split(sections [, dim = 1]) or (x, starts [, dim]): a list of
-- views along dim. An integer k gives k pieces, the first (size % k) one
-- element longer; a table (or 1-d int64 tensor) lists the 1-based
-- positions where the second, third, ... pieces start -- torch's indices
-- plus one: torch.tensor_split(x, [1, 4]) is ember.tensor_split(x, {2, 5}).
set("tensor_split", function(x, sections, dim)
  check_tensor("tensor_split", x)
  if x:dim() == 0 then fail("tensor_split", "expected a tensor with at least 1 dim, got a 0-d tensor") end
  local d = check_dim("tensor_split", x, dim or 1)
  local n = x:size(d)
  local starts = {}
  if math.type(sections) == "integer" then
    if sections < 1 then fail("tensor_split", "sections must be an integer >= 1, got %d", sections) end
    local base, extra, at = n // sections, n % sections, 1
    for i = 1, sections - 1 do
      at = at + base + (i <= extra and 1 or 0)
      starts[i] = at
    end
  else
    if core.is_tensor(sections) then
      if sections.dtype ~= "int64" or sections:dim() ~= 1 then
        fail("tensor_split", "indices must be a 1-d int64 tensor, got a %d-d %s tensor", sections:dim(), sections.dtype)
      end
      sections = sections:totable()
    end
    if type(sections) ~= "table" then
      fail("tensor_split", "expected a number of sections or a table of start positions, got %s", type(sections))
    end
    for i, s in ipairs(sections) do
      if math.type(s) ~= "integer" then fail("tensor_split", "start %d must be an integer, got %s", i, tostring(s)) end
      starts[i] = s
    end
  end
  local out, from = {}, 1
  for _, s in ipairs(starts) do
    if s < 1 then fail("tensor_split", "start positions are 1-based (1 is the first element), got %d", s) end
    local to = math.min(math.max(s, from), n + 1)
    out[#out + 1] = x:narrow(d, from, to - from)
    from = to
  end
  out[#out + 1] = x:narrow(d, from, n + 1 - from)
  return out
end, true)

-- x:count_nonzero([dim]): the number of non-zero elements (int64), over
-- everything or along dim (a dim or a table of dims) (torch.count_nonzero).
set("count_nonzero", function(x, dim)
  check_tensor("count_nonzero", x)
  local nz = x.dtype == "bool" and x or x:ne(0)
  if dim == nil then return nz:sum() end
  return nz:sum(dim_list("count_nonzero", x, dim, "dim"))
end, true)

require "ember._searching" -- nonzero, unique, bincount, searchsorted, bucketize

return {}
