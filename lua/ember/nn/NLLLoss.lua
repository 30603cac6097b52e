--- nn.NLLLoss([{weight =, ignore_index =, reduction = "mean"}]): the negative
-- log-likelihood of log-probabilities [N, C] at 1-based int64 class ids [N],
-- as torch.nn.NLLLoss (Torch7's ClassNLLCriterion); with nn.LogSoftmax it is
-- nn.CrossEntropyLoss (`ember.nll_loss`). PyTorch's other layouts work too:
-- unbatched [C] with a 0-d target, and [N, C, d1, ...] with [N, d1, ...]
-- (the classes in dim 2, as torch's; "none" gives the target's shape).
-- @usage local logp = nn.LogSoftmax()(ember.randn(4, 3))
-- local loss = nn.NLLLoss()(logp, ember.tensor({1, 3, 2, 1}, {dtype = "int64"}))
-- @classmod nn.NLLLoss
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local setup = require("ember.nn._loss").setup

local NLLLoss = Module:extend("NLLLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
NLLLoss.SIGNATURE = { sizes = {}, options = { "weight", "size_average", "ignore_index", "reduce", "reduction" }, string_option = "reduction" }

function NLLLoss:__init(opts) setup(self, opts, { "weight" }, { "ignore_index" }) end

--- The loss of log-probabilities against class ids.
-- @tparam Tensor input
-- @tparam Tensor target
function NLLLoss:forward(input, target)
  return ember.nll_loss(input, target, { weight = self.weight, ignore_index = self.ignore_index, reduction = self.reduction })
end

--- Its options, for printing.
function NLLLoss:extra_repr() return "reduction=" .. self.reduction .. (self.ignore_index and (", ignore_index=" .. self.ignore_index) or "") end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
NLLLoss.forward = require("ember._errors").wrap(NLLLoss.forward)

return NLLLoss
