--- nn.LazyConvTranspose2d(out_channels, kernel_size [, {stride=1, padding=0, output_padding=0, groups=1, ...}]):
-- nn.ConvTranspose2d whose in_channels is taken from the first input's channel dim, as
-- torch.nn.LazyConvTranspose2d. The first forward (or a load_state_dict holding "weight": in_channels =
-- its dim 1) makes nn.ConvTranspose2d's parameters with its init, and the module becomes one
-- (nn/_lazy.lua). Errors: bad sizes or options name nn.ConvTranspose2d (checked when built).
-- @usage local up = nn.LazyConvTranspose2d(3, 2, {stride = 2})
-- print(up(ember.randn(2, 4, 6, 6)).shape[2], up.in_channels)   --> 3   4
-- @classmod nn.LazyConvTranspose2d
local lazy = require "ember.nn._lazy"

return lazy.class("LazyConvTranspose2d", require "ember.nn.ConvTranspose2d",
  lazy.groups, lazy.channels(2),
  function(_, sd)
    local w = sd.weight
    if require("ember.nn.Module").is_tensor(w) and w.ndim == 2 + 2 then return w.shape[1] end
  end)
