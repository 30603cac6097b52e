--- nn.HuberLoss([{delta = 1, reduction = "mean"}]): 0.5 d^2 where |d| < delta,
-- delta (|d| - 0.5 delta) elsewhere, for d = input - target, as
-- torch.nn.HuberLoss. It is delta times `nn.SmoothL1Loss` with beta = delta
-- (`ember.smooth_l1_loss`). Gradients reach both input and target.
-- Errors name nn.HuberLoss: a delta that is not > 0, a bad reduction, inputs that are not tensors of one shape.
-- @usage local loss = nn.HuberLoss({delta = 0.5})(ember.randn(4, 3), ember.randn(4, 3))
-- @classmod nn.HuberLoss
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local setup = require("ember.nn._loss").setup
local check_pair = require("ember.nn.KLDivLoss")._check_pair

local HuberLoss = Module:extend("HuberLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
HuberLoss.SIGNATURE = { sizes = {}, options = { "reduction", "delta" }, string_option = "reduction" }

function HuberLoss:__init(opts)
  setup(self, opts, nil, { "delta" })
  self.delta = self.delta or 1
  if not (self.delta > 0) then error("HuberLoss: delta must be a number > 0, got " .. tostring(self.delta), 2) end
end

--- The Huber loss.
-- @tparam Tensor input
-- @tparam Tensor target input's shape
-- @treturn Tensor a scalar, or input's shape with reduction "none"
function HuberLoss:forward(input, target)
  check_pair("HuberLoss", input, target)
  return ember.huber_loss(input, target, { delta = self.delta, reduction = self.reduction })
end

--- Its options, for printing.
function HuberLoss:extra_repr() return ("delta=%g, reduction=%s"):format(self.delta, self.reduction) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
HuberLoss.forward = require("ember._errors").wrap(HuberLoss.forward)

return HuberLoss
