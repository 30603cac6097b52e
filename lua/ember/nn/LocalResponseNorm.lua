--- nn.LocalResponseNorm(size [, {alpha = 1e-4, beta = 0.75, k = 1}]): x / (k + alpha mean(x^2
-- over size neighbouring channels))^beta, as torch.nn.LocalResponseNorm (`nn.functional.local_response_norm`).
-- Errors name nn.LocalResponseNorm at the caller's line: its options, and its input (checked as nn.functional's, named LocalResponseNorm.forward).
-- @usage print(nn.LocalResponseNorm(3)(ember.randn(2, 5, 4, 4)).shape)   --> ember.Size{2, 5, 4, 4}
-- @classmod nn.LocalResponseNorm
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"

local LocalResponseNorm = Module:extend("LocalResponseNorm")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
LocalResponseNorm.SIGNATURE = { sizes = { "size" },
  options = { "alpha", "beta", "k" } }

-- one option's check (the constructor's)
local function check(what, v, ok, want)
  if not ok then error(("LocalResponseNorm: %s must be %s, got %s"):format(what, want, tostring(v)), 4) end
end

function LocalResponseNorm:__init(size, opts)
  opts = Module.check_options("nn.LocalResponseNorm", opts, { "alpha", "beta", "k" })
  check("size", size, math.type(size) == "integer" and size > 0, "a positive integer")
  self.size = size
  local alpha = opts.alpha
  if alpha == nil then alpha = 0.0001 end
  check("alpha", alpha, type(alpha) == "number", "a number")
  self.alpha = alpha
  local beta = opts.beta
  if beta == nil then beta = 0.75 end
  check("beta", beta, type(beta) == "number", "a number")
  self.beta = beta
  local k = opts.k
  if k == nil then k = 1 end
  check("k", k, type(k) == "number", "a number")
  self.k = k
end

--- The normalised input.
-- @tparam Tensor x [N, C, *]
-- @treturn Tensor
function LocalResponseNorm:forward(x)
  Module.check_tensor_input("LocalResponseNorm.forward", x)
  return require("ember.nn.functional").local_response_norm(x, self.size, {
    alpha = self.alpha, beta = self.beta, k = self.k,
  })
end

--- Its options, for printing.
function LocalResponseNorm:extra_repr()
  return ("%d, alpha=%g, beta=%g, k=%g"):format(
    self.size, self.alpha, self.beta, self.k)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LocalResponseNorm.forward = require("ember._errors").wrap(LocalResponseNorm.forward, true)

return LocalResponseNorm
