--- nn.Identity(...): returns its input unchanged, as torch.nn.Identity; the
-- constructor's arguments are ignored (so it can stand in for any layer).
-- Handy to switch a part of a model off without changing its structure.
-- @usage local norm = use_norm and nn.LayerNorm(64) or nn.Identity()
-- assert(nn.Identity()(x) == x)   -- the very same tensor
-- @classmod nn.Identity
local Module = require "ember.nn.Module"

local Identity = Module:extend("Identity")

function Identity:__init() end

--- Its argument(s), unchanged (the same tensor, not a copy).
-- @param x anything
-- @return x
function Identity:forward(...) return ... end

return Identity
