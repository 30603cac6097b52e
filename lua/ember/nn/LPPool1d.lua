--- nn.LPPool1d(norm_type, kernel_size [, {stride = kernel_size, ceil_mode = false}]): the p-norm
-- (p = norm_type) of each window, (sum x^p)^(1/p), as torch.nn.LPPool1d (`nn.functional.lp_pool1d`).
-- Errors name nn.LPPool1d at the caller's line: its options, and its input (checked as nn.functional's, named LPPool1d.forward).
-- @usage print(nn.LPPool1d(2, 2)(ember.randn(1, 3, 8)).shape)   --> ember.Size{1, 3, 4}
-- @classmod nn.LPPool1d
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local fmt = require("ember.nn._conv").fmt -- a size as PyTorch prints it

local LPPool1d = Module:extend("LPPool1d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
LPPool1d.SIGNATURE = { sizes = { "norm_type", "kernel_size" },
  options = { "stride", "ceil_mode" } }

-- one option's check (the constructor's), naming the module
local function check(name, what, v, ok, want)
  if not ok then error(("%s: %s must be %s, got %s"):format(name, what, want, tostring(v)), 4) end
end

-- The options and their checks; nn.LPPool2d's too (self.__name names the module).
function LPPool1d:__init(norm_type, kernel_size, opts)
  local name = self.__name
  opts = Module.check_options("nn." .. name, opts, { "stride", "ceil_mode" })
  check(name, "norm_type", norm_type, type(norm_type) == "number", "a number")
  self.norm_type = norm_type
  check(name, "kernel_size", kernel_size, math.type(kernel_size) == "integer" or type(kernel_size) == "table",
    "an integer or a table of them")
  self.kernel_size = kernel_size
  local stride = opts.stride
  if stride ~= nil then
    check(name, "stride", stride, math.type(stride) == "integer" or type(stride) == "table",
      "an integer or a table of them")
  end
  self.stride = stride
  local ceil_mode = opts.ceil_mode
  if ceil_mode == nil then ceil_mode = false end
  check(name, "ceil_mode", ceil_mode, type(ceil_mode) == "boolean", "a boolean")
  self.ceil_mode = ceil_mode
end

--- The pooled input.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @treturn Tensor
function LPPool1d:forward(x)
  Module.check_tensor_input("LPPool1d.forward", x)
  return require("ember.nn.functional").lp_pool1d(x, self.norm_type, self.kernel_size, {
    stride = self.stride, ceil_mode = self.ceil_mode,
  })
end

--- Its options, for printing (nn.LPPool2d's too).
function LPPool1d:extra_repr()
  return ("norm_type=%g, kernel_size=%s, stride=%s, ceil_mode=%s"):format(
    self.norm_type, fmt(self.kernel_size), fmt(self.stride or self.kernel_size), tostring(self.ceil_mode))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LPPool1d.forward = require("ember._errors").wrap(LPPool1d.forward, true)

return LPPool1d
