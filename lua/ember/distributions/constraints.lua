--- distributions.constraints: what a parameter or a value must satisfy, as
-- torch.distributions.constraints (informally: each constraint has a `name`
-- and `check(t)`, a bool tensor of where t satisfies it). A distribution's
-- `arg_constraints` maps its parameters to constraints and its `support`
-- is the constraint of its values; with validate_args (the default) the
-- constructor checks the parameters and log_prob/cdf check the values.
-- @usage local constraints = require "ember.distributions.constraints"
-- print(constraints.positive.name)                                --> positive (> 0)
-- print(constraints.positive.check(ember.tensor({1, 0, -1})))     --> tensor([ true, false, false], ...)
-- @module distributions.constraints
local ember = require "ember"

local C = {}

local function make(name, check, extra)
  local c = { name = name, check = check }
  for k, v in pairs(extra or {}) do c[k] = v end
  return setmetatable(c, { __tostring = function() return name end })
end

local function is_int(t)
  if t.dtype == "int64" or t.dtype == "int32" or t.dtype == "bool" then return t:eq(t) end
  return t:eq(t:floor())
end

C.real = make("real", function(t) return t:eq(t) end)
C.positive = make("positive (> 0)", function(t) return t:gt(0) end)
C.nonnegative = make("nonnegative (>= 0)", function(t) return t:ge(0) end)
C.unit_interval = make("in [0, 1]", function(t) return t:ge(0):logical_and(t:le(1)) end)
C.boolean = make("0 or 1", function(t) return t:eq(0):logical_or(t:eq(1)) end)
C.nonnegative_integer = make("a nonnegative integer", function(t) return t:ge(0):logical_and(is_int(t)) end)
C.simplex = make("a probability vector (last dim: >= 0, summing to 1)", function(t)
  return t:ge(0):all(-1):logical_and((t:sum(-1) - 1):abs():lt(1e-6))
end, { event_dim = 1 })
C.one_hot = make("one-hot (last dim: 0 or 1, one 1)", function(t)
  return t:eq(0):logical_or(t:eq(1)):all(-1):logical_and(t:sum(-1):eq(1))
end, { event_dim = 1 })
C.real_vector = make("a real vector", function(t) return t:eq(t):all(-1) end, { event_dim = 1 })
C.lower_cholesky = make("lower triangular with a positive diagonal", function(t)
  local tril_ok = t:tril():eq(t):all(-1):all(-1)
  return tril_ok:logical_and(t:diagonal(0, -2, -1):gt(0):all(-1))
end, { event_dim = 2 })

--- The constraint low < t < high (Uniform's support is interval(low, high), ends included).
-- @param low a number or tensor
-- @param high a number or tensor
-- @usage print(require("ember.distributions.constraints").interval(0, 2).name)   --> in [0, 2]
function C.interval(low, high)
  local function s(x) return ember.is_tensor(x) and "low" or tostring(x) end
  return make(("in [%s, %s]"):format(s(low), s(high)):gsub("%[low, low%]", "[low, high]"), function(t)
    return t:ge(low):logical_and(t:le(high))
  end)
end

--- The constraint: an integer in [low, high] (Binomial's support, high = total_count).
-- @param low a number
-- @param high a number or tensor
-- @usage print(require("ember.distributions.constraints").integer_interval(0, 5).name)   --> an integer in [0, 5]
function C.integer_interval(low, high)
  local hs = ember.is_tensor(high) and "total_count" or tostring(high)
  return make(("an integer in [%s, %s]"):format(low, hs), function(t)
    return t:ge(low):logical_and(t:le(high)):logical_and(is_int(t))
  end)
end

--- The constraint: an integer in [0, n) (Categorical's support, 1-based here: [1, n]).
-- @tparam integer n the number of categories
-- @usage print(require("ember.distributions.constraints").categorical(3).name)   --> a category in 1..3
function C.categorical(n)
  return make(("a category in 1..%d"):format(n), function(t)
    return t:ge(1):logical_and(t:le(n)):logical_and(is_int(t))
  end)
end

return C
