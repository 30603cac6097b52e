--- nn.BCEWithLogitsLoss([{reduction = "mean", weight =, pos_weight =}]): binary
-- cross-entropy on logits, as torch.nn.BCEWithLogitsLoss (stable for any
-- logit; `ember.binary_cross_entropy_with_logits`). weight scales each
-- element's loss, pos_weight the positive targets' (broadcast over the last dim).
-- @usage local loss = nn.BCEWithLogitsLoss()(ember.randn(4, 3), ember.rand(4, 3):gt(0.5):float())
-- @classmod nn.BCEWithLogitsLoss
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local BCEWithLogitsLoss = Module:extend("BCEWithLogitsLoss")

local REDUCTIONS = { mean = true, sum = true, none = true }

function BCEWithLogitsLoss:__init(opts)
  opts = opts or {}
  if type(opts) == "string" then opts = { reduction = opts } end
  if type(opts) ~= "table" then error("BCEWithLogitsLoss: options must be a table, got " .. type(opts), 3) end
  self.reduction = opts.reduction or "mean"
  if not REDUCTIONS[self.reduction] then
    error("BCEWithLogitsLoss: reduction must be \"mean\", \"sum\" or \"none\", got " .. tostring(self.reduction), 3)
  end
  for _, k in ipairs({ "weight", "pos_weight" }) do
    if opts[k] ~= nil and not ember.is_tensor(opts[k]) then
      error("BCEWithLogitsLoss: " .. k .. " must be a tensor, got " .. type(opts[k]), 3)
    end
  end
  -- buffers, so that :to(device) moves them and they print as torch's
  if opts.weight ~= nil then self:register_buffer("weight", opts.weight) end
  if opts.pos_weight ~= nil then self:register_buffer("pos_weight", opts.pos_weight) end
end

--- The loss of logits against targets.
-- @tparam Tensor input
-- @tparam Tensor target the same shape (0 or 1, or probabilities)
function BCEWithLogitsLoss:forward(input, target)
  return ember.binary_cross_entropy_with_logits(input, target, { weight = self.weight, pos_weight = self.pos_weight, reduction = self.reduction })
end

--- The reduction, for printing.
function BCEWithLogitsLoss:extra_repr() return "reduction=" .. self.reduction end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
BCEWithLogitsLoss.forward = require("ember._errors").wrap(BCEWithLogitsLoss.forward)

return BCEWithLogitsLoss
