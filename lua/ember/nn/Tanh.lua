--- nn.Tanh(): tanh(x), as torch.nn.Tanh.
-- @usage local y = nn.Tanh()(ember.randn(2, 3))
-- @classmod nn.Tanh
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Tanh = Module:extend("Tanh")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Tanh.SIGNATURE = { sizes = {}, options = {} }

--- tanh(x), elementwise.
-- @tparam Tensor x
function Tanh:forward(x)
  if not ember.is_tensor(x) then error("Tanh.forward: expected a tensor, got " .. type(x), 2) end
  return x:tanh()
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Tanh.forward = require("ember._errors").wrap(Tanh.forward)

return Tanh
