--- nn.KLDivLoss([{reduction = "mean", log_target = false}]): the
-- Kullback-Leibler divergence of the target distribution from the input's,
-- as torch.nn.KLDivLoss: input is log-probabilities, target probabilities
-- (log-probabilities with log_target); pointwise
-- target (log target - input), 0 where target = 0 (PyTorch's xlogy), or
-- exp(target) (target - input) with log_target. reduction "batchmean"
-- (the sum over the batch size input:size(1): the true KL divergence, what
-- PyTorch recommends), "mean" (over every element, PyTorch's default),
-- "sum" or "none". Gradients reach both input and target (NaN for the
-- target where it is 0, as PyTorch's). ember.kl_div computes it.
-- Errors name nn.KLDivLoss: a bad reduction or log_target, inputs that are not tensors of one shape.
-- @usage local kl = nn.KLDivLoss({reduction = "batchmean"})
-- local loss = kl(ember.randn(4, 5):log_softmax(2), ember.randn(4, 5):softmax(2))
-- @classmod nn.KLDivLoss
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local setup = require("ember.nn._loss").setup

local KLDivLoss = Module:extend("KLDivLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
KLDivLoss.SIGNATURE = { sizes = {}, options = { "size_average", "reduce", "reduction", "log_target" }, string_option = "reduction" }

function KLDivLoss:__init(opts)
  opts = setup(self, opts, nil, nil, { "mean", "batchmean", "sum", "none" }, { "log_target" })
  if opts.log_target ~= nil and type(opts.log_target) ~= "boolean" then
    error("KLDivLoss: log_target must be a boolean, got " .. type(opts.log_target), 2)
  end
  self.log_target = opts.log_target == true
end

-- Both tensors, of one shape (the module's name in the error).
local function check_pair(name, input, target)
  if not ember.is_tensor(input) or not ember.is_tensor(target) then
    error(("%s.forward: expected two tensors (input, target), got %s and %s"):format(name,
      ember.is_tensor(input) and "a tensor" or type(input), ember.is_tensor(target) and "a tensor" or type(target)), 3)
  end
  local same = input.ndim == target.ndim
  for i = 1, input.ndim do same = same and input.shape[i] == target.shape[i] end
  if not same then
    error(("%s.forward: target shape %s must equal input shape %s"):format(name, shape_str(target),
      shape_str(input)), 3)
  end
end
KLDivLoss._check_pair = check_pair

--- The divergence.
-- @tparam Tensor input log-probabilities
-- @tparam Tensor target probabilities (log-probabilities with log_target), input's shape
-- @treturn Tensor a scalar, or input's shape with reduction "none"
function KLDivLoss:forward(input, target)
  check_pair("KLDivLoss", input, target)
  return ember.kl_div(input, target, { reduction = self.reduction, log_target = self.log_target })
end

--- Its options, for printing.
function KLDivLoss:extra_repr()
  return ("reduction=%s, log_target=%s"):format(self.reduction, tostring(self.log_target))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
KLDivLoss.forward = require("ember._errors").wrap(KLDivLoss.forward)

return KLDivLoss
