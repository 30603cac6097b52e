--- nn.ConstantPad1d(padding, value): pads the last dim of [N, C, L] (or [C, L]) with value, as
-- torch.nn.ConstantPad1d (`ember.pad`). padding is an integer (both sides) or {left, right};
-- negative amounts crop. The output is [N, C, L + left + right].
-- Errors name nn.ConstantPad1d: bad padding or value, an input that is not 2-d or 3-d.
-- @usage local pad = nn.ConstantPad1d({2, 1}, 0.5)
-- print(pad(ember.randn(2, 3, 4)).shape)   --> ember.Size{2, 3, 7}
-- @classmod nn.ConstantPad1d
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local padding = require "ember.nn._padding"

local ConstantPad1d = Module:extend("ConstantPad1d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ConstantPad1d.SIGNATURE = { sizes = { "padding", "value" }, options = {} }

function ConstantPad1d:__init(pad, value)
  padding.setup(self, pad, true, 2)
  if type(value) ~= "number" then error(self.__name .. ": value must be a number, got " .. type(value), 2) end
  self.value = value
end

--- x padded with value.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @treturn Tensor
function ConstantPad1d:forward(x) return padding.forward(self, x, "constant", self.value) end

--- The padding and value, for printing.
function ConstantPad1d:extra_repr() return ("padding=%s, value=%g"):format(padding.repr(self), self.value) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ConstantPad1d.forward = require("ember._errors").wrap(ConstantPad1d.forward)

return ConstantPad1d
