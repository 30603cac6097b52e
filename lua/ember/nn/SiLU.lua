--- nn.SiLU(): x * sigmoid(x) (also called swish), as torch.nn.SiLU.
-- The activation of Llama's gated feed-forward (`nn.FeedForward` with
-- `activation = "swiglu"`).
-- @usage local act = nn.SiLU()
-- local y = act(ember.randn(2, 8))   -- same shape as the input
-- @classmod nn.SiLU
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local SiLU = Module:extend("SiLU")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
SiLU.SIGNATURE = { sizes = {}, options = { "inplace" }, closed = true }

--- x * sigmoid(x).
-- @tparam Tensor x a floating tensor of any shape
-- @treturn Tensor the same shape
function SiLU:forward(x)
  if not ember.is_tensor(x) then
    error("SiLU.forward: expected a tensor, got " .. type(x), 2)
  end
  return x:silu()
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
SiLU.forward = require("ember._errors").wrap(SiLU.forward)

return SiLU
