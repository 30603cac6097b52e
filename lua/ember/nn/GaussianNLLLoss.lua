--- nn.GaussianNLLLoss([{full = false, eps = 1e-6, reduction = "mean"}]): the negative
-- log-likelihood of a Gaussian target: 0.5 (log(max(var, eps)) + (x - y)^2 / max(var, eps)) (+ 0.5 log(2 pi)
-- where full), as torch.nn.GaussianNLLLoss (`nn.functional.gaussian_nll_loss`).
-- Errors name nn.GaussianNLLLoss (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage print(nn.GaussianNLLLoss()(ember.randn(4, 2), ember.randn(4, 2), ember.rand(4, 2)).shape)   --> ember.Size{}
-- @classmod nn.GaussianNLLLoss
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local GaussianNLLLoss = Module:extend("GaussianNLLLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
GaussianNLLLoss.SIGNATURE = { sizes = {}, options = { "full", "eps", "reduction" }, string_option = "reduction" }

-- one option's check (the constructor's)
local function check(what, v, ok, want)
  if not ok then error(("GaussianNLLLoss: %s must be %s, got %s"):format(what, want, tostring(v)), 4) end
end

function GaussianNLLLoss:__init(opts)
  opts = losses.setup(self, opts, nil, { "eps" }, nil, { "full" })
  local v = opts.full
  if v == nil then v = false end
  check("full", v, type(v) == "boolean", "a boolean")
  self.full = v
  if self.eps == nil then self.eps = 1e-06 end
end

--- The loss.
-- @tparam Tensor input
-- @tparam Tensor target input's shape
-- @tparam Tensor var input's shape (or one fewer last dim of 1)
-- @treturn Tensor
function GaussianNLLLoss:forward(input, target, var)
  Module.check_tensor_input("GaussianNLLLoss.forward", input)
  return require("ember.nn.functional").gaussian_nll_loss(input, target, var, {
    full = self.full, eps = self.eps, reduction = self.reduction,
  })
end

--- Its options, for printing.
function GaussianNLLLoss:extra_repr()
  return ("full=%s, eps=%g, reduction=%s"):format(
    tostring(self.full), self.eps, self.reduction)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
GaussianNLLLoss.forward = require("ember._errors").wrap(GaussianNLLLoss.forward)

return GaussianNLLLoss
