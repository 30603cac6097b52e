--- nn.Softmax2d(): softmax over the channels of [N, C, H, W] (or [C, H, W]) at each
-- location, as torch.nn.Softmax2d.
-- Errors name nn.Softmax2d: an input that is not 3-d or 4-d.
-- @usage local p = nn.Softmax2d()(ember.randn(2, 3, 4, 4))   -- sums to 1 over dim 2
-- print(p.shape)   --> ember.Size{2, 3, 4, 4}
-- @classmod nn.Softmax2d
local Module = require "ember.nn.Module"
local errors = require "ember._errors"

local Softmax2d = Module:extend("Softmax2d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Softmax2d.SIGNATURE = { sizes = {}, options = {} }

--- softmax along the channel dim (-3).
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor the same shape
function Softmax2d:forward(x)
  Module.check_tensor_input("Softmax2d.forward", x)
  if x.ndim ~= 3 and x.ndim ~= 4 then
    errors.raise("Softmax2d.forward: expected an input [N, C, H, W] or [C, H, W], got shape %s", errors.shape_str(x))
  end
  return x:softmax(-3)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Softmax2d.forward = require("ember._errors").wrap(Softmax2d.forward)

return Softmax2d
