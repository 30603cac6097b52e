--- optim.WarmupLinear(optimizer, {warmup_steps=0, total_steps=, min_lr_ratio=0}):
-- linear warmup, then a straight line from the base lr down to
-- min_lr_ratio * base lr at total_steps:
--   s < warmup:  (s+1) / warmup
--   after:       m + (1-m) * (1 - p),  p = (s-warmup)/(total-warmup), capped at 1
-- @classmod optim.WarmupLinear
local Scheduler = require "ember.optim.Scheduler"

local WarmupLinear = Scheduler:extend("WarmupLinear")

function WarmupLinear:__init(optimizer, opts)
  self:_warmup_opts(opts)
  Scheduler.__init(self, optimizer)
end

--- Linear warm-up to 1, then linear decay to min_lr_ratio at total_steps.
-- @tparam integer s the step
function WarmupLinear:factor(s)
  local p, warm = self:_warmup_progress(s)
  if warm then return warm end
  local m = self.min_lr_ratio
  return m + (1 - m) * (1 - p)
end

return WarmupLinear
