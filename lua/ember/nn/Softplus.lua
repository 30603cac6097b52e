--- nn.Softplus([beta = 1 [, threshold = 20]]): log(1 + e^(beta x)) / beta, linear
-- where beta x > threshold, as torch.nn.Softplus (`ember.softplus`); also
-- by name, `nn.Softplus{beta = 2, threshold = 10}`.
-- @usage local y = nn.Softplus()(ember.randn(2, 3))
-- @classmod nn.Softplus
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Softplus = Module:extend("Softplus")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Softplus.SIGNATURE = { sizes = {}, options = { "beta", "threshold" } }

function Softplus:__init(...)
  local beta, threshold = Module.keyword_args("nn.Softplus", { "beta", "threshold" }, ...)
  self.beta, self.threshold = beta or 1, threshold or 20
  if type(self.beta) ~= "number" or not (self.beta > 0) then
    error("Softplus: beta must be a number > 0, got " .. tostring(self.beta), 3)
  end
  if type(self.threshold) ~= "number" then
    error("Softplus: threshold must be a number, got " .. type(self.threshold), 3)
  end
end

--- softplus(x, {beta, threshold}).
-- @tparam Tensor x
function Softplus:forward(x)
  if not ember.is_tensor(x) then error("Softplus.forward: expected a tensor, got " .. type(x), 2) end
  return ember.softplus(x, { beta = self.beta, threshold = self.threshold })
end

--- Its options, for printing.
function Softplus:extra_repr() return ("beta=%g, threshold=%g"):format(self.beta, self.threshold) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Softplus.forward = require("ember._errors").wrap(Softplus.forward)

return Softplus
