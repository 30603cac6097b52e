--- nn.ConvTranspose3d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, output_padding=0,
-- groups=1, bias=true, dilation=1, dtype=, device=}]): the transposed 3-d convolution of [N, C, D, H, W]
-- (or [C, D, H, W]), as torch.nn.ConvTranspose3d (`nn.functional.conv_transpose3d`). Sizes are an
-- integer or {d, h, w}; each output size is (in - 1) stride - 2 padding + dilation (k - 1) +
-- output_padding + 1. The weight [in_channels, out_channels / groups, kd, kh, kw] and bias
-- [out_channels] are PyTorch's, initialised as PyTorch's (nn/_conv_transpose.lua's setup, the
-- 1-d/2-d modules'); forward(x [, output_size]) picks the output_padding giving those sizes, as
-- PyTorch's forward(input, output_size).
-- Errors name nn.ConvTranspose3d: bad sizes or options, an input that is not 4-d or 5-d or has
-- other channels.
-- @usage local up = nn.ConvTranspose3d(8, 4, 2, {stride = 2})   -- doubles D, H and W
-- print(up(ember.randn(1, 8, 3, 4, 5)).shape)   --> ember.Size{1, 4, 6, 8, 10}
-- @classmod nn.ConvTranspose3d
local Module = require "ember.nn.Module"
local tconv = require "ember.nn._conv_transpose"

local ConvTranspose3d = Module:extend("ConvTranspose3d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
ConvTranspose3d.SIGNATURE = { sizes = { "in_channels", "out_channels", "kernel_size" },
  options = { "stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode" } }

function ConvTranspose3d:__init(in_channels, out_channels, kernel_size, opts)
  tconv.setup(self, "ConvTranspose3d", 3, in_channels, out_channels, kernel_size, opts)
end

--- The transposed convolution of x.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @tparam[opt] table output_size the output's {D, H, W} (or a whole shape ending in them)
-- @treturn Tensor
function ConvTranspose3d:forward(x, output_size)
  return tconv.forward(self, "ConvTranspose3d", 3, x, output_size)
end

--- PyTorch's printing: "8, 4, kernel_size=(2, 2, 2), stride=(2, 2, 2)" and the options not at their defaults.
function ConvTranspose3d:extra_repr() return tconv.extra_repr(self, 3) end

--- Draws the weight and bias again, U(+-1/sqrt(fan_in)) as the constructor does (PyTorch's reset_parameters).
function ConvTranspose3d:reset_parameters() require("ember.nn._conv").reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ConvTranspose3d.forward = require("ember._errors").wrap(ConvTranspose3d.forward)

return ConvTranspose3d
