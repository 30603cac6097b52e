--- nn.LazyInstanceNorm2d([{eps=1e-5, momentum=0.1, affine=true, track_running_stats=true, ...}]):
-- nn.InstanceNorm2d whose num_features is taken from the first input's channel dim, as
-- torch.nn.LazyInstanceNorm2d (batched or unbatched inputs). The first forward (or a
-- load_state_dict holding "weight" or "running_mean") sizes it and the module becomes an
-- nn.InstanceNorm2d (nn/_lazy.lua). As PyTorch 1.13's, affine and track_running_stats default to
-- true here (nn.InstanceNorm2d's are false). Errors: bad options name nn.InstanceNorm2d (checked when built).
-- @usage local norm = nn.LazyInstanceNorm2d{affine = true}
-- print(norm(ember.randn(2, 4, 6, 6)).shape[2], norm.num_features)   --> 4   4
-- @classmod nn.LazyInstanceNorm2d
local lazy = require "ember.nn._lazy"

local Lazy = lazy.class("LazyInstanceNorm2d", require "ember.nn.InstanceNorm2d", function() return 1 end,
  lazy.channels(2),
  function(_, sd)
    local t = sd.running_mean or sd.weight
    if require("ember.nn.Module").is_tensor(t) and t.ndim == 1 then return t.shape[1] end
  end)

local init = Lazy.__init
function Lazy:__init(opts)
  if opts ~= nil and type(opts) ~= "table" then return init(self, opts) end -- the target refuses it
  local o = { affine = true, track_running_stats = true } -- PyTorch 1.13's lazy defaults
  for k, v in pairs(opts or {}) do o[k] = v end
  return init(self, o)
end

return Lazy
