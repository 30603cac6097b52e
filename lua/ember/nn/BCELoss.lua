--- nn.BCELoss([{reduction = "mean", weight =}]): binary cross-entropy on
-- probabilities, as torch.nn.BCELoss (each log at least -100;
-- `ember.binary_cross_entropy`). On logits prefer nn.BCEWithLogitsLoss.
-- @usage local loss = nn.BCELoss()(ember.rand(4), ember.tensor{0, 1, 1, 0})
-- @classmod nn.BCELoss
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local setup = require("ember.nn._loss").setup

local BCELoss = Module:extend("BCELoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
BCELoss.SIGNATURE = { sizes = {}, options = { "weight", "size_average", "reduce", "reduction" }, string_option = "reduction" }

function BCELoss:__init(opts) setup(self, opts, { "weight" }) end

--- The loss of probabilities against targets.
-- @tparam Tensor input
-- @tparam Tensor target the same shape (0 or 1, or probabilities)
function BCELoss:forward(input, target)
  return ember.binary_cross_entropy(input, target, { weight = self.weight, reduction = self.reduction })
end

--- The reduction, for printing.
function BCELoss:extra_repr() return "reduction=" .. self.reduction end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
BCELoss.forward = require("ember._errors").wrap(BCELoss.forward)

return BCELoss
