--- optim.AdamW(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8,
-- weight_decay=1e-2, amsgrad=false, maximize=false}): torch.optim.AdamW --
-- Adam with decoupled weight decay (p = p * (1 - lr*weight_decay) before
-- the Adam step; foreach and capturable taken and ignored). One fused C
-- call per parameter; with amsgrad, Adam's in-place tensor ops.
-- @classmod optim.AdamW
local Adam = require "ember.optim.Adam"

local AdamW = Adam:extend("AdamW", {
  lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 1e-2, amsgrad = false, maximize = false,
}, { "foreach", "capturable" })
AdamW.POSITIONAL = { "betas", "eps", "weight_decay", "amsgrad" }
AdamW.decoupled = true

return AdamW
