--- nn.ReflectionPad3d(padding) or nn.ReflectionPad3d{padding =}: pads the last three dims of [N, C, D, H, W]
-- (or [C, D, H, W]) with the mirror image of the input about its edges (the edge
-- itself not repeated, so each amount is less than the dim's size), as torch.nn.ReflectionPad3d (`ember.pad`, mode "reflect").
-- padding is a non-negative integer (every side) or {left, right, top, bottom, front, back}.
-- The output is [N, C, D + front + back, H + top + bottom, W + left + right].
-- Errors name nn.ReflectionPad3d: bad padding, an input that is not 4-d or 5-d or too small for the padding.
-- @usage local pad = nn.ReflectionPad3d({1, 1, 2, 0, 1, 1})
-- print(pad(ember.randn(2, 3, 4, 4, 4)).shape)   --> ember.Size{2, 3, 6, 6, 6}
-- @classmod nn.ReflectionPad3d
local Module = require "ember.nn.Module"
local padding = require "ember.nn._padding"

local ReflectionPad3d = Module:extend("ReflectionPad3d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ReflectionPad3d.SIGNATURE = { sizes = { "padding" }, options = {} }

function ReflectionPad3d:__init(...)
  padding.setup(self, (padding.args("nn." .. self.__name, { "padding" }, ...)), false, 6)
end

--- x padded.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @treturn Tensor
function ReflectionPad3d:forward(x) return padding.forward(self, x, "reflect") end

--- The padding, for printing.
function ReflectionPad3d:extra_repr() return padding.repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ReflectionPad3d.forward = require("ember._errors").wrap(ReflectionPad3d.forward)

return ReflectionPad3d
