--- nn.L1Loss([{reduction = "mean"}]): |input - target|, as torch.nn.L1Loss
-- (`ember.l1_loss`).
-- @usage local loss = nn.L1Loss()(ember.randn(4, 3), ember.randn(4, 3))
-- @classmod nn.L1Loss
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local setup = require("ember.nn._loss").setup

local L1Loss = Module:extend("L1Loss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
L1Loss.SIGNATURE = { sizes = {}, options = { "size_average", "reduce", "reduction" }, string_option = "reduction" }

function L1Loss:__init(opts) setup(self, opts, nil, nil) end

--- The mean (or sum) absolute error.
-- @tparam Tensor input
-- @tparam Tensor target
function L1Loss:forward(input, target)
  return ember.l1_loss(input, target, { reduction = self.reduction })
end

--- Its options, for printing.
function L1Loss:extra_repr() return "reduction=" .. self.reduction end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
L1Loss.forward = require("ember._errors").wrap(L1Loss.forward)

return L1Loss
