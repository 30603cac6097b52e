--- nn.Upsample({size =, scale_factor =, mode = "nearest", align_corners =, recompute_scale_factor =}) or
-- nn.Upsample(scale_factor [, {mode =, align_corners =, recompute_scale_factor =}]) or PyTorch's
-- positional order nn.Upsample(size, scale_factor [, mode, align_corners, recompute_scale_factor])
-- (two or more arguments; one alone is ember's scale_factor, where PyTorch's is the size): upsampling of the
-- spatial dims of [N, C, L], [N, C, H, W] or [N, C, D, H, W], as
-- torch.nn.Upsample: `nn.functional.interpolate` with the module's
-- settings (nn/_interpolate.lua, the one rule), in every mode it has --
-- "nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear"
-- and "area" -- with align_corners for the interpolating ones. Give either
-- size (a number, or one per spatial dim) or scale_factor (a number, or one
-- per spatial dim); recompute_scale_factor (as PyTorch's) uses scale_factor only for the output's
-- size, the source positions then from the sizes. In "nearest", output row i is input row floor(i *
-- scale) (at most H - 1), with scale = 1 / scale_factor or H / h, in
-- float32 as PyTorch does, so a fractional factor picks PyTorch's rows; the
-- gradient sums over the copies. (PyTorch 1.13 is inconsistent where a
-- factor other than 2 or 1 gives exactly 2 H or H rows: its backward, and
-- its forward when N * C = 1, then take rows i / 2 or i; ember keeps to
-- the formula.)
-- Errors name nn.Upsample: both or neither of size and scale_factor, an
-- unknown mode, a size or factor that is not positive; at forward, an input
-- whose number of dims does not go with the mode or the sizes.
-- @usage print(nn.Upsample(2)(ember.randn(1, 3, 4, 5)).shape)              --> ember.Size{1, 3, 8, 10}
-- print(nn.Upsample({size = {6, 7}})(ember.randn(1, 3, 4, 5)).shape)     --> ember.Size{1, 3, 6, 7}
-- print(nn.Upsample(2, {mode = "bilinear", align_corners = true})(ember.randn(1, 1, 2, 2)).shape)
-- --> ember.Size{1, 1, 4, 4}
-- @classmod nn.Upsample
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local interpolate = require "ember.nn._interpolate"

local Upsample = Module:extend("Upsample")

-- v for a message: a list as {a, b}.
local function fmt(v)
  if type(v) ~= "table" then return tostring(v) end
  local parts = {}
  for i = 1, #v do parts[i] = tostring(v[i]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- A positive number (integer when `int`) or a list of 1 to 3 of them; nil when invalid.
local function sizes(v, int)
  local list = type(v) == "number" and { v } or v
  if type(list) ~= "table" or #list < 1 or #list > 3 then return nil end
  for i = 1, #list do
    if type(list[i]) ~= "number" or not (list[i] > 0) or (int and math.type(list[i]) ~= "integer") then return nil end
  end
  return v
end

-- PyTorch's order, size first: nn.Upsample(nil, 2, "bilinear") or
-- nn.Upsample({6, 7}, nil, "bilinear", true), an options table after them
-- allowed. Taken for three or more arguments, or two whose second is not
-- ember's options table (nn.Upsample(nil, 2)); nn.Upsample(2) and
-- nn.Upsample(2, {mode =}) stay ember's scale_factor.
local POSITIONAL = { "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor" }
local function torch_order(n, ...)
  local a, b = ...
  if n < 2 or (n == 2 and a ~= nil and (b == nil or type(b) == "table")) then return nil end
  local last = select(n, ...)
  local opts = {}
  if type(last) == "table" and getmetatable(last) == nil and last[1] == nil then
    for k, v in pairs(last) do opts[k] = v end
    n = n - 1
  end
  if n > #POSITIONAL then
    error(("Upsample: takes at most %d arguments (%s) before the options table, got %d"):format(#POSITIONAL,
      table.concat(POSITIONAL, ", "), n), 3)
  end
  for i = 1, n do
    local v = select(i, ...)
    if v ~= nil then
      if opts[POSITIONAL[i]] ~= nil then
        error(("Upsample: %s given twice (argument %d and the options table)"):format(POSITIONAL[i], i), 3)
      end
      opts[POSITIONAL[i]] = v
    end
  end
  return opts
end

function Upsample:__init(...)
  local a, b = ...
  local opts = torch_order(select("#", ...), ...)
  if opts then -- PyTorch's positional order
  elseif type(a) == "number" or (type(a) == "table" and a[1] ~= nil) then
    opts = b or {}
    if type(opts) ~= "table" then error("Upsample: options must be a table {mode =}, got " .. type(opts), 2) end
    opts = { scale_factor = a, size = opts.size, mode = opts.mode, align_corners = opts.align_corners,
      recompute_scale_factor = opts.recompute_scale_factor }
  else
    opts = a or {}
    if type(opts) ~= "table" then
      error("Upsample: expected a scale_factor or an options table {size =, scale_factor =, mode =}, got " .. type(opts), 2)
    end
  end
  opts = Module.check_options("nn.Upsample", opts, { "size", "scale_factor", "mode", "align_corners",
    "recompute_scale_factor" })
  if (opts.size == nil) == (opts.scale_factor == nil) then
    error("Upsample: give either size or scale_factor (one of them)", 2)
  end
  self.mode = opts.mode or "nearest"
  if not interpolate.MODES[self.mode] then
    local names = {}
    for name in pairs(interpolate.MODES) do names[#names + 1] = ("%q"):format(name) end
    table.sort(names)
    error(("Upsample: mode must be one of %s, got %s"):format(table.concat(names, ", "), tostring(self.mode)), 2)
  end
  if opts.align_corners ~= nil and type(opts.align_corners) ~= "boolean" then
    error("Upsample: align_corners must be a boolean, got " .. type(opts.align_corners), 2)
  end
  self.align_corners = opts.align_corners
  local rsf = opts.recompute_scale_factor
  if rsf ~= nil and type(rsf) ~= "boolean" then
    error("Upsample: recompute_scale_factor must be a boolean, got " .. type(rsf), 2)
  end
  self.recompute_scale_factor = rsf
  if opts.size ~= nil then
    self.size = sizes(opts.size, true)
    if not self.size then
      error("Upsample: size must be a positive integer or a list of them (one per spatial dim), got "
        .. fmt(opts.size), 2)
    end
  else
    self.scale_factor = sizes(opts.scale_factor)
    if not self.scale_factor then
      error("Upsample: scale_factor must be a positive number or a list of them (one per spatial dim), got "
        .. fmt(opts.scale_factor), 2)
    end
  end
end

--- x upsampled: nn.functional.interpolate(x, {size or scale_factor, mode, align_corners}).
-- @tparam Tensor x [N, C, *spatial] (1 to 3 spatial dims)
-- @treturn Tensor [N, C, *new spatial]
function Upsample:forward(x)
  return interpolate.resample("Upsample.forward", x, { size = self.size, scale_factor = self.scale_factor,
    mode = self.mode, align_corners = self.align_corners, recompute_scale_factor = self.recompute_scale_factor })
end

--- The size or scale factor and the mode, for printing.
function Upsample:extra_repr()
  local v = self.scale_factor or self.size
  local s
  if type(v) == "number" then s = ("%g"):format(v)
  else
    local parts = {}
    for i = 1, #v do parts[i] = ("%g"):format(v[i]) end
    s = #parts == 1 and parts[1] or "(" .. table.concat(parts, ", ") .. ")"
  end
  return ("%s=%s, mode=%s%s"):format(self.scale_factor and "scale_factor" or "size", s, self.mode,
    self.align_corners ~= nil and (", align_corners=" .. tostring(self.align_corners)) or "")
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Upsample.forward = require("ember._errors").wrap(Upsample.forward)

return Upsample
