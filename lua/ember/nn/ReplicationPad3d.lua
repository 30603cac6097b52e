--- nn.ReplicationPad3d(padding) or nn.ReplicationPad3d{padding =}: pads the last three dims of [N, C, D, H, W]
-- (or [C, D, H, W]) with copies of the input's edge values, as torch.nn.ReplicationPad3d (`ember.pad`, mode "replicate").
-- padding is a non-negative integer (every side) or {left, right, top, bottom, front, back}.
-- The output is [N, C, D + front + back, H + top + bottom, W + left + right].
-- Errors name nn.ReplicationPad3d: bad padding, an input that is not 4-d or 5-d or too small for the padding.
-- @usage local pad = nn.ReplicationPad3d({2, 0, 1, 1, 0, 3})
-- print(pad(ember.randn(2, 3, 4, 4, 4)).shape)   --> ember.Size{2, 3, 7, 6, 6}
-- @classmod nn.ReplicationPad3d
local Module = require "ember.nn.Module"
local padding = require "ember.nn._padding"

local ReplicationPad3d = Module:extend("ReplicationPad3d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ReplicationPad3d.SIGNATURE = { sizes = { "padding" }, options = {} }

function ReplicationPad3d:__init(...)
  padding.setup(self, (padding.args("nn." .. self.__name, { "padding" }, ...)), false, 6)
end

--- x padded.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @treturn Tensor
function ReplicationPad3d:forward(x) return padding.forward(self, x, "replicate") end

--- The padding, for printing.
function ReplicationPad3d:extra_repr() return padding.repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ReplicationPad3d.forward = require("ember._errors").wrap(ReplicationPad3d.forward)

return ReplicationPad3d
