--- nn.MaxUnpool3d(kernel_size [, {stride = kernel_size, padding = 0}]): the inverse of
-- nn.MaxPool3d with return_indices: each value put back at its (1-based) index in a zero output,
-- as torch.nn.MaxUnpool3d (`nn.functional.max_unpool3d`); forward(x, indices [, output_size]).
-- Sizes are an integer or {d, h, w}. nn.MaxUnpool2d's code with three dims.
-- Errors name nn.MaxUnpool3d (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage local pool = nn.MaxPool3d(2, {return_indices = true})
-- local y, idx = pool(ember.randn(1, 2, 4, 4, 4))
-- print(nn.MaxUnpool3d(2)(y, idx).shape)   --> ember.Size{1, 2, 4, 4, 4}
-- @classmod nn.MaxUnpool3d
local MaxUnpool2d = require "ember.nn.MaxUnpool2d"

local MaxUnpool3d = MaxUnpool2d:extend("MaxUnpool3d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
MaxUnpool3d.SIGNATURE = { sizes = { "kernel_size" }, options = { "stride", "padding" } }
MaxUnpool3d._nd = 3

return MaxUnpool3d
