--- nn.Softmax([dim = -1]) or nn.Softmax{dim =}: softmax along dim (1-based; negative from the end), as
-- torch.nn.Softmax (whose dim ember defaults to the last, as Torch7's nn.SoftMax).
-- @usage local p = nn.Softmax(-1)(ember.randn(2, 5))   -- each row sums to 1
-- @classmod nn.Softmax
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Softmax = Module:extend("Softmax")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Softmax.SIGNATURE = { sizes = {}, options = { "dim" } }

function Softmax:__init(...)
  local dim = Module.keyword_args("nn." .. self.__name, { "dim" }, ...)
  dim = dim or -1
  if math.type(dim) ~= "integer" or dim == 0 then
    error(self.__name .. ": dim must be a non-zero integer (1-based; -1 is the last), got " .. tostring(dim), 3)
  end
  self.dim = dim
end

--- Softmax along self.dim.
-- @tparam Tensor x
function Softmax:forward(x)
  if not ember.is_tensor(x) then error("Softmax.forward: expected a tensor, got " .. type(x), 2) end
  return x:softmax(self.dim)
end

--- Its options, for printing.
function Softmax:extra_repr() return "dim=" .. self.dim end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Softmax.forward = require("ember._errors").wrap(Softmax.forward)

return Softmax
