--- nn.SmoothL1Loss([{beta = 1, reduction = "mean"}]): squared below beta, absolute
-- above (Huber's, scaled by 1/beta), as torch.nn.SmoothL1Loss (`ember.smooth_l1_loss`).
-- @usage local loss = nn.SmoothL1Loss({beta = 0.5})(ember.randn(4, 3), ember.randn(4, 3))
-- @classmod nn.SmoothL1Loss
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local setup = require("ember.nn._loss").setup

local SmoothL1Loss = Module:extend("SmoothL1Loss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
SmoothL1Loss.SIGNATURE = { sizes = {}, options = { "size_average", "reduce", "reduction", "beta" }, string_option = "reduction" }

function SmoothL1Loss:__init(opts) setup(self, opts, nil, { "beta" }) end

--- The smooth L1 loss.
-- @tparam Tensor input
-- @tparam Tensor target
function SmoothL1Loss:forward(input, target)
  return ember.smooth_l1_loss(input, target, { beta = self.beta, reduction = self.reduction })
end

--- Its options, for printing.
function SmoothL1Loss:extra_repr() return ("beta=%g, reduction=%s"):format(self.beta or 1, self.reduction) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
SmoothL1Loss.forward = require("ember._errors").wrap(SmoothL1Loss.forward)

return SmoothL1Loss
