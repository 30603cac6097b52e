--- nn.ELU([alpha = 1]): x where x > 0, alpha (e^x - 1) elsewhere, as torch.nn.ELU.
-- @usage local y = nn.ELU()(ember.randn(2, 3))
-- @classmod nn.ELU
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local ELU = Module:extend("ELU")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ELU.SIGNATURE = { sizes = {}, options = { "alpha", "inplace" } }

function ELU:__init(...)
  local alpha = Module.keyword_args("nn.ELU", { "alpha", "inplace" }, ...)
  alpha = alpha or 1
  if type(alpha) ~= "number" then error("ELU: alpha must be a number, got " .. type(alpha), 3) end
  self.alpha = alpha
end

--- elu(x, alpha).
-- @tparam Tensor x
function ELU:forward(x)
  if not ember.is_tensor(x) then error("ELU.forward: expected a tensor, got " .. type(x), 2) end
  return x:elu(self.alpha)
end

--- Its options, for printing.
function ELU:extra_repr() return ("alpha=%g"):format(self.alpha) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ELU.forward = require("ember._errors").wrap(ELU.forward)

return ELU
