--- nn.Unfold(kernel_size [, {dilation = 1, padding = 0, stride = 1}]): the sliding blocks of
-- [N, C, H, W] (or [C, H, W]) as columns [N, C kh kw, blocks], as torch.nn.Unfold (`nn.functional.unfold`).
-- Errors name nn.Unfold (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage print(nn.Unfold(2)(ember.randn(1, 3, 4, 4)).shape)   --> ember.Size{1, 12, 9}
-- @classmod nn.Unfold
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local fmt = require("ember.nn._conv").fmt -- a size as PyTorch prints it

local Unfold = Module:extend("Unfold")

-- one option's check (the constructor's)
local function check(what, v, ok, want)
  if not ok then error(("Unfold: %s must be %s, got %s"):format(what, want, tostring(v)), 4) end
end

function Unfold:__init(kernel_size, opts)
  opts = Module.check_options("nn.Unfold", opts, { "dilation", "padding", "stride" })
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
Unfold.forward = require("ember._errors").wrap(Unfold.forward)

return Unfold
