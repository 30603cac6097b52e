--- nn.LogSoftmax([dim = -1]): log(softmax) along dim, as torch.nn.LogSoftmax
-- (nn.Softmax's options and checks; only the forward differs).
-- @usage local logp = nn.LogSoftmax(-1)(ember.randn(2, 5))
-- @classmod nn.LogSoftmax
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Softmax = require "ember.nn.Softmax"

local LogSoftmax = Softmax:extend("LogSoftmax")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
LogSoftmax.SIGNATURE = { sizes = {}, options = { "dim" } }

--- log_softmax along self.dim.
-- @tparam Tensor x
function LogSoftmax:forward(x)
  if not ember.is_tensor(x) then error("LogSoftmax.forward: expected a tensor, got " .. type(x), 2) end
  return x:log_softmax(self.dim)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LogSoftmax.forward = require("ember._errors").wrap(LogSoftmax.forward)

return LogSoftmax
