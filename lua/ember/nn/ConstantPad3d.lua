--- nn.ConstantPad3d(padding, value) or nn.ConstantPad3d{padding =, value =}: pads the last three dims of
-- [N, C, D, H, W] (or [C, D, H, W]) with value, as torch.nn.ConstantPad3d (`ember.pad`).
-- padding is an integer (every side) or {left, right, top, bottom, front, back}; negative
-- amounts crop. The output is [N, C, D + front + back, H + top + bottom, W + left + right].
-- Errors name nn.ConstantPad3d: bad padding or value, an input that is not 4-d or 5-d.
-- @usage local pad = nn.ConstantPad3d({1, 0, 0, 2, 1, 1}, 0.5)
-- print(pad(ember.randn(2, 3, 4, 4, 4)).shape)   --> ember.Size{2, 3, 6, 6, 5}
-- @classmod nn.ConstantPad3d
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local padding = require "ember.nn._padding"

local ConstantPad3d = Module:extend("ConstantPad3d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ConstantPad3d.SIGNATURE = { sizes = { "padding", "value" }, options = {} }

function ConstantPad3d:__init(...)
  local pad, value = padding.args("nn." .. self.__name, { "padding", "value" }, ...)
  padding.setup(self, pad, true, 6)
  if type(value) ~= "number" then error(self.__name .. ": value must be a number, got " .. type(value), 3) end
  self.value = value
end

--- x padded with value.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @treturn Tensor
function ConstantPad3d:forward(x) return padding.forward(self, x, "constant", self.value) end

--- The padding and value, for printing.
function ConstantPad3d:extra_repr()
  return ("padding=%s, value=%s"):format(padding.repr(self), padding.py_number(self.value))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ConstantPad3d.forward = require("ember._errors").wrap(ConstantPad3d.forward)

return ConstantPad3d
