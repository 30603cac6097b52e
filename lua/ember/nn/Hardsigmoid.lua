--- nn.Hardsigmoid(): min(max(x + 3, 0), 6) / 6, as torch.nn.Hardsigmoid; the
-- gradient is 1/6 strictly between -3 and 3, 0 elsewhere (as PyTorch's,
-- whose CPU kernel multiplies by 1/6 rounded to float32 even for float64:
-- a 3e-8 relative difference).
-- Errors name nn.Hardsigmoid: an input that is not a tensor.
-- @usage print(nn.Hardsigmoid()(ember.tensor({-4, 0, 4})))   --> tensor([0.0000, 0.5000, 1.0000], shape=[3], dtype=float32, device=cpu)
-- @classmod nn.Hardsigmoid
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Hardsigmoid = Module:extend("Hardsigmoid")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Hardsigmoid.SIGNATURE = { sizes = {}, options = { "inplace" }, closed = true }

--- relu6(x + 3) / 6.
-- @tparam Tensor x
-- @treturn Tensor the same shape
function Hardsigmoid:forward(x)
  if not ember.is_tensor(x) then error("Hardsigmoid.forward: expected a tensor, got " .. type(x), 2) end
  return ember.hardsigmoid(x)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Hardsigmoid.forward = require("ember._errors").wrap(Hardsigmoid.forward)

return Hardsigmoid
