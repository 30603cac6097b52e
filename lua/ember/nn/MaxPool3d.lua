--- nn.MaxPool3d(kernel_size [, {stride, padding, dilation, ceil_mode, return_indices}]): max pooling over the windows of
-- [N, C, D, H, W] (or [C, D, H, W]), as torch.nn.MaxPool3d (`nn.functional.max_pool3d`).
-- Sizes are a number or a triple {d, h, w}; stride defaults to kernel_size. With return_indices the
-- forward also returns where each max is (1-based flat indices into each D x H x W volume), for
-- nn.MaxUnpool3d.
-- Errors name nn.MaxPool3d: bad options, an input that is not 4-d or 5-d, a window larger than the padded input.
-- @usage print(nn.MaxPool3d(2)(ember.randn(1, 2, 4, 4, 4)).shape)   --> ember.Size{1, 2, 2, 2, 2}
-- @classmod nn.MaxPool3d
local Module = require "ember.nn.Module"

local MaxPool3d = Module:extend("MaxPool3d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
MaxPool3d.SIGNATURE = { sizes = { "kernel_size" },
  options = { "stride", "padding", "dilation", "return_indices", "ceil_mode" } }

function MaxPool3d:__init(kernel_size, opts)
  local size = require("ember.nn._conv").check_size
  self.kernel_size = size("MaxPool3d", "kernel_size", kernel_size, 3, 1)
  opts = Module.check_options("nn.MaxPool3d", opts, { "stride", "padding", "dilation", "ceil_mode", "return_indices" })
  for what, min in pairs { stride = 1, padding = 0, dilation = 1 } do
    if opts[what] ~= nil then size("MaxPool3d", what, opts[what], 3, min) end
  end
  self.opts = opts -- the options as given
  -- PyTorch's attributes (stride defaults to kernel_size); forward reads them
  self.stride, self.padding, self.dilation = opts.stride or self.kernel_size, opts.padding or 0, opts.dilation or 1
  self.ceil_mode = opts.ceil_mode
  if self.ceil_mode == nil then self.ceil_mode = false end
  self.return_indices = opts.return_indices
  if self.return_indices == nil then self.return_indices = false end
end

--- The pooled input (and the indices, with return_indices).
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @treturn Tensor
-- @treturn[opt] Tensor int64 indices, with return_indices
function MaxPool3d:forward(x)
  return require("ember.nn._functional_impl")._pool3d("MaxPool3d.forward", "max", x, self.kernel_size, {
    stride = self.stride, padding = self.padding, dilation = self.dilation, ceil_mode = self.ceil_mode,
    return_indices = self.return_indices })
end

--- Its sizes, for printing.
function MaxPool3d:extra_repr()
  local fmt = require("ember.nn._conv").fmt
  -- PyTorch's: kernel_size, stride, padding, dilation, ceil_mode (return_indices is not printed there)
  return ("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s"):format(fmt(self.kernel_size),
    fmt(self.stride), fmt(self.padding), fmt(self.dilation), tostring(self.ceil_mode == true))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
MaxPool3d.forward = require("ember._errors").wrap(MaxPool3d.forward)

return MaxPool3d
