--- nn.CrossEntropyLoss([{ignore_index=, label_smoothing=0, reduction="mean"}]):
-- logits [N, C] with targets [N], or [B, L, C] with [B, L] (flattened), or
-- [C] with a 0-d target. Targets are 1-based int64 class ids; ignore_index
-- is compared with them (e.g. the padding id). One fused C op.
-- @usage local logits, targets = ember.randn(4, 5), ember.tensor({1, 5, 2, 3}, "int64")
-- local loss = nn.CrossEntropyLoss{label_smoothing = 0.1}(logits, targets)   -- logits [N, C], targets int64 [N], 1-based
-- @classmod nn.CrossEntropyLoss
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local CrossEntropyLoss = Module:extend("CrossEntropyLoss")

local REDUCTIONS = { mean = true, sum = true, none = true }

function CrossEntropyLoss:__init(opts)
  opts = opts or {}
  self.ignore_index = opts.ignore_index
  self.label_smoothing = opts.label_smoothing or 0
  self.reduction = opts.reduction or "mean"
  if not REDUCTIONS[self.reduction] then
    error("CrossEntropyLoss: reduction must be \"mean\", \"sum\" or \"none\", got " .. tostring(self.reduction), 2)
  end
  if type(self.label_smoothing) ~= "number" or self.label_smoothing < 0 or self.label_smoothing > 1 then
    error("CrossEntropyLoss: label_smoothing must be in [0, 1], got " .. tostring(self.label_smoothing), 2)
  end
end

--- The loss of logits [N, C] (or [N, C, ...]) against 1-based int64 targets [N] (or [N, ...]).
-- @tparam Tensor logits
-- @tparam Tensor target int64, 1-based class ids
-- @treturn Tensor 0-d (or per element with reduction "none")
function CrossEntropyLoss:forward(logits, target)
  local shape = target.shape
  if logits.ndim > 2 then
    if target.ndim ~= logits.ndim - 1 then
      error(("CrossEntropyLoss.forward: logits [%s] need targets with %d dims, got [%s]"):format(
        table.concat(logits.shape, ", "), logits.ndim - 1, table.concat(target.shape, ", ")), 2)
    end
    logits = logits:reshape(-1, logits.shape[logits.ndim])
    target = target:reshape(-1)
  end
  local loss = ember.cross_entropy(logits, target, {
    ignore_index = self.ignore_index, label_smoothing = self.label_smoothing, reduction = self.reduction,
  })
  if self.reduction == "none" and #shape > 1 then loss = loss:reshape(shape) end
  return loss
end

--- The options, for printing the module.
function CrossEntropyLoss:extra_repr()
  local s = "reduction=" .. self.reduction
  if self.ignore_index then s = s .. ", ignore_index=" .. self.ignore_index end
  if self.label_smoothing ~= 0 then s = s .. ", label_smoothing=" .. self.label_smoothing end
  return s
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
CrossEntropyLoss.forward = require("ember._errors").wrap(CrossEntropyLoss.forward)

return CrossEntropyLoss
