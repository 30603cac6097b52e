--- nn.AvgPool3d(kernel_size [, {stride, padding, ceil_mode, count_include_pad, divisor_override}]): average
-- pooling over the windows of
-- [N, C, D, H, W] (or [C, D, H, W]), as torch.nn.AvgPool3d (`nn.functional.avg_pool3d`).
-- Sizes are a number or a triple {d, h, w}; stride defaults to kernel_size.
-- Errors name nn.AvgPool3d: bad options, an input that is not 4-d or 5-d, a window larger than the padded input.
-- @usage print(nn.AvgPool3d(2)(ember.randn(1, 2, 4, 4, 4)).shape)   --> ember.Size{1, 2, 2, 2, 2}
-- @classmod nn.AvgPool3d
local Module = require "ember.nn.Module"

local AvgPool3d = Module:extend("AvgPool3d")

function AvgPool3d:__init(kernel_size, opts)
  local size = require("ember.nn._conv").check_size
  self.kernel_size = size("AvgPool3d", "kernel_size", kernel_size, 3, 1)
  self.opts = Module.check_options("nn.AvgPool3d", opts, { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" })
  for what, min in pairs { stride = 1, padding = 0 } do
    if self.opts[what] ~= nil then size("AvgPool3d", what, self.opts[what], 3, min) end
  end
end

--- The pooled input.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @treturn Tensor
function AvgPool3d:forward(x)
  return require("ember.nn._functional_impl")._pool3d("AvgPool3d.forward", "avg", x, self.kernel_size, self.opts)
end

--- Its sizes, for printing.
function AvgPool3d:extra_repr()
  local fmt = require("ember.nn._conv").fmt
  -- PyTorch's: kernel_size, stride, padding always; then the options given
  local s = "kernel_size=" .. fmt(self.kernel_size) .. ", stride=" .. fmt(self.opts.stride or self.kernel_size)
    .. ", padding=" .. fmt(self.opts.padding or 0)
  for _, k in ipairs { "ceil_mode", "count_include_pad", "divisor_override" } do
    if self.opts[k] ~= nil then s = s .. ", " .. k .. "=" .. fmt(self.opts[k]) end
  end
  return s
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AvgPool3d.forward = require("ember._errors").wrap(AvgPool3d.forward)

return AvgPool3d
