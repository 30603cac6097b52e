--- nn.Hardshrink([lambd = 0.5]) or nn.Hardshrink{lambd =}: x where |x| > lambd, 0 elsewhere, as torch.nn.Hardshrink
-- (`nn.functional.hardshrink`).
-- Errors name nn.Hardshrink: a lambd that is not a number >= 0, an input that is not a tensor.
-- @usage print(nn.Hardshrink(0.5)(ember.randn(2, 3)).shape)   --> ember.Size{2, 3}
-- @classmod nn.Hardshrink
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"

local Hardshrink = Module:extend("Hardshrink")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Hardshrink.SIGNATURE = { sizes = {}, options = { "lambd" } }

function Hardshrink:__init(...)
  local lambd = Module.keyword_args("nn.Hardshrink", { "lambd" }, ...)
  lambd = lambd or 0.5
  if type(lambd) ~= "number" or not (lambd >= 0) then
    error("Hardshrink: lambd must be a number >= 0, got " .. tostring(lambd), 3)
  end
  self.lambd = lambd
end

--- hardshrink(x, lambd).
-- @tparam Tensor x
-- @treturn Tensor the same shape
function Hardshrink:forward(x)
  Module.check_tensor_input("Hardshrink.forward", x)
  return require("ember.nn.functional").hardshrink(x, self.lambd)
end

--- Its lambd, for printing (PyTorch's text).
function Hardshrink:extra_repr() return ("%g"):format(self.lambd) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Hardshrink.forward = require("ember._errors").wrap(Hardshrink.forward)

return Hardshrink
