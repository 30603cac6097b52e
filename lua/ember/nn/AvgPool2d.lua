--- nn.AvgPool2d(kernel_size [, {stride=kernel_size, padding=0,
-- ceil_mode=false, count_include_pad=true, divisor_override=}]): the mean of each window of
-- [N, C, H, W] (or [C, H, W]), as torch.nn.AvgPool2d. Sizes are a number
-- or a pair {h, w}. Padding is zeros; with count_include_pad (PyTorch's
-- default) they count in the divisor (kernel_h * kernel_w), without it
-- only the input's elements do; divisor_override replaces the divisor.
-- Padding is at most half the kernel, as in PyTorch. Output size as
-- `nn.MaxPool2d` (no dilation; ceil_mode too): a window that ceil_mode
-- lets run past the padding divides by its positions inside it, as PyTorch.
-- Composed from strided views (one per kernel offset) and a sum.
-- Errors name nn.AvgPool2d: bad sizes, an input that is not 3-d or 4-d, a window larger than the padded input.
-- @usage local pool = nn.AvgPool2d(2)
-- local y = nn.AvgPool2d(3, {stride = 1, padding = 1})(ember.randn(2, 4, 8, 8))   -- [2, 4, 8, 8]
-- @classmod nn.AvgPool2d
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local MaxPool2d = require "ember.nn.MaxPool2d"
local pool = require "ember.nn._pool"

local AvgPool2d = Module:extend("AvgPool2d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
AvgPool2d.SIGNATURE = { sizes = { "kernel_size" },
  options = { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" } }

function AvgPool2d:__init(kernel_size, opts)
  opts = opts or {}
  if type(opts) == "table" and opts.dilation ~= nil then error("AvgPool2d: there is no dilation option", 2) end
  MaxPool2d._sizes(self, "AvgPool2d", kernel_size, opts)
  self.count_include_pad = opts.count_include_pad ~= false
  local dv = opts.divisor_override
  if dv ~= nil and (math.type(dv) ~= "integer" or dv < 1) then
    error("AvgPool2d: divisor_override must be a positive integer, got " .. tostring(dv), 2)
  end
  self.divisor_override = dv
end

--- The mean of each window.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor [N, C, Ho, Wo] (or [C, Ho, Wo])
function AvgPool2d:forward(x)
  local xb, unbatch = MaxPool2d._check(self, "AvgPool2d", x)
  return unbatch(pool.avg2d(self, xb))
end

-- The window means of xb [N, C, H, W] under cfg's kernel_size, stride,
-- padding, dilation (pairs), count_include_pad and divisor_override (shared
-- with nn.AvgPool1d, which passes a [N, C, 1, L] view).

--- The sizes, for printing.
function AvgPool2d:extra_repr()
  local function f(v) return v[1] == v[2] and tostring(v[1]) or ("(%d, %d)"):format(v[1], v[2]) end
  return ("kernel_size=%s, stride=%s, padding=%s, %scount_include_pad=%s"):format(f(self.kernel_size),
    f(self.stride), f(self.padding), self.ceil_mode and "ceil_mode=true, " or "", tostring(self.count_include_pad))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AvgPool2d.forward = require("ember._errors").wrap(AvgPool2d.forward)

return AvgPool2d
