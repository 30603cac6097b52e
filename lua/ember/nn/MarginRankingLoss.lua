--- nn.MarginRankingLoss([{margin=0, reduction="mean"}]): max(0, -y (x1 - x2) + margin),
-- as torch.nn.MarginRankingLoss: y = 1 says x1 should rank higher than x2,
-- y = -1 the other way. x1, x2 and y share one shape ([N] or a scalar);
-- gradients reach x1 and x2.
-- Errors name nn.MarginRankingLoss at the caller's line.
-- @usage local loss = nn.MarginRankingLoss({margin = 0.1})
-- local y = ember.tensor({1, -1, 1})
-- print(loss(ember.randn(3), ember.randn(3), y).shape)   --> ember.Size{}
-- @classmod nn.MarginRankingLoss
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local MarginRankingLoss = Module:extend("MarginRankingLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
MarginRankingLoss.SIGNATURE = { sizes = {}, options = { "margin", "size_average", "reduce", "reduction" }, string_option = "reduction" }

function MarginRankingLoss:__init(opts)
  losses.setup(self, opts, nil, { "margin" })
  self.margin = self.margin or 0
end

--- The ranking loss.
-- @tparam Tensor x1
-- @tparam Tensor x2 x1's shape
-- @tparam Tensor y x1's shape, 1 or -1
-- @treturn Tensor a scalar, or x1's shape with reduction "none"
function MarginRankingLoss:forward(x1, x2, y)
  if not losses.same_shape(x1, x2, y) then
    local s = losses.describe
    error(("MarginRankingLoss.forward: expected x1, x2 and y (1 or -1) of one shape, got %s, %s and %s")
      :format(s(x1), s(x2), s(y)))
  end
  return MarginRankingLoss._loss(x1, x2, y, self.margin, self.reduction)
end

-- max(-y (x1 - x2) + margin, 0) reduced: the module's forward and
-- nn.functional.margin_ranking_loss's (shapes checked by the caller).
function MarginRankingLoss._loss(x1, x2, y, margin, reduction)
  return losses.reduce((-y:to(x1.dtype) * (x1 - x2) + margin):clamp_min(0), reduction)
end

--- Its options, for printing.
function MarginRankingLoss:extra_repr() return ("margin=%g, reduction=%s"):format(self.margin, self.reduction) end

-- C errors (bad shapes, dtypes) name the user's line, not this file's.
MarginRankingLoss.forward = require("ember._errors").wrap(MarginRankingLoss.forward)

return MarginRankingLoss
