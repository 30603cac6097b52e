--- nn.CELU([alpha = 1]) or nn.CELU{alpha =}: x where x > 0, alpha (e^(x / alpha) - 1)
-- elsewhere, as torch.nn.CELU (`nn.functional.celu`).
-- Errors name nn.CELU: an alpha that is not a nonzero number, an input that is not a tensor.
-- @usage print(nn.CELU(0.5)(ember.randn(2, 3)).shape)   --> ember.Size{2, 3}
-- @classmod nn.CELU
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"

local CELU = Module:extend("CELU")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
CELU.SIGNATURE = { sizes = {}, options = { "alpha", "inplace" } }

function CELU:__init(...)
  local alpha = Module.keyword_args("nn.CELU", { "alpha", "inplace" }, ...)
  alpha = alpha or 1
  if type(alpha) ~= "number" or alpha == 0 then error("CELU: alpha must be a nonzero number, got " .. tostring(alpha), 3) end
  self.alpha = alpha
end

--- celu(x, alpha).
-- @tparam Tensor x
-- @treturn Tensor the same shape
function CELU:forward(x)
  Module.check_tensor_input("CELU.forward", x)
  return require("ember.nn.functional").celu(x, self.alpha)
end

--- Its options, for printing.
function CELU:extra_repr() return ("alpha=%g"):format(self.alpha) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
CELU.forward = require("ember._errors").wrap(CELU.forward)

return CELU
