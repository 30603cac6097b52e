--- nn.ZeroPad2d(padding): `nn.ConstantPad2d(padding, 0)`, as torch.nn.ZeroPad2d.
-- padding is a number (every side) or {left, right, top, bottom}.
-- Errors name nn.ZeroPad2d: bad padding, an input that is not 3-d or 4-d.
-- @usage print(nn.ZeroPad2d(1)(ember.randn(2, 3, 4, 4)).shape)   --> ember.Size{2, 3, 6, 6}
-- @classmod nn.ZeroPad2d
local ConstantPad2d = require "ember.nn.ConstantPad2d"

local ZeroPad2d = ConstantPad2d:extend("ZeroPad2d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ZeroPad2d.SIGNATURE = { sizes = { "padding" }, options = {} }

function ZeroPad2d:__init(pad) ConstantPad2d.__init(self, pad, 0) end

--- The padding, for printing (PyTorch's text: ZeroPad2d((1, 1, 1, 1)), the padding alone).
function ZeroPad2d:extra_repr() return require("ember.nn._padding").repr(self) end

return ZeroPad2d
