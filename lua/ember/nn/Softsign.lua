--- nn.Softsign(): x / (1 + |x|), as torch.nn.Softsign.
-- Errors name nn.Softsign: an input that is not a tensor.
-- @usage print(nn.Softsign()(ember.tensor({-3, 0, 1})))   --> tensor([-0.7500, 0.0000, 0.5000], shape=[3], dtype=float32, device=cpu)
-- @classmod nn.Softsign
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Softsign = Module:extend("Softsign")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Softsign.SIGNATURE = { sizes = {}, options = {} }

--- x / (1 + |x|).
-- @tparam Tensor x
-- @treturn Tensor the same shape
function Softsign:forward(x)
  if not ember.is_tensor(x) then error("Softsign.forward: expected a tensor, got " .. type(x), 2) end
  return Softsign._softsign(x)
end

-- x / (1 + |x|): the module's forward and nn.functional.softsign's.
function Softsign._softsign(x) return x / (x:abs() + 1) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Softsign.forward = require("ember._errors").wrap(Softsign.forward)

return Softsign
