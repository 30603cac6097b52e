--- nn.MultiLabelSoftMarginLoss([{weight =, reduction = "mean"}]): the mean over the C classes of
-- -(y log sigmoid(x) + (1 - y) log sigmoid(-x)) (times weight [C]), as torch.nn.MultiLabelSoftMarginLoss
-- (`nn.functional.multilabel_soft_margin_loss`); weight is a buffer.
-- Errors name nn.MultiLabelSoftMarginLoss (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage local loss = nn.MultiLabelSoftMarginLoss()
-- print(loss(ember.randn(2, 3), ember.tensor({{1, 0, 1}, {0, 0, 1}})).shape)   --> ember.Size{}
-- @classmod nn.MultiLabelSoftMarginLoss
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local MultiLabelSoftMarginLoss = Module:extend("MultiLabelSoftMarginLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
MultiLabelSoftMarginLoss.SIGNATURE = { sizes = {}, options = { "weight", "size_average", "reduce", "reduction" }, string_option = "reduction" }

function MultiLabelSoftMarginLoss:__init(opts)
  losses.setup(self, opts, { "weight" })
end

--- The loss.
-- @tparam Tensor input [N, C] or [C]
-- @tparam Tensor target input's shape: 0 or 1
-- @treturn Tensor
function MultiLabelSoftMarginLoss:forward(input, target)
  Module.check_tensor_input("MultiLabelSoftMarginLoss.forward", input)
  return require("ember.nn.functional").multilabel_soft_margin_loss(input, target, {
    weight = self.weight, reduction = self.reduction,
  })
end

--- Its options, for printing.
function MultiLabelSoftMarginLoss:extra_repr() return ("reduction=%s"):format(self.reduction) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
MultiLabelSoftMarginLoss.forward = require("ember._errors").wrap(MultiLabelSoftMarginLoss.forward)

return MultiLabelSoftMarginLoss
