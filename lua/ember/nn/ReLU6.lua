--- nn.ReLU6(): min(max(x, 0), 6), as torch.nn.ReLU6 (an `nn.Hardtanh(0, 6)`:
-- the gradient is 1 strictly between 0 and 6, 0 elsewhere).
-- Errors name nn.ReLU6: an input that is not a tensor.
-- @usage print(nn.ReLU6()(ember.tensor({-1, 3, 8})))   --> tensor([0.0000, 3.0000, 6.0000], shape=[3], dtype=float32, device=cpu)
-- @classmod nn.ReLU6
local Hardtanh = require "ember.nn.Hardtanh"

local ReLU6 = Hardtanh:extend("ReLU6")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ReLU6.SIGNATURE = { sizes = {}, options = { "inplace" }, closed = true }

function ReLU6:__init() Hardtanh.__init(self, 0, 6) end

--- Nothing to print: ReLU6().
function ReLU6:extra_repr() return "" end

return ReLU6
