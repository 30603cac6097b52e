--- nn.SELU(): scale * elu(x, alpha) with PyTorch's constants (alpha = 1.6732632423543772,
-- scale = 1.0507009873554805), as torch.nn.SELU (`nn.functional.selu`).
-- Errors name nn.SELU: an input that is not a tensor.
-- @usage print(nn.SELU()(ember.randn(2, 3)).shape)   --> ember.Size{2, 3}
-- @classmod nn.SELU
local Module = require "ember.nn.Module"

local SELU = Module:extend("SELU")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
SELU.SIGNATURE = { sizes = {}, options = { "inplace" } }

function SELU:__init(...)
  Module.keyword_args("nn.SELU", { "inplace" }, ...) -- torch's inplace: the result is a new tensor either way
end

--- y = scale * (x where x > 0, alpha (e^x - 1) elsewhere).
-- @tparam Tensor x
-- @treturn Tensor the same shape
function SELU:forward(x)
  Module.check_tensor_input("SELU.forward", x)
  return require("ember.nn.functional").selu(x)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
SELU.forward = require("ember._errors").wrap(SELU.forward)

return SELU
