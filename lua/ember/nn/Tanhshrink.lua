--- nn.Tanhshrink(): x - tanh(x), as torch.nn.Tanhshrink (`nn.functional.tanhshrink`).
-- Errors name nn.Tanhshrink: an input that is not a tensor.
-- @usage print(nn.Tanhshrink()(ember.randn(2, 3)).shape)   --> ember.Size{2, 3}
-- @classmod nn.Tanhshrink
local Module = require "ember.nn.Module"

local Tanhshrink = Module:extend("Tanhshrink")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Tanhshrink.SIGNATURE = { sizes = {}, options = {} }

--- x - tanh(x).
-- @tparam Tensor x
-- @treturn Tensor the same shape
function Tanhshrink:forward(x)
  Module.check_tensor_input("Tanhshrink.forward", x)
  return require("ember.nn.functional").tanhshrink(x)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Tanhshrink.forward = require("ember._errors").wrap(Tanhshrink.forward)

return Tanhshrink
