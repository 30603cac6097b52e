--- nn.LogSigmoid(): log(sigmoid(x)) = -softplus(-x), stable for any x, as torch.nn.LogSigmoid
-- (`nn.functional.logsigmoid`).
-- Errors name nn.LogSigmoid: an input that is not a tensor.
-- @usage print(nn.LogSigmoid()(ember.randn(2, 3)).shape)   --> ember.Size{2, 3}
-- @classmod nn.LogSigmoid
local Module = require "ember.nn.Module"

local LogSigmoid = Module:extend("LogSigmoid")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
LogSigmoid.SIGNATURE = { sizes = {}, options = {} }

--- log(sigmoid(x)).
-- @tparam Tensor x
-- @treturn Tensor the same shape
function LogSigmoid:forward(x)
  Module.check_tensor_input("LogSigmoid.forward", x)
  return require("ember.nn.functional").logsigmoid(x)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LogSigmoid.forward = require("ember._errors").wrap(LogSigmoid.forward)

return LogSigmoid
