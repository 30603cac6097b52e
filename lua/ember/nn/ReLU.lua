--- nn.ReLU(): max(x, 0).
-- @usage local x = ember.randn(2, 3)
-- local y = nn.ReLU()(x)
-- @classmod nn.ReLU
local Module = require "ember.nn.Module"

local ReLU = Module:extend("ReLU")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ReLU.SIGNATURE = { sizes = {}, options = { "inplace" }, closed = true }

--- max(x, 0).
-- @tparam Tensor x
function ReLU:forward(x)
  Module.check_tensor_input("ReLU.forward", x)
  return x:relu()
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ReLU.forward = require("ember._errors").wrap(ReLU.forward)

return ReLU
