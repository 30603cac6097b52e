--- nn.PoissonNLLLoss([{log_input = true, full = false, eps = 1e-8, reduction = "mean"}]): the
-- negative log-likelihood of a Poisson target: e^x - y x (log_input) or x - y log(x + eps), plus Stirling's
-- term where full, as torch.nn.PoissonNLLLoss (`nn.functional.poisson_nll_loss`).
-- Errors name nn.PoissonNLLLoss (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage print(nn.PoissonNLLLoss()(ember.randn(4), ember.tensor({0, 2, 1, 3})).shape)   --> ember.Size{}
-- @classmod nn.PoissonNLLLoss
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local PoissonNLLLoss = Module:extend("PoissonNLLLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
PoissonNLLLoss.SIGNATURE = { sizes = {}, options = { "log_input", "full", "size_average", "eps", "reduce", "reduction" }, string_option = "reduction" }

-- one option's check (the constructor's)
local function check(what, v, ok, want)
  if not ok then error(("PoissonNLLLoss: %s must be %s, got %s"):format(what, want, tostring(v)), 4) end
end

function PoissonNLLLoss:__init(opts)
  opts = losses.setup(self, opts, nil, { "eps" }, nil, { "log_input", "full" })
  local v = opts.log_input
  if v == nil then v = true end
  check("log_input", v, type(v) == "boolean", "a boolean")
  self.log_input = v
  local v = opts.full
  if v == nil then v = false end
  check("full", v, type(v) == "boolean", "a boolean")
  self.full = v
  if self.eps == nil then self.eps = 1e-08 end
end

--- The loss.
-- @tparam Tensor input
-- @tparam Tensor target input's shape
-- @treturn Tensor
function PoissonNLLLoss:forward(input, target)
  Module.check_tensor_input("PoissonNLLLoss.forward", input)
  return require("ember.nn.functional").poisson_nll_loss(input, target, {
    log_input = self.log_input, full = self.full, eps = self.eps, reduction = self.reduction,
  })
end

--- Its options, for printing.
function PoissonNLLLoss:extra_repr()
  return ("log_input=%s, full=%s, eps=%g, reduction=%s"):format(
    tostring(self.log_input), tostring(self.full), self.eps, self.reduction)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
PoissonNLLLoss.forward = require("ember._errors").wrap(PoissonNLLLoss.forward)

return PoissonNLLLoss
