--- nn.MSELoss([{reduction="mean"|"sum"|"none"}]): mean squared error.
-- @usage local pred, target = ember.randn(4, 3), ember.randn(4, 3)
-- local loss = nn.MSELoss()(pred, target)
-- @classmod nn.MSELoss
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local setup = require("ember.nn._loss").setup

local MSELoss = Module:extend("MSELoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
MSELoss.SIGNATURE = { sizes = {}, options = { "size_average", "reduce", "reduction" }, string_option = "reduction" }

function MSELoss:__init(opts)
  setup(self, opts) -- the reduction, checked as every loss's
end

--- The mean squared error of input against target (same shapes).
-- @tparam Tensor input
-- @tparam Tensor target
function MSELoss:forward(input, target)
  return ember.mse_loss(input, target, self.reduction)
end

--- The reduction, for printing.
function MSELoss:extra_repr() return "reduction=" .. self.reduction end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
MSELoss.forward = require("ember._errors").wrap(MSELoss.forward)

return MSELoss
