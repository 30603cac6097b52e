--- nn.Fold(output_size, kernel_size [, {dilation = 1, padding = 0, stride = 1}]): columns
-- [N, C kh kw, blocks] summed back into [N, C, H, W] (nn.Unfold's adjoint), as torch.nn.Fold (`nn.functional.fold`).
-- Errors name nn.Fold (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage print(nn.Fold({4, 4}, 2)(ember.randn(1, 12, 9)).shape)   --> ember.Size{1, 3, 4, 4}
-- @classmod nn.Fold
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local fmt = require("ember.nn._conv").fmt -- a size as PyTorch prints it

local Fold = Module:extend("Fold")

-- one option's check (the constructor's)
local function check(what, v, ok, want)
  if not ok then error(("Fold: %s must be %s, got %s"):format(what, want, tostring(v)), 4) end
end

function Fold:__init(output_size, kernel_size, opts)
  opts = Module.check_options("nn.Fold", opts, { "dilation", "padding", "stride" })
  check("output_size", output_size, math.type(output_size) == "integer" or type(output_size) == "table",
    "an integer or a table of them")
  self.output_size = output_size
  check("kernel_size", kernel_size, math.type(kernel_size) == "integer" or type(kernel_size) == "table",
    "an integer or a table of them")
  self.kernel_size = kernel_size
  local dilation = opts.dilation
  if dilation == nil then dilation = 1 end
  check("dilation", dilation, math.type(dilation) == "integer" or type(dilation) == "table",
    "an integer or a table of them")
  self.dilation = dilation
  local padding = opts.padding
  if padding == nil then padding = 0 end
  check("padding", padding, math.type(padding) == "integer" or type(padding) == "table",
    "an integer or a table of them")
  self.padding = padding
  local stride = opts.stride
  if stride == nil then stride = 1 end
  check("stride", stride, math.type(stride) == "integer" or type(stride) == "table", "an integer or a table of them")
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
Fold.forward = require("ember._errors").wrap(Fold.forward)

return Fold
