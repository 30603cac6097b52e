--- nn.ConstantPad2d(padding, value): pads the last two dims of [N, C, H, W]
-- (or [C, H, W]) with value, as torch.nn.ConstantPad2d (`ember.pad`).
-- padding is a number (every side) or {left, right, top, bottom}; negative
-- amounts crop. The output is [N, C, H + top + bottom, W + left + right].
-- Errors name nn.ConstantPad2d: bad padding or value, an input that is not 3-d or 4-d.
-- @usage local pad = nn.ConstantPad2d({1, 2, 0, 1}, -1)
-- print(pad(ember.randn(2, 3, 4, 4)).shape)   --> ember.Size{2, 3, 5, 7}
-- @classmod nn.ConstantPad2d
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local padding = require "ember.nn._padding"

local ConstantPad2d = Module:extend("ConstantPad2d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ConstantPad2d.SIGNATURE = { sizes = { "padding", "value" }, options = {} }

function ConstantPad2d:__init(pad, value)
  padding.setup(self, pad, true)
  if type(value) ~= "number" then error(self.__name .. ": value must be a number, got " .. type(value), 2) end
  self.value = value
end

--- x padded with value.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor
function ConstantPad2d:forward(x) return padding.forward(self, x, "constant", self.value) end

--- The padding and value, for printing.
function ConstantPad2d:extra_repr() return ("padding=%s, value=%g"):format(padding.repr(self), self.value) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ConstantPad2d.forward = require("ember._errors").wrap(ConstantPad2d.forward)

return ConstantPad2d
