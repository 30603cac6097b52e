--- nn.SoftMarginLoss([{reduction = "mean"}]): log(1 + e^(-y x)), as torch.nn.SoftMarginLoss
-- (`nn.functional.soft_margin_loss`); y is 1 or -1.
-- Errors name nn.SoftMarginLoss (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage print(nn.SoftMarginLoss()(ember.randn(4), ember.tensor({1, -1, 1, -1})).shape)   --> ember.Size{}
-- @classmod nn.SoftMarginLoss
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local SoftMarginLoss = Module:extend("SoftMarginLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
SoftMarginLoss.SIGNATURE = { sizes = {}, options = { "size_average", "reduce", "reduction" }, string_option = "reduction" }

function SoftMarginLoss:__init(opts)
  losses.setup(self, opts)
end

--- The loss.
-- @tparam Tensor input
-- @tparam Tensor target input's shape: 1 or -1
-- @treturn Tensor
function SoftMarginLoss:forward(input, target)
  Module.check_tensor_input("SoftMarginLoss.forward", input)
  return require("ember.nn.functional").soft_margin_loss(input, target, { reduction = self.reduction })
end

--- Its options, for printing.
function SoftMarginLoss:extra_repr() return ("reduction=%s"):format(self.reduction) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
SoftMarginLoss.forward = require("ember._errors").wrap(SoftMarginLoss.forward)

return SoftMarginLoss
