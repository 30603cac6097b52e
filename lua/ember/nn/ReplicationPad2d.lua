--- nn.ReplicationPad2d(padding): pads the last two dims of [N, C, H, W] (or
-- [C, H, W]) with copies of the input's edge rows and columns, as
-- torch.nn.ReplicationPad2d (`ember.pad`, mode "replicate"). padding is a
-- non-negative number (every side) or
-- {left, right, top, bottom}.
-- Errors name nn.ReplicationPad2d: bad padding, an input that is not 3-d or 4-d or too small for the padding.
-- @usage local pad = nn.ReplicationPad2d({1, 1, 2, 0})
-- print(pad(ember.randn(2, 3, 4, 4)).shape)   --> ember.Size{2, 3, 6, 6}
-- @classmod nn.ReplicationPad2d
local Module = require "ember.nn.Module"
local padding = require "ember.nn._padding"

local ReplicationPad2d = Module:extend("ReplicationPad2d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ReplicationPad2d.SIGNATURE = { sizes = { "padding" }, options = {} }

function ReplicationPad2d:__init(pad) padding.setup(self, pad, false) end

--- x padded.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor
function ReplicationPad2d:forward(x) return padding.forward(self, x, "replicate") end

--- The padding, for printing.
function ReplicationPad2d:extra_repr() return padding.repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ReplicationPad2d.forward = require("ember._errors").wrap(ReplicationPad2d.forward)

return ReplicationPad2d
