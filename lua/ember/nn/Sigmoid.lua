--- nn.Sigmoid(): 1 / (1 + e^-x), as torch.nn.Sigmoid.
-- @usage local y = nn.Sigmoid()(ember.randn(2, 3))
-- @classmod nn.Sigmoid
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Sigmoid = Module:extend("Sigmoid")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Sigmoid.SIGNATURE = { sizes = {}, options = {} }

--- sigmoid(x), elementwise.
-- @tparam Tensor x
function Sigmoid:forward(x)
  if not ember.is_tensor(x) then error("Sigmoid.forward: expected a tensor, got " .. type(x), 2) end
  return x:sigmoid()
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Sigmoid.forward = require("ember._errors").wrap(Sigmoid.forward)

return Sigmoid
