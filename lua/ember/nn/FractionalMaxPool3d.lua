--- nn.FractionalMaxPool3d(kernel_size [, {output_size =, output_ratio =, return_indices = false,
-- _random_samples =}]): fractional max pooling of [N, C, D, H, W] (or [C, D, H, W]), as
-- torch.nn.FractionalMaxPool3d (`nn.functional.fractional_max_pool3d`): nn.FractionalMaxPool2d's
-- class with three dims (sizes an integer or {d, h, w}; _random_samples [N, C, 3], {u_t, u_h, u_w}).
-- @usage local pool = nn.FractionalMaxPool3d(2, {output_size = {3, 4, 4}})
-- print(pool(ember.randn(1, 2, 6, 8, 8)).shape)   --> ember.Size{1, 2, 3, 4, 4}
-- @classmod nn.FractionalMaxPool3d
local FractionalMaxPool2d = require "ember.nn.FractionalMaxPool2d"

local FractionalMaxPool3d = FractionalMaxPool2d:extend("FractionalMaxPool3d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
FractionalMaxPool3d.SIGNATURE = { sizes = { "kernel_size" },
  options = { "output_size", "output_ratio", "return_indices", "_random_samples" } }
FractionalMaxPool3d._nd = 3

return FractionalMaxPool3d
