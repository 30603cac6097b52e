--- nn.Conv2d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, dilation=1, groups=1, bias=true, padding_mode="zeros", dtype=, device=, route="auto"}]):
-- 2-d convolution (cross-correlation) of [N, C, H, W] (or unbatched
-- [C, H, W]), as torch.nn.Conv2d. Sizes are a number or a pair {h, w};
-- padding is also "same" (stride 1; the extra row/column of an even kernel
-- goes after, as PyTorch) or "valid" (none). The output is [N, out, Ho, Wo],
-- Ho = floor((H + 2 padding - dilation (kernel - 1) - 1) / stride) + 1.
-- padding_mode "reflect", "replicate" or "circular" pads the input so
-- (`ember.pad`, by the same amounts) and convolves it without padding, as
-- PyTorch; "zeros" is the default.
-- Parameters as PyTorch, so its state dicts load: `weight`
-- [out, in/groups, kh, kw] (kaiming_uniform_ with a = sqrt(5), i.e.
-- U(+-1/sqrt(fan_in))) and `bias` [out] (U(+-1/sqrt(fan_in))),
-- fan_in = in/groups * kh * kw.
-- On the CPU in float32, and in bfloat16 under `ember.autocast`, it runs
-- on oneDNN's convolution primitives (forward, backward-data,
-- backward-weights). Elsewhere (float64, CUDA, a call oneDNN has no kernel
-- for), or with the option `route = "composed"`, it is composed from core
-- ops: im2col, one strided copy per kernel offset, then one matmul (one
-- batched matmul over the groups); see `nn/_conv.lua`. With few channels
-- (a patch embedding of 3 colours) the kernel times oneDNN's blocked and
-- plain layouts on the first call of a shape and keeps the faster.
-- When the weight needs a gradient, the kernel's forward also keeps x in
-- oneDNN's layout for the weight gradient: the graph holds one activation
-- more per layer until backward (or until it is freed), for one reorder
-- of x less per step.
-- `ember.conv_routes()` counts which route ran.
-- Errors name nn.Conv2d at the caller's line: bad sizes or options, groups
-- not dividing the channels, a wrong channel count, a kernel larger than
-- the padded input.
-- @usage local conv = nn.Conv2d(3, 64, 3, {padding = 1})
-- print(conv(ember.randn(8, 3, 32, 32)).shape)             --> ember.Size{8, 64, 32, 32}
-- local patch = nn.Conv2d(3, 192, 4, {stride = 4})          -- a ViT patch embedding
-- local dw = nn.Conv2d(32, 32, 3, {padding = "same", groups = 32})   -- depthwise
-- local refl = nn.Conv2d(3, 8, 3, {padding = 1, padding_mode = "reflect"})
-- print(refl(ember.randn(1, 3, 5, 5)).shape)                  --> ember.Size{1, 8, 5, 5}
-- @classmod nn.Conv2d
local Module = require "ember.nn.Module"
local conv = require "ember.nn._conv"

local Conv2d = Module:extend("Conv2d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
Conv2d.SIGNATURE = { sizes = { "in_channels", "out_channels", "kernel_size" },
  options = { "stride", "padding", "dilation", "groups", "bias", "padding_mode" } }

function Conv2d:__init(in_channels, out_channels, kernel_size, opts)
  conv.setup(self, "Conv2d", 2, in_channels, out_channels, kernel_size, opts)
end

--- The convolution.
-- @tparam Tensor x [N, in_channels, H, W] or [in_channels, H, W]
-- @treturn Tensor [N, out_channels, Ho, Wo] (or [out_channels, Ho, Wo])
function Conv2d:forward(x)
  return conv.forward(self, "Conv2d", 2, x)
end

--- The sizes, for printing (PyTorch's text).
function Conv2d:extra_repr()
  return conv.extra_repr(self, 2)
end

--- Draws the weight and bias again as the constructor does (PyTorch's reset_parameters).
function Conv2d:reset_parameters() conv.reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Conv2d.forward = require("ember._errors").wrap(Conv2d.forward)

return Conv2d
