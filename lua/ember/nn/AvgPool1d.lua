--- nn.AvgPool1d(kernel_size [, {stride=kernel_size, padding=0,
-- ceil_mode=false, count_include_pad=true}]): the mean of each window of [N, C, L] (or
-- [C, L]), as torch.nn.AvgPool1d. Sizes are a number (or a table of one);
-- padding is zeros (at most half the kernel), counted in the divisor with
-- count_include_pad (PyTorch's default), not counted without. Output size
-- as `nn.MaxPool1d` (ceil_mode too). It is `nn.AvgPool2d`'s code on a [N, C, 1, L] view.
-- Errors name nn.AvgPool1d: bad sizes or options, an input that is not 2-d or 3-d, a window larger than the padded input.
-- @usage local pool = nn.AvgPool1d(4)
-- print(pool(ember.randn(2, 3, 16)).shape)   --> ember.Size{2, 3, 4}
-- @classmod nn.AvgPool1d
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local MaxPool1d = require "ember.nn.MaxPool1d"
local pool = require "ember.nn._pool"

local AvgPool1d = Module:extend("AvgPool1d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
AvgPool1d.SIGNATURE = { sizes = { "kernel_size" },
  options = { "stride", "padding", "ceil_mode", "count_include_pad" } }

function AvgPool1d:__init(kernel_size, opts)
  for _, o in ipairs { "dilation", "divisor_override" } do
    if type(opts) == "table" and opts[o] ~= nil then error("AvgPool1d: there is no " .. o .. " option", 2) end
  end
  MaxPool1d._sizes(self, "AvgPool1d", kernel_size, opts)
  self.count_include_pad = (opts or {}).count_include_pad ~= false
  self._cfg.count_include_pad = self.count_include_pad
end

--- The mean of each window.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @treturn Tensor [N, C, Lo] (or [C, Lo])
function AvgPool1d:forward(x)
  local x4, back = MaxPool1d._check(self, "AvgPool1d", x)
  return back(pool.avg2d(self._cfg, x4))
end

--- The sizes, for printing.
function AvgPool1d:extra_repr()
  return ("kernel_size=%d, stride=%d, padding=%d, %scount_include_pad=%s"):format(self.kernel_size, self.stride,
    self.padding, self.ceil_mode and "ceil_mode=true, " or "", tostring(self.count_include_pad))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AvgPool1d.forward = require("ember._errors").wrap(AvgPool1d.forward)

return AvgPool1d
