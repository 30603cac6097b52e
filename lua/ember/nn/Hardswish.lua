--- nn.Hardswish(): x * min(max(x + 3, 0), 6) / 6, as torch.nn.Hardswish
-- (MobileNetV3), through ember.hardswish: its gradient is PyTorch's formula
-- (0 below -3, x / 3 + 1/2 on [-3, 3], 1 above; PyTorch 1.13's vectorised
-- CPU loop gives 1 at exactly 3 instead).
-- Errors name nn.Hardswish: an input that is not a tensor.
-- @usage print(nn.Hardswish()(ember.tensor({-4, 0, 4})))   --> tensor([0.0000, 0.0000, 4.0000], shape=[3], dtype=float32, device=cpu)
-- @classmod nn.Hardswish
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Hardswish = Module:extend("Hardswish")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Hardswish.SIGNATURE = { sizes = {}, options = { "inplace" }, closed = true }

--- x * relu6(x + 3) / 6.
-- @tparam Tensor x
-- @treturn Tensor the same shape
function Hardswish:forward(x)
  if not ember.is_tensor(x) then error("Hardswish.forward: expected a tensor, got " .. type(x), 2) end
  return ember.hardswish(x)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Hardswish.forward = require("ember._errors").wrap(Hardswish.forward)

return Hardswish
