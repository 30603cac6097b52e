-- nn/_functional_checks.lua (internal): nn.functional's argument
-- conventions, written once: the arguments after the tensors by position
-- in torch's order or as an options table (args), and the checks every
-- function's errors go through, each naming the function (`who`,
-- "nn.functional.conv2d") at the caller's line.
local errors = require "ember._errors"
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local conv = require "ember.nn._conv"

local M = {}
local shape_str = errors.shape_str

-- A plain table of options (not a tensor, not a size list such as {2, 2}).
function M.is_options(v)
  return type(v) == "table" and v[1] == nil and not ember.is_tensor(v)
end

-- The arguments after the fixed ones, by name: positional in `names`' order,
-- and an options table (the last argument) for the rest. A name given both
-- ways, or more arguments than names, is an error naming `who`.
function M.args(who, names, ...)
  local n = select("#", ...)
  local out = {}
  for i = 1, n do
    local v = select(i, ...)
    if i == n and M.is_options(v) then
      Module.check_options(who, v, names)
      for k, o in pairs(v) do
        if out[k] ~= nil then errors.raise("%s: %s is given twice (by position and in the options)", who, k) end
        out[k] = o
      end
    elseif i > #names then
      errors.raise("%s: too many arguments (%d); after the tensors it takes %s, in this order, or an options table",
        who, n, table.concat(names, ", "))
    elseif v ~= nil then
      out[names[i]] = v
    end
  end
  return out
end

-- A forward's optional argument `name` given by position or, as PyTorch's
-- keyword (m(x, output_size=...)), in a table of names: {output_size = {10, 10}}
-- gives {10, 10}; another name there is an error naming `who`.
function M.forward_option(who, name, v)
  if not M.is_options(v) or next(v) == nil or getmetatable(v) ~= nil then return v end
  Module.check_options(who, v, { name })
  return v[name]
end

function M.check_tensor(who, what, v, float)
  if not ember.is_tensor(v) then errors.raise("%s: %s must be a tensor, got %s", who, what, type(v)) end
  if float then
    local info = ember.dtype_info(v.dtype)
    if not info.floating then errors.raise("%s: %s must be floating-point, got %s", who, what, v.dtype) end
  end
end

function M.check_optional(who, what, v, shape)
  if v == nil then return end
  M.check_tensor(who, what, v)
  if shape and (v.ndim ~= #shape or v.shape[1] ~= shape[1]) then
    errors.raise("%s: %s must have shape [%s], got %s", who, what, table.concat(shape, ", "), shape_str(v))
  end
end

function M.check_number(who, what, v, lo)
  if type(v) ~= "number" or v < (lo or -math.huge) then
    errors.raise("%s: %s must be a number%s, got %s", who, what, lo and (" >= " .. lo) or "", tostring(v))
  end
end

function M.check_bool(who, what, v)
  if v ~= nil and type(v) ~= "boolean" then
    errors.raise("%s: %s must be true or false, got %s", who, what, tostring(v))
  end
end

-- x as a floating tensor of at least `min` dims; its channel count (dim 2).
function M.check_input(who, x, min)
  M.check_tensor(who, "input", x, true)
  if x.ndim < min then
    errors.raise("%s: expected an input [N, C, *] of at least %d dims, got shape %s", who, min, shape_str(x))
  end
  return x.shape[2]
end

function M.check_stats(who, rm, rv, C)
  if (rm == nil) ~= (rv == nil) then errors.raise("%s: give both running_mean and running_var, or neither", who) end
  M.check_optional(who, "running_mean", rm, { C })
  M.check_optional(who, "running_var", rv, { C })
end

function M.check_momentum_eps(who, o)
  local m = o.momentum
  if m == nil then m = 0.1 end
  if type(m) ~= "number" or m < 0 or m > 1 then
    errors.raise("%s: momentum must be a number in [0, 1], got %s", who, tostring(o.momentum))
  end
  local eps = o.eps
  if eps == nil then eps = 1e-5 end
  M.check_number(who, "eps", eps, 0)
  return m, eps
end

-- normalized_shape as a list of positive integers.
function M.normalized(who, ns)
  if math.type(ns) == "integer" then ns = { ns } end
  if type(ns) == "userdata" and ns.totable then ns = ns:totable() end
  local ok = type(ns) == "table" and #ns > 0
  for i = 1, ok and #ns or 0 do ok = ok and math.type(ns[i]) == "integer" and ns[i] > 0 end
  if not ok then
    errors.raise("%s: normalized_shape must be a positive integer or a table of them, got %s", who, conv.fmt(ns))
  end
  return { table.unpack(ns) }
end

function M.check_affine(who, what, v, ns)
  if v == nil then return end
  M.check_tensor(who, what, v)
  local ok = v.ndim == #ns
  for i = 1, #ns do ok = ok and v.shape[i] == ns[i] end
  if not ok then errors.raise("%s: %s must have shape [%s] (normalized_shape), got %s", who, what,
    table.concat(ns, ", "), shape_str(v)) end
end

-- A size or scale as a list of nd: an integer (a number for scales) or a table of nd.
function M.per_dim(v, nd, int)
  if type(v) == "number" then
    local t = {}
    for i = 1, nd do t[i] = v end
    v = t
  end
  if type(v) ~= "table" or #v ~= nd then return nil end
  for i = 1, nd do
    local e = v[i]
    if type(e) ~= "number" or not (e > 0) or (int and math.type(e) ~= "integer") then return nil end
  end
  return { table.unpack(v, 1, nd) }
end

function M.window_sizes(who, kernel_size, o)
  local v = {}
  for _, f in ipairs { { "kernel_size", kernel_size, 1, nil }, { "dilation", o.dilation, 1, 1 },
    { "padding", o.padding, 0, 0 }, { "stride", o.stride, 1, 1 } } do
    local given = f[2]
    if given == nil then given = f[4] end
    v[f[1]] = given ~= nil and conv.tuple(given, 2, f[3]) or nil
    if not v[f[1]] then
      errors.raise("%s: %s must be a %s integer or a pair of them, got %s", who, f[1], f[3] == 0 and "non-negative"
        or "positive", conv.fmt(f[2]))
    end
  end
  return v
end

function M.check_reduction(who, r)
  r = r or "mean"
  if r ~= "mean" and r ~= "sum" and r ~= "none" then
    errors.raise("%s: reduction must be \"mean\", \"sum\" or \"none\", got %s", who, tostring(r))
  end
  return r
end

function M.factor(who, what, r)
  if math.type(r) ~= "integer" or r < 1 then
    errors.raise("%s: %s must be a positive integer, got %s", who, what, tostring(r))
  end
end

function M.lambd_of(who, ...)
  local o = M.args(who, { "lambd" }, ...)
  local l = o.lambd == nil and 0.5 or o.lambd
  M.check_number(who, "lambd", l, 0)
  return l
end

return M
