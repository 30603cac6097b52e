-- ember/_special.lua: torch.atan2 and torch.logcumsumexp composed from core
-- ops (autograd, every float dtype and backend for free), each a function
-- (ember.atan2(y, x)) and a tensor method (y:atan2(x)). The elementwise
-- special functions with kernels (atan, asin, acos, erfinv, lgamma,
-- digamma) are core ops (core/include/ember_unary_rules.h). Dims are
-- 1-based; errors name the function and are raised at the caller's line.
-- NumPy's names arctan, arcsin, arccos, arctan2 are aliases. init.lua loads it.
local core = require "ember.core"
local helpers = require "ember._helpers"

local fail, check_tensor, set = helpers.fail, helpers.check_tensor, helpers.set
local check_dim = require("ember._functional").check_dim
local shape_str = require("ember._errors").shape_str

-- int64 and bool tensors compute in the default dtype (float32), as PyTorch's float functions do.
local function floating(op, x, what)
  check_tensor(op, x, what)
  if x:is_floating_point() then return x end
  return x:to(core.get_default_dtype())
end

-- Is each element negative, -0 included (the sign bit)?
local function signbit(t) return t:lt(0):logical_or(t:eq(0):logical_and(t:reciprocal():lt(0))) end

-- ember.atan2(y, x) / y:atan2(x): the angle of the point (x, y), in
-- [-pi, pi], elementwise with broadcasting (torch.atan2; x may be a
-- number). Where |x| >= |y| it is atan(y / x), moved by +-pi for x < 0
-- (the sign of y, -0 included, picks which, as libm's); elsewhere
-- +-pi/2 - atan(x / y). Each branch divides by the larger magnitude, so
-- both the value and the gradient (x / (x^2 + y^2) for y, -y / (x^2 + y^2)
-- for x) are finite and accurate; the branch not taken divides by 1.
set("atan2", function(y, x, ...)
  if select("#", ...) > 0 then core._noextra("atan2", "other", 2, y, x, ...) end
  local op = "atan2"
  y = floating(op, y, "input")
  if type(x) == "number" then x = core.full({}, x, { dtype = y.dtype, device = y.device }) end
  x = floating(op, x, "other")
  if not pcall(core.broadcast_shapes, y.shape, x.shape) then
    fail(op, "shapes %s and %s cannot be broadcast", shape_str(y), shape_str(x))
  end
  local o = { dtype = x.dtype, device = x.device }
  local one = core.ones({}, o)
  local by_x = x:abs():ge(y:abs()) -- NaN: false, and the other branch gives NaN too
  local xs = core.where(by_x:logical_and(x:ne(0)), x, one)
  local ys = core.where(by_x, one, y)
  local ny = signbit(y)
  local pi = core.where(ny, core.full({}, -math.pi, o), core.full({}, math.pi, o))
  local a = (y / xs):atan()
  a = core.where(signbit(x), a + pi, a)
  local b = pi * 0.5 - (x / ys):atan()
  return core.where(by_x, a, b)
end, true)

-- ember.logcumsumexp(x, dim) / x:logcumsumexp(dim): log(cumsum(exp(x)))
-- along dim without overflow or underflow (torch.logcumsumexp): an
-- inclusive scan of logaddexp by doubling (Hillis-Steele), log2(n) steps
-- of whole-tensor ops, each pair combined around its own maximum, so a
-- running sum is exact however far its terms lie from the dim's maximum.
-- Float tensors only: PyTorch has no integer kernel.
set("logcumsumexp", function(x, dim)
  local op = "logcumsumexp"
  check_tensor(op, x)
  if not x:is_floating_point() then fail(op, "expected a float tensor, got %s (PyTorch has no integer logcumsumexp)", x.dtype) end
  if dim == nil then fail(op, "missing dim: logcumsumexp(x, dim), dim 1-based") end
  local d = check_dim(op, x, dim)
  local n = x:dim() == 0 and 1 or x:size(d)
  if n <= 1 then return x * 1 end
  local r = x
  local k = 1
  while k < n do
    local head = r:narrow(d, 1, k)
    local tail = r:narrow(d, k + 1, n - k):logaddexp(r:narrow(d, 1, n - k))
    r = core.cat({ head, tail }, d)
    k = k * 2
  end
  return r
end, true)

-- NumPy's names, which torch has too: x:arctan() is x:atan(), ...
for alias, name in pairs { arctan = "atan", arcsin = "asin", arccos = "acos", arctan2 = "atan2" } do
  set(alias, core.Tensor[name], true)
end

return {}
