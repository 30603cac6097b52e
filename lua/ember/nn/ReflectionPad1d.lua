--- nn.ReflectionPad1d(padding): pads the last dim of [N, C, L] (or [C, L]) with the mirror image of the input about its edges (the edge itself not
-- repeated, so each amount is less than the length),
-- as torch.nn.ReflectionPad1d (`ember.pad`, mode "reflect"). padding is a non-negative integer (both
-- sides) or {left, right}. The output is [N, C, L + left + right].
-- Errors name nn.ReflectionPad1d: bad padding, an input that is not 2-d or 3-d or too small for the padding.
-- @usage local pad = nn.ReflectionPad1d({2, 1})
-- print(pad(ember.randn(2, 3, 4)).shape)   --> ember.Size{2, 3, 7}
-- @classmod nn.ReflectionPad1d
local Module = require "ember.nn.Module"
local padding = require "ember.nn._padding"

local ReflectionPad1d = Module:extend("ReflectionPad1d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ReflectionPad1d.SIGNATURE = { sizes = { "padding" }, options = {} }

function ReflectionPad1d:__init(pad) padding.setup(self, pad, false, 2) end

--- x padded.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @treturn Tensor
function ReflectionPad1d:forward(x) return padding.forward(self, x, "reflect") end

--- The padding, for printing.
function ReflectionPad1d:extra_repr() return padding.repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ReflectionPad1d.forward = require("ember._errors").wrap(ReflectionPad1d.forward)

return ReflectionPad1d
