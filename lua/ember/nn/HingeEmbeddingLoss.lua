--- nn.HingeEmbeddingLoss([{margin = 1, reduction = "mean"}]): x where y = 1, max(0, margin - x)
-- where y = -1, as torch.nn.HingeEmbeddingLoss (`nn.functional.hinge_embedding_loss`).
-- Errors name nn.HingeEmbeddingLoss (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage local loss = nn.HingeEmbeddingLoss()
-- print(loss(ember.rand(4), ember.tensor({1, -1, 1, -1})).shape)   --> ember.Size{}
-- @classmod nn.HingeEmbeddingLoss
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local HingeEmbeddingLoss = Module:extend("HingeEmbeddingLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
HingeEmbeddingLoss.SIGNATURE = { sizes = {}, options = { "margin", "size_average", "reduce", "reduction" }, string_option = "reduction" }

function HingeEmbeddingLoss:__init(opts)
  losses.setup(self, opts, nil, { "margin" })
  if self.margin == nil then self.margin = 1 end
end

--- The loss.
-- @tparam Tensor input
-- @tparam Tensor target input's shape: 1 or -1
-- @treturn Tensor
function HingeEmbeddingLoss:forward(input, target)
  Module.check_tensor_input("HingeEmbeddingLoss.forward", input)
  return require("ember.nn.functional").hinge_embedding_loss(input, target, {
    margin = self.margin, reduction = self.reduction,
  })
end

--- Its options, for printing.
function HingeEmbeddingLoss:extra_repr() return ("margin=%g, reduction=%s"):format(self.margin, self.reduction) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
HingeEmbeddingLoss.forward = require("ember._errors").wrap(HingeEmbeddingLoss.forward)

return HingeEmbeddingLoss
