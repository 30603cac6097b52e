--- nn.CosineEmbeddingLoss([{margin = 0, reduction = "mean"}]): 1 - cos(x1, x2) where y = 1,
-- max(0, cos(x1, x2) - margin) where y = -1, as torch.nn.CosineEmbeddingLoss
-- (`nn.functional.cosine_embedding_loss`): x1, x2 [N, D] with y [N], or [D] with a 0-d y.
-- Errors name nn.CosineEmbeddingLoss (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage local loss = nn.CosineEmbeddingLoss{margin = 0.2}
-- print(loss(ember.randn(4, 3), ember.randn(4, 3), ember.tensor({1, -1, 1, -1})).shape)   --> ember.Size{}
-- @classmod nn.CosineEmbeddingLoss
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local CosineEmbeddingLoss = Module:extend("CosineEmbeddingLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
CosineEmbeddingLoss.SIGNATURE = { sizes = {}, options = { "margin", "size_average", "reduce", "reduction" }, string_option = "reduction" }

function CosineEmbeddingLoss:__init(opts)
  losses.setup(self, opts, nil, { "margin" })
  if self.margin == nil then self.margin = 0 end
end

--- The loss.
-- @tparam Tensor x1 [N, D] or [D]
-- @tparam Tensor x2 x1's shape
-- @tparam Tensor y [N] (or 0-d): 1 or -1
-- @treturn Tensor
function CosineEmbeddingLoss:forward(x1, x2, y)
  Module.check_tensor_input("CosineEmbeddingLoss.forward", x1)
  return require("ember.nn.functional").cosine_embedding_loss(x1, x2, y, {
    margin = self.margin, reduction = self.reduction,
  })
end

--- Its options, for printing.
function CosineEmbeddingLoss:extra_repr() return ("margin=%g, reduction=%s"):format(self.margin, self.reduction) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
CosineEmbeddingLoss.forward = require("ember._errors").wrap(CosineEmbeddingLoss.forward)

return CosineEmbeddingLoss
