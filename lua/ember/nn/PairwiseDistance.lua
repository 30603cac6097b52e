--- nn.PairwiseDistance([p = 2 [, eps = 1e-6 [, keepdim = false]]]): the p-norm
-- of x1 - x2 + eps along the last dim, as torch.nn.PairwiseDistance (eps
-- keeps the gradient of the norm finite where x1 = x2).
-- Errors name nn.PairwiseDistance: a bad p, eps or keepdim, inputs that are not tensors.
-- @usage local dist = nn.PairwiseDistance()
-- print(dist(ember.randn(4, 8), ember.randn(4, 8)).shape)   --> ember.Size{4}
-- @classmod nn.PairwiseDistance
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local PairwiseDistance = Module:extend("PairwiseDistance")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
PairwiseDistance.SIGNATURE = { sizes = {}, options = { "p", "eps", "keepdim" } }

function PairwiseDistance:__init(...)
  local p, eps, keepdim = Module.keyword_args("nn.PairwiseDistance", { "p", "eps", "keepdim" }, ...)
  local opts = type(p) == "table" and p or { p = p, eps = eps, keepdim = keepdim } -- nn.PairwiseDistance(1) too
  if type(opts) ~= "table" then
    error("PairwiseDistance: options must be a table {p =, eps =, keepdim =}, got " .. type(opts), 2)
  end
  self.norm, self.eps, self.keepdim = opts.p or 2, opts.eps or 1e-6, opts.keepdim == true
  if type(self.norm) ~= "number" or not (self.norm > 0) then
    error("PairwiseDistance: p must be a number > 0, got " .. tostring(self.norm), 2)
  end
  if type(self.eps) ~= "number" then error("PairwiseDistance: eps must be a number, got " .. type(self.eps), 2) end
  if opts.keepdim ~= nil and type(opts.keepdim) ~= "boolean" then
    error("PairwiseDistance: keepdim must be a boolean, got " .. type(opts.keepdim), 2)
  end
end

--- ||x1 - x2 + eps||_p over the last dim.
-- @tparam Tensor x1
-- @tparam Tensor x2 broadcastable with x1
-- @treturn Tensor the broadcast shape without its last dim (kept as 1 with keepdim)
function PairwiseDistance:forward(x1, x2)
  if not ember.is_tensor(x1) or not ember.is_tensor(x2) then
    error(("PairwiseDistance.forward: expected two tensors, got %s and %s"):format(
      ember.is_tensor(x1) and "a tensor" or type(x1), ember.is_tensor(x2) and "a tensor" or type(x2)), 2)
  end
  return PairwiseDistance._distance(x1, x2, self.norm, self.eps, self.keepdim)
end

-- ||x1 - x2 + eps||_p over the last dim: the module's forward,
-- nn.TripletMarginLoss's and nn.functional.pairwise_distance's.
function PairwiseDistance._distance(x1, x2, p, eps, keepdim)
  return (x1 - x2 + eps):norm(p, -1, keepdim)
end

--- Its options, for printing.
function PairwiseDistance:extra_repr()
  return ("p=%g, eps=%g, keepdim=%s"):format(self.norm, self.eps, tostring(self.keepdim))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
PairwiseDistance.forward = require("ember._errors").wrap(PairwiseDistance.forward)

return PairwiseDistance
