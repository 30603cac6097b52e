--- nn.AvgPool3d(kernel_size [, {stride, padding, ceil_mode, count_include_pad, divisor_override}]): average
-- pooling over the windows of
-- [N, C, D, H, W] (or [C, D, H, W]), as torch.nn.AvgPool3d (`nn.functional.avg_pool3d`).
-- Sizes are a number or a triple {d, h, w}; stride defaults to kernel_size.
-- Errors name nn.AvgPool3d: bad options, an input that is not 4-d or 5-d, a window larger than the padded input.
-- @usage print(nn.AvgPool3d(2)(ember.randn(1, 2, 4, 4, 4)).shape)   --> ember.Size{1, 2, 2, 2, 2}
-- @classmod nn.AvgPool3d
local Module = require "ember.nn.Module"

local AvgPool3d = Module:extend("AvgPool3d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
AvgPool3d.SIGNATURE = { sizes = { "kernel_size" },
  options = { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" } }

function AvgPool3d:__init(kernel_size, opts)
  local size = require("ember.nn._conv").check_size
  self.kernel_size = size("AvgPool3d", "kernel_size", kernel_size, 3, 1)
  opts = Module.check_options("nn.AvgPool3d", opts, { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" })
  for what, min in pairs { stride = 1, padding = 0 } do
    if opts[what] ~= nil then size("AvgPool3d", what, opts[what], 3, min) end
  end
  self.opts = opts -- the options as given
  -- PyTorch's attributes (stride defaults to kernel_size); forward reads them
  self.stride, self.padding = opts.stride or self.kernel_size, opts.padding or 0
  self.ceil_mode = opts.ceil_mode
  if self.ceil_mode == nil then self.ceil_mode = false end
  self.count_include_pad = opts.count_include_pad
  if self.count_include_pad == nil then self.count_include_pad = true end
  self.divisor_override = opts.divisor_override
end

--- The pooled input.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @treturn Tensor
function AvgPool3d:forward(x)
  return require("ember.nn._functional_impl")._pool3d("AvgPool3d.forward", "avg", x, self.kernel_size, {
    stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode, count_include_pad = self.count_include_pad,
    divisor_override = self.divisor_override })
end

--- Its sizes, for printing.
function AvgPool3d:extra_repr()
  local fmt = require("ember.nn._conv").fmt
  -- PyTorch's: kernel_size, stride, padding always; then the options that are not the defaults
  local s = "kernel_size=" .. fmt(self.kernel_size) .. ", stride=" .. fmt(self.stride) .. ", padding=" .. fmt(self.padding)
  local default = { ceil_mode = false, count_include_pad = true }
  for _, k in ipairs { "ceil_mode", "count_include_pad", "divisor_override" } do
    if self[k] ~= nil and self[k] ~= default[k] then s = s .. ", " .. k .. "=" .. fmt(self[k]) end
  end
  return s
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AvgPool3d.forward = require("ember._errors").wrap(AvgPool3d.forward)

return AvgPool3d
