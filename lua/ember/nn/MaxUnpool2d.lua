--- nn.MaxUnpool2d(kernel_size [, {stride = kernel_size, padding = 0}]): the inverse of
-- nn.MaxPool2d with return_indices: each value put back at its (1-based) index in a zero output,
-- as torch.nn.MaxUnpool2d (`nn.functional.max_unpool2d`); forward(x, indices [, output_size]).
-- Errors name nn.MaxUnpool2d (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage local pool = nn.MaxPool2d(2, {return_indices = true})
-- local y, idx = pool(ember.randn(1, 2, 4, 4))
-- print(nn.MaxUnpool2d(2)(y, idx).shape)   --> ember.Size{1, 2, 4, 4}
-- @classmod nn.MaxUnpool2d
local Module = require "ember.nn.Module"
local fmt = require("ember.nn._conv").fmt -- a size as PyTorch prints it
local check_size = require("ember.nn._conv").check_size -- a size option, as the function reads it

local MaxUnpool2d = Module:extend("MaxUnpool2d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
MaxUnpool2d.SIGNATURE = { sizes = { "kernel_size" }, options = { "stride", "padding" } }
MaxUnpool2d._nd = 2 -- the dims unpooled (nn.MaxUnpool3d is this class with 3)

function MaxUnpool2d:__init(kernel_size, opts)
  local name, nd = self.__name, self._nd
  opts = Module.check_options("nn." .. name, opts, { "stride", "padding" })
  check_size(name, "kernel_size", kernel_size, nd, 1)
  self.kernel_size = kernel_size
  local stride = opts.stride
  if stride ~= nil then
    check_size(name, "stride", stride, nd, 1)
  end
  self.stride = stride
  local padding = opts.padding
  if padding == nil then padding = 0 end
  check_size(name, "padding", padding, nd, 0)
  self.padding = padding
end

--- The unpooled input.
-- @tparam Tensor x the pooled values
-- @tparam Tensor indices int64, nn.MaxPool2d's (1-based)
-- @tparam table output_size (optional) the output's spatial size (or whole shape)
-- @treturn Tensor
function MaxUnpool2d:forward(x, indices, output_size)
  Module.check_tensor_input(self.__name .. ".forward", x)
  return require("ember.nn.functional")["max_unpool" .. self._nd .. "d"](x, indices, self.kernel_size, {
    stride = self.stride, padding = self.padding,
    output_size = require("ember.nn._functional_checks").forward_option(self.__name .. ".forward", "output_size", output_size),
  })
end

--- Its options, for printing.
function MaxUnpool2d:extra_repr()
  return ("kernel_size=%s, stride=%s, padding=%s"):format(
    fmt(self.kernel_size), fmt(self.stride or self.kernel_size), fmt(self.padding))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
MaxUnpool2d.forward = require("ember._errors").wrap(MaxUnpool2d.forward)

return MaxUnpool2d
