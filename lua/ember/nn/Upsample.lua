--- nn.Upsample({size =, scale_factor =, mode = "nearest"}) or
-- nn.Upsample(scale_factor [, {mode =}]): nearest-neighbour upsampling of
-- the last two dims of [N, C, H, W], as torch.nn.Upsample (and
-- F.interpolate) with mode "nearest" (the only mode here). Give either
-- size (a number or {h, w}: the output's H and W) or scale_factor (a
-- number or {sh, sw}: H and W times it, rounded down). Output row i is
-- input row floor(i * scale) (at most H - 1), with scale = 1 / scale_factor
-- or H / h, in float32 as PyTorch does, so a fractional factor picks
-- PyTorch's rows. The gradient sums over the copies. (PyTorch 1.13 is
-- inconsistent where a factor other than 2 or 1 gives exactly 2 H or H
-- rows: its backward, and its forward when N * C = 1, then take rows i / 2
-- or i; ember keeps to the formula.)
-- The rule is `nn.functional.interpolate`'s (nn/_interpolate.lua), which
-- also has the modes "bilinear", "bicubic", "nearest-exact" and "area".
-- Errors name nn.Upsample: both or neither of size and scale_factor, a mode other than "nearest", an input that is not 4-d.
-- @usage print(nn.Upsample(2)(ember.randn(1, 3, 4, 5)).shape)              --> ember.Size{1, 3, 8, 10}
-- print(nn.Upsample({size = {6, 7}})(ember.randn(1, 3, 4, 5)).shape)     --> ember.Size{1, 3, 6, 7}
-- @classmod nn.Upsample
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local interpolate = require "ember.nn._interpolate"

local Upsample = Module:extend("Upsample")

-- A positive number (integer when `int`) or a pair of them, as a pair; nil when invalid.
local function pair(v, int)
  if type(v) == "number" then v = { v, v } end
  if type(v) ~= "table" or #v ~= 2 then return nil end
  for i = 1, 2 do
    if type(v[i]) ~= "number" or not (v[i] > 0) or (int and math.type(v[i]) ~= "integer") then return nil end
  end
  return { v[1], v[2] }
end

function Upsample:__init(a, b)
  local opts
  if type(a) == "number" or (type(a) == "table" and a[1] ~= nil) then
    opts = b or {}
    if type(opts) ~= "table" then error("Upsample: options must be a table {mode =}, got " .. type(opts), 2) end
    opts = { scale_factor = a, size = opts.size, mode = opts.mode }
  else
    opts = a or {}
    if type(opts) ~= "table" then
      error("Upsample: expected a scale_factor or an options table {size =, scale_factor =, mode =}, got " .. type(opts), 2)
    end
  end
  if (opts.size == nil) == (opts.scale_factor == nil) then
    error("Upsample: give either size or scale_factor (one of them)", 2)
  end
  self.mode = opts.mode or "nearest"
  if self.mode ~= "nearest" then
    error(("Upsample: mode must be \"nearest\" (the only mode ember has), got %s"):format(tostring(self.mode)), 2)
  end
  if opts.size ~= nil then
    self.size = pair(opts.size, true)
    if not self.size then
      error("Upsample: size must be a positive integer or a pair of them, got " .. tostring(opts.size), 2)
    end
  else
    self.scale_factor = pair(opts.scale_factor)
    if not self.scale_factor then
      error("Upsample: scale_factor must be a positive number or a pair of them, got " .. tostring(opts.scale_factor), 2)
    end
  end
end

--- x upsampled (nearest neighbour).
-- @tparam Tensor x [N, C, H, W]
-- @treturn Tensor [N, C, h, w]
function Upsample:forward(x)
  if not ember.is_tensor(x) or x.ndim ~= 4 then
    error(("Upsample.forward: expected a 4-d input [N, C, H, W], got %s"):format(
      ember.is_tensor(x) and ("shape " .. shape_str(x)) or type(x)), 2)
  end
  return interpolate.interpolate("Upsample.forward", x, 2, self.size, self.scale_factor, self.mode)
end

--- The size or scale factor and the mode, for printing.
function Upsample:extra_repr()
  local v = self.scale_factor or self.size
  local s = v[1] == v[2] and ("%g"):format(v[1]) or ("(%g, %g)"):format(v[1], v[2])
  return ("%s=%s, mode=%s"):format(self.scale_factor and "scale_factor" or "size", s, self.mode)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Upsample.forward = require("ember._errors").wrap(Upsample.forward)

return Upsample
