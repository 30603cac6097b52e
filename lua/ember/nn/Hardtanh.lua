--- nn.Hardtanh([min_val = -1 [, max_val = 1]]): x clipped to [min_val, max_val],
-- as torch.nn.Hardtanh. The gradient is 1 strictly inside the interval and
-- 0 elsewhere, the clip values included (PyTorch's hardtanh_backward).
-- Errors name nn.Hardtanh: bounds that are not numbers with min_val < max_val.
-- @usage local y = nn.Hardtanh(-2, 2)(ember.randn(2, 3) * 3)
-- print(nn.Hardtanh()(ember.tensor({-3, 0.5, 3})))   --> tensor([-1.0000, 0.5000, 1.0000], shape=[3], dtype=float32, device=cpu)
-- @classmod nn.Hardtanh
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Hardtanh = Module:extend("Hardtanh")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Hardtanh.SIGNATURE = { sizes = {}, options = { "min_val", "max_val", "inplace" } }

-- x clipped to [lo, hi], the gradient passing strictly inside only (shared
-- by nn.ReLU6 and nn.Hardsigmoid).

function Hardtanh:__init(...)
  local min_val, max_val = Module.keyword_args("nn." .. self.__name, { "min_val", "max_val", "inplace" }, ...)
  min_val, max_val = min_val or -1, max_val or 1
  if type(min_val) ~= "number" or type(max_val) ~= "number" or not (min_val < max_val) then
    error(("%s: min_val and max_val must be numbers with min_val < max_val, got %s and %s"):format(self.__name,
      tostring(min_val), tostring(max_val)), 2)
  end
  self.min_val, self.max_val = min_val, max_val
end

--- x clipped to [min_val, max_val].
-- @tparam Tensor x
-- @treturn Tensor the same shape
function Hardtanh:forward(x)
  if not ember.is_tensor(x) then error(self.__name .. ".forward: expected a tensor, got " .. type(x), 2) end
  return ember.hardtanh(x, self.min_val, self.max_val)
end

--- The bounds, for printing.
function Hardtanh:extra_repr() return ("min_val=%g, max_val=%g"):format(self.min_val, self.max_val) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Hardtanh.forward = require("ember._errors").wrap(Hardtanh.forward)

return Hardtanh
