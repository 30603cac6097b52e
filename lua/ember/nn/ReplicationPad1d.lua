--- nn.ReplicationPad1d(padding): pads the last dim of [N, C, L] (or [C, L]) with copies of the input's edge values,
-- as torch.nn.ReplicationPad1d (`ember.pad`, mode "replicate"). padding is a non-negative integer (both
-- sides) or {left, right}. The output is [N, C, L + left + right].
-- Errors name nn.ReplicationPad1d: bad padding, an input that is not 2-d or 3-d or too small for the padding.
-- @usage local pad = nn.ReplicationPad1d({2, 1})
-- print(pad(ember.randn(2, 3, 4)).shape)   --> ember.Size{2, 3, 7}
-- @classmod nn.ReplicationPad1d
local Module = require "ember.nn.Module"
local padding = require "ember.nn._padding"

local ReplicationPad1d = Module:extend("ReplicationPad1d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ReplicationPad1d.SIGNATURE = { sizes = { "padding" }, options = {} }

function ReplicationPad1d:__init(pad) padding.setup(self, pad, false, 2) end

--- x padded.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @treturn Tensor
function ReplicationPad1d:forward(x) return padding.forward(self, x, "replicate") end

--- The padding, for printing.
function ReplicationPad1d:extra_repr() return padding.repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ReplicationPad1d.forward = require("ember._errors").wrap(ReplicationPad1d.forward)

return ReplicationPad1d
