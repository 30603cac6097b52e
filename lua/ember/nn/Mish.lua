--- nn.Mish(): x * tanh(softplus(x)), as torch.nn.Mish (`ember.softplus`).
-- Errors name nn.Mish: an input that is not a tensor.
-- @usage local y = nn.Mish()(ember.randn(2, 3))
-- @classmod nn.Mish
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Mish = Module:extend("Mish")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Mish.SIGNATURE = { sizes = {}, options = { "inplace" }, closed = true }

--- x * tanh(softplus(x)).
-- @tparam Tensor x
-- @treturn Tensor the same shape
function Mish:forward(x)
  if not ember.is_tensor(x) then error("Mish.forward: expected a tensor, got " .. type(x), 2) end
  return ember.mish(x)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Mish.forward = require("ember._errors").wrap(Mish.forward)

return Mish
