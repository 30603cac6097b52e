--- nn.Softmin([dim = -1]) or nn.Softmin{dim =}: softmax(-x) along dim (1-based; negative from
-- the end), as torch.nn.Softmin; the same dim rule as `nn.Softmax`.
-- @usage local p = nn.Softmin(2)(ember.randn(2, 5))   -- each row sums to 1
-- @classmod nn.Softmin
local Module = require "ember.nn.Module"
local Softmax = require "ember.nn.Softmax"

local Softmin = Softmax:extend("Softmin")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Softmin.SIGNATURE = { sizes = {}, options = { "dim" } }

--- softmax(-x) along self.dim.
-- @tparam Tensor x
-- @treturn Tensor the same shape
function Softmin:forward(x)
  Module.check_tensor_input("Softmin.forward", x)
  return (-x):softmax(self.dim)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Softmin.forward = require("ember._errors").wrap(Softmin.forward)

return Softmin
