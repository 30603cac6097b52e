--- ember/_dtypes.lua: PyTorch's dtype API on ember's dtype names.
-- A dtype in ember is its name, a string ("float32", "float64", "bfloat16",
-- "int64", "bool"), so the constants are those strings: `x.dtype ==
-- ember.float32`, `ember.zeros(2, {dtype = ember.double})`. PyTorch's
-- aliases are there for the dtypes ember has (`ember.float`, `ember.double`,
-- `ember.long`); ember has no float16 or int32, so reading `ember.half` or
-- `ember.int32` is an error naming the dtypes it has. Also `ember.finfo`
-- and `ember.iinfo` (torch's fields and values). `ember.get_default_dtype`, `set_default_dtype`,
-- `promote_types`, `result_type` and `can_cast` are C functions
-- (core/lua/l_library.c, on the rules of core/src/dtype.c). init.lua loads
-- this file.
local core = require "ember.core"
local guard = require("ember._errors").wrap

local M = {}

local function fail(op, fmt, ...) error(("ember.%s: " .. fmt):format(op, ...), 0) end

-- torch's names, each set to ember's name where the core knows the dtype
-- (core.dtype_info is the one list of names): float -> "float32", ...
local TORCH_NAMES = {
  "float32", "float64", "bfloat16", "int64", "bool", "float", "double", "long",
  "float16", "half", "int32", "int", "int16", "short", "int8", "uint8", "complex64", "complex128",
  "cfloat", "cdouble",
}
-- The others (float16, int32, ...) are no value: `{dtype = ember.int32}`
-- would be `{dtype = nil}`, the default dtype, silently. Reading one is the
-- core's unknown-dtype error instead (M.missing, from init.lua's lookup).
local MISSING = {}
for _, n in ipairs(TORCH_NAMES) do
  local info, why = core.dtype_info(n)
  if info and rawget(core, n) == nil then rawset(core, n, info.name) end
  if not info then MISSING[n] = why end
end

--- The error of reading ember.<k> where k is torch's name of a dtype ember
-- has not, else nil.
function M.missing(k) return MISSING[k] and ("ember.%s: %s"):format(k, MISSING[k]) end

-- The binary formats of the floating dtypes: mantissa and exponent bits.
local FORMATS = { float32 = { 23, 8 }, float64 = { 52, 11 }, bfloat16 = { 7, 8 } }

-- A dtype name, a tensor's dtype, or (nil) the default dtype, as a
-- name the core knows.
local function dtype_of(op, x)
  if x == nil then return core.get_default_dtype() end
  if core.is_tensor(x) then return x.dtype end
  if type(x) ~= "string" then fail(op, "expected a dtype (a name such as ember.float32) or a tensor, got %s", type(x)) end
  local info, why = core.dtype_info(x)
  if not info then fail(op, "%s", why) end
  return info.name
end

local INFO_MT = {
  __tostring = function(f)
    if f.eps then
      return ("finfo(resolution=%.6g, min=%.6g, max=%.6g, eps=%.6g, smallest_normal=%.6g, tiny=%.6g, dtype=%s)")
          :format(f.resolution, f.min, f.max, f.eps, f.smallest_normal, f.tiny, f.dtype)
    end
    return ("iinfo(min=%d, max=%d, dtype=%s)"):format(f.min, f.max, f.dtype)
  end,
}

--- The limits of a floating dtype, as torch.finfo: a table with `bits`, `eps`
-- (the gap from 1 to the next number), `max`, `min` (-max), `tiny` and
-- `smallest_normal` (the smallest positive normal number), `resolution`
-- (10^-digits) and `dtype`. Takes a dtype name, a tensor, or nothing (the
-- default dtype).
-- @param[opt] dtype "float32", "float64" or "bfloat16" (or a tensor)
-- @treturn table
-- @usage local eps = ember.finfo(ember.float32).eps   -- 2^-23
function M.finfo(dtype)
  local name = dtype_of("finfo", dtype)
  local fmt = FORMATS[name]
  if not fmt then
    fail("finfo", "requires a floating-point dtype (float32, float64 or bfloat16), got %s%s", name,
      name == "int64" and " (use ember.iinfo for it)" or "")
  end
  local m, e = fmt[1], fmt[2]
  local bias = 2 ^ (e - 1) - 1
  local eps = 2.0 ^ -m
  local max = (2 - eps) * 2.0 ^ bias
  local tiny = 2.0 ^ (1 - bias)
  return setmetatable({
    bits = 1 + e + m, eps = eps, max = max, min = -max, tiny = tiny, smallest_normal = tiny,
    resolution = tonumber("1e-" .. math.floor(-math.log(eps, 10))), dtype = name,
  }, INFO_MT)
end

--- The limits of an integer dtype, as torch.iinfo: a table with `bits`,
-- `max`, `min` (Lua integers) and `dtype`. ember's one integer dtype is
-- int64; bool is refused, as torch refuses it.
-- @param dtype "int64" (or an int64 tensor)
-- @treturn table
-- @usage assert(ember.iinfo(ember.int64).max == math.maxinteger)
function M.iinfo(dtype)
  if dtype == nil then fail("iinfo", "expected a dtype (a name such as ember.int64) or a tensor, got nil") end
  local name = dtype_of("iinfo", dtype)
  if name == "bool" then fail("iinfo", "bool is not supported by ember.iinfo (nor by torch.iinfo)") end
  if name ~= "int64" then
    fail("iinfo", "requires an integer dtype (int64), got %s (use ember.finfo for it)", name)
  end
  return setmetatable({ bits = 64, max = math.maxinteger, min = math.mininteger, dtype = name }, INFO_MT)
end

core.finfo = guard(M.finfo)
core.iinfo = guard(M.iinfo)

return M
