--- nn.RReLU([lower = 1/8 [, upper = 1/3]]) or nn.RReLU{lower =, upper =}: the randomized
-- leaky ReLU, as torch.nn.RReLU: x where x >= 0, a x elsewhere, with a drawn from
-- U(lower, upper) per element while training and (lower + upper) / 2 in eval mode
-- (`nn.functional.rrelu`).
-- Errors name nn.RReLU: bounds that are not numbers with lower <= upper.
-- @usage local act = nn.RReLU():eval()
-- print(act(ember.tensor({-2, 3})))   --> tensor([-0.4583, 3.0000], shape=[2], dtype=float32, device=cpu)
-- @classmod nn.RReLU
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"

local RReLU = Module:extend("RReLU")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
RReLU.SIGNATURE = { sizes = {}, options = { "lower", "upper", "inplace" } }

function RReLU:__init(...)
  local lower, upper = Module.keyword_args("nn.RReLU", { "lower", "upper", "inplace" }, ...)
  lower, upper = lower or 1 / 8, upper or 1 / 3
  if type(lower) ~= "number" or type(upper) ~= "number" or lower > upper then
    error(("RReLU: lower and upper must be numbers with lower <= upper, got %s and %s"):format(tostring(lower),
      tostring(upper)), 3)
  end
  self.lower, self.upper = lower, upper
end

--- rrelu(x): random slopes in training, their mean in eval mode.
-- @tparam Tensor x
-- @treturn Tensor the same shape
function RReLU:forward(x)
  Module.check_tensor_input("RReLU.forward", x)
  return require("ember.nn.functional").rrelu(x, { lower = self.lower, upper = self.upper, training = self.training })
end

--- Its bounds, for printing.
function RReLU:extra_repr() return ("lower=%g, upper=%g"):format(self.lower, self.upper) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
RReLU.forward = require("ember._errors").wrap(RReLU.forward)

return RReLU
