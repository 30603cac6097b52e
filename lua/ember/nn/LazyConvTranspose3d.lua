--- nn.LazyConvTranspose3d(out_channels, kernel_size [, {stride=1, padding=0, output_padding=0, groups=1, ...}]):
-- nn.ConvTranspose3d whose in_channels is taken from the first input's channel dim, as
-- torch.nn.LazyConvTranspose3d. The first forward (or a load_state_dict holding "weight": in_channels =
-- its dim 1) makes nn.ConvTranspose3d's parameters with its init, and the module becomes one
-- (nn/_lazy.lua). Errors: bad sizes or options name nn.ConvTranspose3d (checked when built).
-- @usage local up = nn.LazyConvTranspose3d(3, 2, {stride = 2})
-- print(up(ember.randn(2, 4, 3, 3, 3)).shape[2], up.in_channels)   --> 3   4
-- @classmod nn.LazyConvTranspose3d
local lazy = require "ember.nn._lazy"

return lazy.class("LazyConvTranspose3d", require "ember.nn.ConvTranspose3d",
  lazy.groups, lazy.channels(3),
  function(_, sd)
    local w = sd.weight
    if require("ember.nn.Module").is_tensor(w) and w.ndim == 3 + 2 then return w.shape[1] end
  end)
