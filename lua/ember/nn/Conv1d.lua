--- nn.Conv1d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, dilation=1, groups=1, bias=true, padding_mode="zeros", dtype=, device=, route="auto"}]):
-- 1-d convolution (cross-correlation) of [N, C, L] (or unbatched [C, L]),
-- as torch.nn.Conv1d. Sizes are a number (or a table of one); padding is
-- also "same" (stride 1) or "valid"; padding_mode "zeros" (default),
-- "reflect", "replicate" or "circular" as nn.Conv2d's. The output is [N, out, Lo],
-- Lo = floor((L + 2 padding - dilation (kernel - 1) - 1) / stride) + 1.
-- Parameters as PyTorch: `weight` [out, in/groups, k] and `bias` [out], with
-- its initialisation (U(+-1/sqrt(fan_in)), fan_in = in/groups * k).
-- It is nn.Conv2d on a [N, C, 1, L] view (`nn/_conv.lua`): oneDNN's
-- primitives where the backend has them, else (or with `route = "composed"`)
-- the composition.
-- Errors name nn.Conv1d at the caller's line.
-- @usage local conv = nn.Conv1d(16, 32, 5, {padding = "same"})
-- print(conv(ember.randn(4, 16, 100)).shape)   --> ember.Size{4, 32, 100}
-- @classmod nn.Conv1d
local Module = require "ember.nn.Module"
local conv = require "ember.nn._conv"

local Conv1d = Module:extend("Conv1d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
Conv1d.SIGNATURE = { sizes = { "in_channels", "out_channels", "kernel_size" },
  options = { "stride", "padding", "dilation", "groups", "bias", "padding_mode" } }

function Conv1d:__init(in_channels, out_channels, kernel_size, opts)
  conv.setup(self, "Conv1d", 1, in_channels, out_channels, kernel_size, opts)
end

--- The convolution.
-- @tparam Tensor x [N, in_channels, L] or [in_channels, L]
-- @treturn Tensor [N, out_channels, Lo] (or [out_channels, Lo])
function Conv1d:forward(x)
  return conv.forward(self, "Conv1d", 1, x)
end

--- The sizes, for printing (PyTorch's text).
function Conv1d:extra_repr()
  return conv.extra_repr(self, 1)
end

--- Draws the weight and bias again as the constructor does (PyTorch's reset_parameters).
function Conv1d:reset_parameters() conv.reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Conv1d.forward = require("ember._errors").wrap(Conv1d.forward)

return Conv1d
