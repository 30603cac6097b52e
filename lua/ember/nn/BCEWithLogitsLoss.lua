--- nn.BCEWithLogitsLoss([{reduction = "mean", weight =, pos_weight =}]): binary
-- cross-entropy on logits, as torch.nn.BCEWithLogitsLoss (stable for any
-- logit; `ember.binary_cross_entropy_with_logits`). weight scales each
-- element's loss, pos_weight the positive targets' (broadcast over the last
-- dim).
-- @usage local loss = nn.BCEWithLogitsLoss()(ember.randn(4, 3), ember.rand(4, 3):gt(0.5):float())
-- @classmod nn.BCEWithLogitsLoss
local ember = require "ember.nn._ember"
local BCELoss = require "ember.nn.BCELoss"
local setup = require("ember.nn._loss").setup

local BCEWithLogitsLoss = BCELoss:extend("BCEWithLogitsLoss") -- its printing
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
BCEWithLogitsLoss.SIGNATURE = { sizes = {}, options = { "weight", "size_average", "reduce", "reduction", "pos_weight" }, string_option = "reduction" }

function BCEWithLogitsLoss:__init(opts) setup(self, opts, { "weight", "pos_weight" }) end

--- The loss of logits against targets.
-- @tparam Tensor input
-- @tparam Tensor target the same shape (0 or 1, or probabilities)
function BCEWithLogitsLoss:forward(input, target)
  return ember.binary_cross_entropy_with_logits(input, target,
    { weight = self.weight, pos_weight = self.pos_weight, reduction = self.reduction })
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
BCEWithLogitsLoss.forward = require("ember._errors").wrap(BCEWithLogitsLoss.forward)

return BCEWithLogitsLoss
