--- nn.LazyConv3d(out_channels, kernel_size [, {stride=1, padding=0, dilation=1, groups=1, bias=true, ...}]):
-- nn.Conv3d whose in_channels is taken from the first input's channel dim, as torch.nn.LazyConv3d.
-- The first forward (or a load_state_dict holding "weight": in_channels = its dim 2 times groups)
-- makes nn.Conv3d's parameters with its init, and the module becomes an nn.Conv3d (nn/_lazy.lua).
-- Until then it has no parameters (build the optimizer after a first batch, as PyTorch advises).
-- Errors: bad sizes or options name nn.Conv3d (checked when built).
-- @usage local conv = nn.LazyConv3d(8, 3)
-- local y = conv(ember.randn(2, 4, 6, 6, 6))
-- print(conv.in_channels, conv.weight.shape[2])   --> 4   4
-- @classmod nn.LazyConv3d
local lazy = require "ember.nn._lazy"

local groups = lazy.groups

return lazy.class("LazyConv3d", require "ember.nn.Conv3d", groups, lazy.channels(3),
  function(_, sd, out_channels, kernel_size, opts)
    local w = sd.weight
    if not (require("ember.nn.Module").is_tensor(w) and w.ndim == 3 + 2) then return nil end
    return w.shape[2] * groups(out_channels, kernel_size, opts)
  end)
