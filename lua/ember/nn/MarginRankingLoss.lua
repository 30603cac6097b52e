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
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local setup = require("ember.nn._loss").setup

local MarginRankingLoss = Module:extend("MarginRankingLoss")

function MarginRankingLoss:__init(opts)
  setup(self, opts, nil, { "margin" })
  self.margin = self.margin or 0
end

--- The ranking loss.
-- @tparam Tensor x1
-- @tparam Tensor x2 x1's shape
-- @tparam Tensor y x1's shape, 1 or -1
-- @treturn Tensor a scalar, or x1's shape with reduction "none"
function MarginRankingLoss:forward(x1, x2, y)
  local ok = ember.is_tensor(x1) and ember.is_tensor(x2) and ember.is_tensor(y)
  if ok then
    local s = table.concat(x1.shape, ",")
    ok = table.concat(x2.shape, ",") == s and table.concat(y.shape, ",") == s
  end
  if not ok then
    local function s(t) return ember.is_tensor(t) and ("[" .. table.concat(t.shape, ", ") .. "]") or type(t) end
    error(("MarginRankingLoss.forward: expected x1, x2 and y (1 or -1) of one shape, got %s, %s and %s")
      :format(s(x1), s(x2), s(y)))
  end
  local loss = (-y:to(x1.dtype) * (x1 - x2) + self.margin):clamp_min(0)
  if self.reduction == "mean" then return loss:mean() end
  if self.reduction == "sum" then return loss:sum() end
  return loss
end

--- Its options, for printing.
function MarginRankingLoss:extra_repr() return ("margin=%g, reduction=%s"):format(self.margin, self.reduction) end

-- C errors (bad shapes, dtypes) name the user's line, not this file's.
MarginRankingLoss.forward = require("ember._errors").wrap(MarginRankingLoss.forward)

return MarginRankingLoss
