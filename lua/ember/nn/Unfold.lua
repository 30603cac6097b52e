--- nn.Unfold(kernel_size [, {dilation = 1, padding = 0, stride = 1}]): the sliding blocks of
-- [N, C, H, W] (or [C, H, W]) as columns [N, C kh kw, blocks], as torch.nn.Unfold (`nn.functional.unfold`).
-- Errors name nn.Unfold at the caller's line: its options, and its input (checked as nn.functional's, named Unfold.forward).
-- @usage print(nn.Unfold(2)(ember.randn(1, 3, 4, 4)).shape)   --> ember.Size{1, 12, 9}
-- @classmod nn.Unfold
local Module = require "ember.nn.Module"
local fmt = require("ember.nn._conv").fmt -- a size as PyTorch prints it
local check_size = require("ember.nn._conv").check_size -- a size option, as the function reads it

local Unfold = Module:extend("Unfold")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
Unfold.SIGNATURE = { sizes = { "kernel_size" },
  options = { "dilation", "padding", "stride" } }

function Unfold:__init(kernel_size, opts)
  opts = Module.check_options("nn.Unfold", opts, { "dilation", "padding", "stride" })
  check_size("Unfold", "kernel_size", kernel_size, 2, 1)
  self.kernel_size = kernel_size
  local dilation = opts.dilation
  if dilation == nil then dilation = 1 end
  check_size("Unfold", "dilation", dilation, 2, 1)
  self.dilation = dilation
  local padding = opts.padding
  if padding == nil then padding = 0 end
  check_size("Unfold", "padding", padding, 2, 0)
  self.padding = padding
  local stride = opts.stride
  if stride == nil then stride = 1 end
  check_size("Unfold", "stride", stride, 2, 1)
  self.stride = stride
end

--- The columns.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor
function Unfold:forward(x)
  Module.check_tensor_input("Unfold.forward", x)
  return require("ember.nn.functional").unfold(x, self.kernel_size, {
    dilation = self.dilation, padding = self.padding, stride = self.stride,
  })
end

--- Its options, for printing.
function Unfold:extra_repr()
  return ("kernel_size=%s, dilation=%s, padding=%s, stride=%s"):format(
    fmt(self.kernel_size), fmt(self.dilation), fmt(self.padding), fmt(self.stride))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Unfold.forward = require("ember._errors").wrap(Unfold.forward, true)

return Unfold
