--- nn.Fold(output_size, kernel_size [, {dilation = 1, padding = 0, stride = 1}]): columns
-- [N, C kh kw, blocks] summed back into [N, C, H, W] (nn.Unfold's adjoint), as torch.nn.Fold (`nn.functional.fold`).
-- Errors name nn.Fold at the caller's line: its options, and its input (checked as nn.functional's, named Fold.forward).
-- @usage print(nn.Fold({4, 4}, 2)(ember.randn(1, 12, 9)).shape)   --> ember.Size{1, 3, 4, 4}
-- @classmod nn.Fold
local Module = require "ember.nn.Module"
local fmt = require("ember.nn._conv").fmt -- a size as PyTorch prints it
local check_size = require("ember.nn._conv").check_size -- a size option, as the function reads it

local Fold = Module:extend("Fold")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
Fold.SIGNATURE = { sizes = { "output_size", "kernel_size" },
  options = { "dilation", "padding", "stride" } }

function Fold:__init(output_size, kernel_size, opts)
  opts = Module.check_options("nn.Fold", opts, { "dilation", "padding", "stride" })
  check_size("Fold", "output_size", output_size, 2, 1)
  self.output_size = output_size
  check_size("Fold", "kernel_size", kernel_size, 2, 1)
  self.kernel_size = kernel_size
  local dilation = opts.dilation
  if dilation == nil then dilation = 1 end
  check_size("Fold", "dilation", dilation, 2, 1)
  self.dilation = dilation
  local padding = opts.padding
  if padding == nil then padding = 0 end
  check_size("Fold", "padding", padding, 2, 0)
  self.padding = padding
  local stride = opts.stride
  if stride == nil then stride = 1 end
  check_size("Fold", "stride", stride, 2, 1)
  self.stride = stride
end

--- The folded image.
-- @tparam Tensor x [N, C kh kw, blocks] or [C kh kw, blocks]
-- @treturn Tensor
function Fold:forward(x)
  Module.check_tensor_input("Fold.forward", x)
  return require("ember.nn.functional").fold(x, self.output_size, self.kernel_size, {
    dilation = self.dilation, padding = self.padding, stride = self.stride,
  })
end

--- Its options, for printing.
function Fold:extra_repr()
  return ("output_size=%s, kernel_size=%s, dilation=%s, padding=%s, stride=%s"):format(
    fmt(self.output_size), fmt(self.kernel_size), fmt(self.dilation), fmt(self.padding), fmt(self.stride))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Fold.forward = require("ember._errors").wrap(Fold.forward, true)

return Fold
