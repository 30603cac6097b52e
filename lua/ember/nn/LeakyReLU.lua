--- nn.LeakyReLU([negative_slope = 0.01]) or nn.LeakyReLU{negative_slope =}: x where x > 0, negative_slope * x
-- elsewhere, as torch.nn.LeakyReLU (`ember.leaky_relu`).
-- @usage local y = nn.LeakyReLU(0.2)(ember.randn(2, 3))
-- @classmod nn.LeakyReLU
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local LeakyReLU = Module:extend("LeakyReLU")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
LeakyReLU.SIGNATURE = { sizes = {}, options = { "negative_slope", "inplace" } }

function LeakyReLU:__init(...)
  local negative_slope = Module.keyword_args("nn.LeakyReLU", { "negative_slope", "inplace" }, ...)
  negative_slope = negative_slope or 0.01
  if type(negative_slope) ~= "number" then
    error("LeakyReLU: negative_slope must be a number, got " .. type(negative_slope), 3)
  end
  self.negative_slope = negative_slope
end

--- leaky_relu(x, negative_slope).
-- @tparam Tensor x
function LeakyReLU:forward(x)
  if not ember.is_tensor(x) then error("LeakyReLU.forward: expected a tensor, got " .. type(x), 2) end
  return ember.leaky_relu(x, self.negative_slope)
end

--- Its options, for printing.
function LeakyReLU:extra_repr() return ("negative_slope=%g"):format(self.negative_slope) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LeakyReLU.forward = require("ember._errors").wrap(LeakyReLU.forward)

return LeakyReLU
