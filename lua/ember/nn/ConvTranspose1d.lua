--- nn.ConvTranspose1d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, output_padding=0, groups=1, bias=true, dilation=1, padding_mode="zeros", dtype=, device=, route="auto"}]):
-- 1-d transposed convolution of [N, C, L] (or unbatched [C, L]), as
-- torch.nn.ConvTranspose1d. Sizes are a number (or a table of one). The
-- output is [N, out, Lo],
-- Lo = (L - 1) stride - 2 padding + dilation (kernel - 1) + output_padding + 1;
-- `forward(x, output_size)` picks output_padding from the size wanted.
-- Parameters as PyTorch: `weight` [in, out/groups, k] and `bias` [out], with
-- its initialisation (U(+-1/sqrt(fan_in)), fan_in = out/groups * k).
-- It is nn.ConvTranspose2d's computation (one convolution per output phase)
-- on a [N, C, 1, L] view (nn/_conv_transpose.lua).
-- Errors name nn.ConvTranspose1d at the caller's line (a stride past 2^20 is refused, as 2-d's).
-- @usage local up = nn.ConvTranspose1d(16, 8, 4, {stride = 2, padding = 1})
-- print(up(ember.randn(4, 16, 50)).shape)   --> ember.Size{4, 8, 100}
-- @classmod nn.ConvTranspose1d
local Module = require "ember.nn.Module"
local tconv = require "ember.nn._conv_transpose"

local ConvTranspose1d = Module:extend("ConvTranspose1d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
ConvTranspose1d.SIGNATURE = { sizes = { "in_channels", "out_channels", "kernel_size" },
  options = { "stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode" } }

function ConvTranspose1d:__init(in_channels, out_channels, kernel_size, opts)
  tconv.setup(self, "ConvTranspose1d", 1, in_channels, out_channels, kernel_size, opts)
end

--- The transposed convolution.
-- @tparam Tensor x [N, in_channels, L] or [in_channels, L]
-- @tparam[opt] integer|table output_size the output's length (or a whole shape, as PyTorch's
-- output_size): picks output_padding for this call
-- @treturn Tensor [N, out_channels, Lo] (or [out_channels, Lo])
function ConvTranspose1d:forward(x, output_size)
  return tconv.forward(self, "ConvTranspose1d", 1, x, output_size)
end

--- The sizes, for printing (PyTorch's text).
function ConvTranspose1d:extra_repr()
  return tconv.extra_repr(self, 1)
end

--- Draws the weight and bias again, U(+-1/sqrt(fan_in)) as the constructor does (PyTorch's reset_parameters).
function ConvTranspose1d:reset_parameters() require("ember.nn._conv").reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ConvTranspose1d.forward = require("ember._errors").wrap(ConvTranspose1d.forward)

return ConvTranspose1d
