--- nn.ZeroPad3d(padding) or nn.ZeroPad3d{padding =}: `nn.ConstantPad3d(padding, 0)`, pads
-- the last three dims of [N, C, D, H, W] (or [C, D, H, W]) with zeros, as torch.nn.ZeroPad3d (PyTorch 2.1's; 1.13 had only ZeroPad2d).
-- padding is an integer (every side) or {left, right, top, bottom, front, back}; negative amounts crop.
-- Errors name nn.ZeroPad3d: bad padding, an input that is not 4-d or 5-d.
-- @usage print(nn.ZeroPad3d(1)(ember.randn(2, 3, 4, 4, 4)).shape)   --> ember.Size{2, 3, 6, 6, 6}
-- @classmod nn.ZeroPad3d
local ConstantPad3d = require "ember.nn.ConstantPad3d"
local padding = require "ember.nn._padding"

local ZeroPad3d = ConstantPad3d:extend("ZeroPad3d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ZeroPad3d.SIGNATURE = { sizes = { "padding" }, options = {} }

function ZeroPad3d:__init(...)
  ConstantPad3d.__init(self, (padding.args("nn." .. self.__name, { "padding" }, ...)), 0)
end

--- The padding, for printing (PyTorch's text: the padding alone).
function ZeroPad3d:extra_repr() return padding.repr(self) end

return ZeroPad3d
