--- optim.WarmupCosine(optimizer, {warmup_steps=0, total_steps=, min_lr_ratio=0}):
-- linear warmup, then a half cosine from the base lr down to
-- min_lr_ratio * base lr at total_steps:
--   s < warmup:  (s+1) / warmup
--   after:       m + (1-m) * (1 + cos(pi * p)) / 2,  p = (s-warmup)/(total-warmup), capped at 1
-- @classmod optim.WarmupCosine
local Scheduler = require "ember.optim.Scheduler"

local WarmupCosine = Scheduler:extend("WarmupCosine")

function WarmupCosine:__init(optimizer, opts)
  self:_warmup_opts(opts)
  Scheduler.__init(self, optimizer)
end

--- Linear warm-up to 1, then cosine decay to min_lr_ratio at total_steps.
-- @tparam integer s the step
function WarmupCosine:factor(s)
  local p, warm = self:_warmup_progress(s)
  if warm then return warm end
  local m = self.min_lr_ratio
  return m + (1 - m) * 0.5 * (1 + math.cos(math.pi * p))
end

return WarmupCosine
