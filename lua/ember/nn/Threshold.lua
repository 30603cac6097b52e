--- nn.Threshold(threshold, value) or nn.Threshold{threshold =, value =}: x where x > threshold,
-- value elsewhere, as torch.nn.Threshold (`nn.functional.threshold`).
-- Errors name nn.Threshold: a threshold or value that is not a number, an input that is not a tensor.
-- @usage print(nn.Threshold(0.1, 20)(ember.tensor({-1, 0.5})))   --> tensor([20.0000, 0.5000], shape=[2], dtype=float32, device=cpu)
-- @classmod nn.Threshold
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"

local Threshold = Module:extend("Threshold")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Threshold.SIGNATURE = { sizes = { "threshold", "value" }, options = { "inplace" }, closed = true }

function Threshold:__init(...)
  local threshold, value = Module.keyword_args("nn.Threshold", { "threshold", "value", "inplace" }, ...)
  for _, a in ipairs { { "threshold", threshold }, { "value", value } } do
    if type(a[2]) ~= "number" then error(("Threshold: %s must be a number, got %s"):format(a[1], type(a[2])), 3) end
  end
  self.threshold, self.value = threshold, value
end

--- threshold(x, threshold, value).
-- @tparam Tensor x
-- @treturn Tensor the same shape
function Threshold:forward(x)
  Module.check_tensor_input("Threshold.forward", x)
  return require("ember.nn.functional").threshold(x, self.threshold, self.value)
end

--- Its options, for printing.
function Threshold:extra_repr() return ("threshold=%g, value=%g"):format(self.threshold, self.value) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Threshold.forward = require("ember._errors").wrap(Threshold.forward)

return Threshold
