--- nn.AdaptiveAvgPool1d(output_size): the mean over PyTorch's adaptive bins
-- of the last dim, so the output is [N, C, output_size] whatever L is, as
-- torch.nn.AdaptiveAvgPool1d (the bins of `nn.AdaptiveAvgPool2d`, on one dim).
-- Errors name nn.AdaptiveAvgPool1d: a bad output_size, an input that is not 2-d or 3-d or has an empty
-- dim (but the batch's).
-- @usage print(nn.AdaptiveAvgPool1d(4)(ember.randn(2, 3, 10)).shape)   --> ember.Size{2, 3, 4}
-- @classmod nn.AdaptiveAvgPool1d
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local pool = require "ember.nn._pool"

local AdaptiveAvgPool1d = Module:extend("AdaptiveAvgPool1d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
AdaptiveAvgPool1d.SIGNATURE = { sizes = { "output_size" }, options = {} }

function AdaptiveAvgPool1d:__init(output_size)
  self.output_size = pool.single(output_size)
  if not self.output_size then
    error("AdaptiveAvgPool1d: output_size must be a positive integer, got " .. tostring(output_size), 2)
  end
end

--- The mean of each adaptive bin.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @treturn Tensor [N, C, output_size] (or [C, output_size])
function AdaptiveAvgPool1d:forward(x)
  if not ember.is_tensor(x) or (x.ndim ~= 2 and x.ndim ~= 3) then
    error(("AdaptiveAvgPool1d.forward: expected an input [N, C, L] or [C, L], got %s"):format(
      ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)), 2)
  end
  pool.check_adaptive_input("AdaptiveAvgPool1d.forward", x, 1, self.output_size)
  return pool.adaptive_mean(x, x.ndim, self.output_size)
end

--- The output size, for printing.
function AdaptiveAvgPool1d:extra_repr() return "output_size=" .. self.output_size end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AdaptiveAvgPool1d.forward = require("ember._errors").wrap(AdaptiveAvgPool1d.forward)

return AdaptiveAvgPool1d
