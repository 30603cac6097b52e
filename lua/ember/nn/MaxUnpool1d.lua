--- nn.MaxUnpool1d(kernel_size [, {stride = kernel_size, padding = 0}]): the inverse of
-- nn.MaxPool1d with return_indices: each value put back at its (1-based) index in a zero output,
-- as torch.nn.MaxUnpool1d (`nn.functional.max_unpool1d`); forward(x, indices [, output_size]).
-- Errors name nn.MaxUnpool1d (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage local pool = nn.MaxPool1d(2, {return_indices = true})
-- local y, idx = pool(ember.randn(1, 2, 4))
-- print(nn.MaxUnpool1d(2)(y, idx).shape)   --> ember.Size{1, 2, 4}
-- @classmod nn.MaxUnpool1d
local Module = require "ember.nn.Module"
local fmt = require("ember.nn._conv").fmt -- a size as PyTorch prints it
local check_size = require("ember.nn._conv").check_size -- a size option, as the function reads it

local MaxUnpool1d = Module:extend("MaxUnpool1d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
MaxUnpool1d.SIGNATURE = { sizes = { "kernel_size" }, options = { "stride", "padding" } }

function MaxUnpool1d:__init(kernel_size, opts)
  opts = Module.check_options("nn.MaxUnpool1d", opts, { "stride", "padding" })
  check_size("MaxUnpool1d", "kernel_size", kernel_size, 1, 1)
  self.kernel_size = kernel_size
  local stride = opts.stride
  if stride ~= nil then
    check_size("MaxUnpool1d", "stride", stride, 1, 1)
  end
  self.stride = stride
  local padding = opts.padding
  if padding == nil then padding = 0 end
  check_size("MaxUnpool1d", "padding", padding, 1, 0)
  self.padding = padding
end

--- The unpooled input.
-- @tparam Tensor x the pooled values
-- @tparam Tensor indices int64, nn.MaxPool1d's (1-based)
-- @tparam table output_size (optional) the output's spatial size (or whole shape)
-- @treturn Tensor
function MaxUnpool1d:forward(x, indices, output_size)
  Module.check_tensor_input("MaxUnpool1d.forward", x)
  return require("ember.nn.functional").max_unpool1d(x, indices, self.kernel_size, {
    stride = self.stride, padding = self.padding,
    output_size = require("ember.nn._functional_checks").forward_option("MaxUnpool1d.forward", "output_size", output_size),
  })
end

--- Its options, for printing.
function MaxUnpool1d:extra_repr()
  return ("kernel_size=%s, stride=%s, padding=%s"):format(
    fmt(self.kernel_size), fmt(self.stride or self.kernel_size), fmt(self.padding))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
MaxUnpool1d.forward = require("ember._errors").wrap(MaxUnpool1d.forward)

return MaxUnpool1d
