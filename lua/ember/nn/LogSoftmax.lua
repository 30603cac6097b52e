--- nn.LogSoftmax([dim = -1]): log(softmax) along dim, as torch.nn.LogSoftmax.
-- @usage local logp = nn.LogSoftmax(-1)(ember.randn(2, 5))
-- @classmod nn.LogSoftmax
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local LogSoftmax = Module:extend("LogSoftmax")

function LogSoftmax:__init(dim)
  dim = dim or -1
  if math.type(dim) ~= "integer" or dim == 0 then
    error("LogSoftmax: dim must be a non-zero integer (1-based; -1 is the last), got " .. tostring(dim), 3)
  end
  self.dim = dim
end

--- log_softmax along self.dim.
-- @tparam Tensor x
function LogSoftmax:forward(x)
  if not ember.is_tensor(x) then error("LogSoftmax.forward: expected a tensor, got " .. type(x), 2) end
  return x:log_softmax(self.dim)
end

--- Its options, for printing.
function LogSoftmax:extra_repr() return "dim=" .. self.dim end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LogSoftmax.forward = require("ember._errors").wrap(LogSoftmax.forward)

return LogSoftmax
