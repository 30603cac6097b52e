--- nn.ReflectionPad2d(padding): pads the last two dims of [N, C, H, W] (or
-- [C, H, W]) with the mirror image of the input about its edges (the edge
-- itself not repeated, so each amount is less than the dim's size), as
-- torch.nn.ReflectionPad2d (`ember.pad`, mode "reflect"). padding is a non-negative number (every side) or
-- {left, right, top, bottom}.
-- Errors name nn.ReflectionPad2d: bad padding, an input that is not 3-d or 4-d or too small for the padding.
-- @usage local pad = nn.ReflectionPad2d({1, 1, 2, 0})
-- print(pad(ember.randn(2, 3, 4, 4)).shape)   --> ember.Size{2, 3, 6, 6}
-- @classmod nn.ReflectionPad2d
local Module = require "ember.nn.Module"
local padding = require "ember.nn._padding"

local ReflectionPad2d = Module:extend("ReflectionPad2d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ReflectionPad2d.SIGNATURE = { sizes = { "padding" }, options = {} }

function ReflectionPad2d:__init(pad) padding.setup(self, pad, false) end

--- x padded.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor
function ReflectionPad2d:forward(x) return padding.forward(self, x, "reflect") end

--- The padding, for printing.
function ReflectionPad2d:extra_repr() return padding.repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ReflectionPad2d.forward = require("ember._errors").wrap(ReflectionPad2d.forward)

return ReflectionPad2d
