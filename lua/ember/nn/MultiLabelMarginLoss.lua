--- nn.MultiLabelMarginLoss([{reduction = "mean"}]): the multi-label hinge loss, as
-- torch.nn.MultiLabelMarginLoss (`nn.functional.multilabel_margin_loss`): for each sample the sum over
-- its target classes j and its other classes i of max(0, 1 - (x[j] - x[i])), over C. The target is
-- int64 of the input's shape ([N, C] or [C]): each sample's **1-based** class ids, the first 0 ending
-- the list (PyTorch's 0-based ids ended by -1: add 1 to a PyTorch target).
-- Errors name nn.MultiLabelMarginLoss (its options) at the caller's line; the inputs are checked as
-- nn.functional's.
-- @usage local loss = nn.MultiLabelMarginLoss()
-- local y = ember.tensor({{4, 1, 0, 0}, {2, 0, 0, 0}}, "int64")   -- classes 4 and 1; class 2
-- print(loss(ember.randn(2, 4), y).shape)   --> ember.Size{}
-- @classmod nn.MultiLabelMarginLoss
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local MultiLabelMarginLoss = Module:extend("MultiLabelMarginLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
MultiLabelMarginLoss.SIGNATURE = { sizes = {}, options = { "size_average", "reduce", "reduction" }, string_option = "reduction" }

function MultiLabelMarginLoss:__init(opts) losses.setup(self, opts, nil, nil) end

--- The loss.
-- @tparam Tensor input [N, C] or [C]
-- @tparam Tensor target int64, input's shape: 1-based ids, 0 ends each list
-- @treturn Tensor
function MultiLabelMarginLoss:forward(input, target)
  Module.check_tensor_input("MultiLabelMarginLoss.forward", input)
  return require("ember.nn.functional").multilabel_margin_loss(input, target, { reduction = self.reduction })
end

--- Its options, for printing.
function MultiLabelMarginLoss:extra_repr() return "reduction=" .. self.reduction end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
MultiLabelMarginLoss.forward = require("ember._errors").wrap(MultiLabelMarginLoss.forward)

return MultiLabelMarginLoss
