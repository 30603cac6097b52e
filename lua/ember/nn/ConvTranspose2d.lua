--- nn.ConvTranspose2d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, output_padding=0, groups=1, bias=true, dilation=1, padding_mode="zeros", dtype=, device=, route="auto"}]):
-- 2-d transposed convolution of [N, C, H, W] (or unbatched [C, H, W]), as
-- torch.nn.ConvTranspose2d: the gradient of nn.Conv2d with respect to its
-- input, the usual learned upsampling. Sizes are a number or a pair {h, w}.
-- The output is [N, out, Ho, Wo],
-- Ho = (H - 1) stride - 2 padding + dilation (kernel - 1) + output_padding + 1;
-- output_padding (smaller than stride or dilation) adds rows/columns at the
-- bottom/right, so that a Conv2d with stride > 1 can be undone to the exact
-- size; `forward(x, output_size)` picks it from the sizes wanted instead.
-- Parameters as PyTorch, so its state dicts load: `weight`
-- [in, out/groups, kh, kw] (kaiming_uniform_ with a = sqrt(5), i.e.
-- U(+-1/sqrt(fan_in)), fan_in = out/groups * kh * kw, as PyTorch computes it
-- for this layout) and `bias` [out] (U(+-1/sqrt(fan_in))).
-- Computed as nn.Conv2d's convolutions, one per output phase (stride_h *
-- stride_w of them, each with the kernel taps that reach it, flipped; the
-- weight's in/out axes swapped per group), so the backend's convolution
-- kernel runs where it has one and no product is spent on zeros (see
-- nn/_conv_transpose.lua for why this route); `route = "composed"` as
-- nn.Conv2d's.
-- Errors name nn.ConvTranspose2d at the caller's line: bad sizes or options,
-- groups not dividing the channels, output_padding not smaller than stride or
-- dilation, a wrong channel count, an empty output, an output past 2^40
-- elements or a stride of more than 2^20 phases (stride_h * stride_w).
-- @usage local up = nn.ConvTranspose2d(16, 8, 3, {stride = 2, padding = 1, output_padding = 1})
-- print(up(ember.randn(4, 16, 10, 10)).shape)             --> ember.Size{4, 8, 20, 20}
-- local down = nn.Conv2d(8, 16, 3, {stride = 2, padding = 1})
-- local x = ember.randn(1, 8, 15, 15)
-- print(up(down(x), x.shape).shape)                        --> ember.Size{1, 8, 15, 15}
-- @classmod nn.ConvTranspose2d
local Module = require "ember.nn.Module"
local tconv = require "ember.nn._conv_transpose"

local ConvTranspose2d = Module:extend("ConvTranspose2d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
ConvTranspose2d.SIGNATURE = { sizes = { "in_channels", "out_channels", "kernel_size" },
  options = { "stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode" } }

function ConvTranspose2d:__init(in_channels, out_channels, kernel_size, opts)
  tconv.setup(self, "ConvTranspose2d", 2, in_channels, out_channels, kernel_size, opts)
end

--- The transposed convolution.
-- @tparam Tensor x [N, in_channels, H, W] or [in_channels, H, W]
-- @tparam[opt] table output_size the output's {Ho, Wo} (or a whole shape, as PyTorch's
-- output_size): picks output_padding for this call
-- @treturn Tensor [N, out_channels, Ho, Wo] (or [out_channels, Ho, Wo])
function ConvTranspose2d:forward(x, output_size)
  return tconv.forward(self, "ConvTranspose2d", 2, x, output_size)
end

--- The sizes, for printing (PyTorch's text).
function ConvTranspose2d:extra_repr()
  return tconv.extra_repr(self, 2)
end

--- Draws the weight and bias again, U(+-1/sqrt(fan_in)) as the constructor does (PyTorch's reset_parameters).
function ConvTranspose2d:reset_parameters() require("ember.nn._conv").reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ConvTranspose2d.forward = require("ember._errors").wrap(ConvTranspose2d.forward)

return ConvTranspose2d
