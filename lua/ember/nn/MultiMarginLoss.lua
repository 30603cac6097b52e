--- nn.MultiMarginLoss([{p = 1, margin = 1, weight =, reduction = "mean"}]): the multi-class hinge
-- loss sum_{i ~= y} max(0, margin - x[y] + x[i])^p / C (times weight[y]), as torch.nn.MultiMarginLoss
-- (`nn.functional.multi_margin_loss`); targets are 1-based int64 class ids; weight is a buffer.
-- Errors name nn.MultiMarginLoss (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage local loss = nn.MultiMarginLoss()
-- print(loss(ember.randn(2, 3), ember.tensor({3, 1}, "int64")).shape)   --> ember.Size{}
-- @classmod nn.MultiMarginLoss
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local MultiMarginLoss = Module:extend("MultiMarginLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
MultiMarginLoss.SIGNATURE = { sizes = {}, options = { "p", "margin", "weight", "size_average", "reduce", "reduction" }, string_option = "reduction" }

function MultiMarginLoss:__init(opts)
  losses.setup(self, opts, { "weight" }, { "p", "margin" })
  if self.p == nil then self.p = 1 end
  if self.margin == nil then self.margin = 1 end
end

--- The loss.
-- @tparam Tensor input [N, C] or [C]
-- @tparam Tensor target int64 [N] (or 0-d), 1-based
-- @treturn Tensor
function MultiMarginLoss:forward(input, target)
  Module.check_tensor_input("MultiMarginLoss.forward", input)
  return require("ember.nn.functional").multi_margin_loss(input, target, {
    p = self.p, margin = self.margin, weight = self.weight, reduction = self.reduction,
  })
end

--- Its options, for printing.
function MultiMarginLoss:extra_repr()
  return ("p=%g, margin=%g, reduction=%s"):format(
    self.p, self.margin, self.reduction)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
MultiMarginLoss.forward = require("ember._errors").wrap(MultiMarginLoss.forward)

return MultiMarginLoss
