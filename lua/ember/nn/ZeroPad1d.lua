--- nn.ZeroPad1d(padding) or nn.ZeroPad1d{padding =}: `nn.ConstantPad1d(padding, 0)`, pads
-- the last dim of [N, C, L] (or [C, L]) with zeros, as torch.nn.ZeroPad1d (PyTorch 2.1's; 1.13 had only ZeroPad2d).
-- padding is an integer (every side) or {left, right}; negative amounts crop.
-- Errors name nn.ZeroPad1d: bad padding, an input that is not 2-d or 3-d.
-- @usage print(nn.ZeroPad1d({2, 1})(ember.randn(2, 3, 4)).shape)   --> ember.Size{2, 3, 7}
-- @classmod nn.ZeroPad1d
local ConstantPad1d = require "ember.nn.ConstantPad1d"
local padding = require "ember.nn._padding"

local ZeroPad1d = ConstantPad1d:extend("ZeroPad1d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ZeroPad1d.SIGNATURE = { sizes = { "padding" }, options = {} }

function ZeroPad1d:__init(...)
  ConstantPad1d.__init(self, (padding.args("nn." .. self.__name, { "padding" }, ...)), 0)
end

--- The padding, for printing (PyTorch's text: the padding alone).
function ZeroPad1d:extra_repr() return padding.repr(self) end

return ZeroPad1d
