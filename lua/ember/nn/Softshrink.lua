--- nn.Softshrink([lambd = 0.5]) or nn.Softshrink{lambd =}: x - lambd where x > lambd, x + lambd where x < -lambd, 0 elsewhere, as torch.nn.Softshrink
-- (`nn.functional.softshrink`).
-- Errors name nn.Softshrink: a lambd that is not a number >= 0, an input that is not a tensor.
-- @usage print(nn.Softshrink(0.5)(ember.randn(2, 3)).shape)   --> ember.Size{2, 3}
-- @classmod nn.Softshrink
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"

local Softshrink = Module:extend("Softshrink")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Softshrink.SIGNATURE = { sizes = {}, options = { "lambd" } }

function Softshrink:__init(...)
  local lambd = Module.keyword_args("nn.Softshrink", { "lambd" }, ...)
  lambd = lambd or 0.5
  if type(lambd) ~= "number" or not (lambd >= 0) then
    error("Softshrink: lambd must be a number >= 0, got " .. tostring(lambd), 3)
  end
  self.lambd = lambd
end

--- softshrink(x, lambd).
-- @tparam Tensor x
-- @treturn Tensor the same shape
function Softshrink:forward(x)
  Module.check_tensor_input("Softshrink.forward", x)
  return require("ember.nn.functional").softshrink(x, self.lambd)
end

--- Its lambd, for printing (PyTorch's text).
function Softshrink:extra_repr() return ("%g"):format(self.lambd) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Softshrink.forward = require("ember._errors").wrap(Softshrink.forward)

return Softshrink
