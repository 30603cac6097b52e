--- nn.AdaptiveAvgPool2d(output_size): the mean over PyTorch's adaptive bins,
-- so the output is [N, C, oh, ow] whatever H and W are, as
-- torch.nn.AdaptiveAvgPool2d. output_size is a number or a pair {oh, ow}
-- (an entry false, or a first nil, keeps that dim's size: PyTorch's None).
-- Output row i (0-based) averages input rows floor(i H / oh) to
-- ceil((i + 1) H / oh) - 1, and likewise for columns: the bins may overlap
-- by one when H is not a multiple of oh. `nn.AdaptiveAvgPool2d(1)` is the
-- global average pool of a CNN head.
-- Composed from narrow and mean, one per output row and column.
-- Errors name nn.AdaptiveAvgPool2d: a bad output_size, an input that is not 3-d or 4-d or has an empty
-- dim (but the batch's; PyTorch refuses it too).
-- @usage local gap = nn.AdaptiveAvgPool2d(1)
-- print(gap(ember.randn(2, 64, 7, 7)).shape)   --> ember.Size{2, 64, 1, 1}
-- @classmod nn.AdaptiveAvgPool2d
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local pool = require "ember.nn._pool"

local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
AdaptiveAvgPool2d.SIGNATURE = { sizes = { "output_size" }, options = {} }

function AdaptiveAvgPool2d:__init(output_size)
  self.output_size = pool.output_pair(output_size)
  if not self.output_size then
    error("AdaptiveAvgPool2d: output_size must be a positive integer or a pair of them (false: that dim's size, PyTorch's None), got " .. tostring(output_size), 2)
  end
end

--- The mean of each adaptive bin.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor [N, C, oh, ow] (or [C, oh, ow])
function AdaptiveAvgPool2d:forward(x)
  if not ember.is_tensor(x) or (x.ndim ~= 3 and x.ndim ~= 4) then
    error(("AdaptiveAvgPool2d.forward: expected an input [N, C, H, W] or [C, H, W], got %s"):format(
      ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)), 2)
  end
  Module.check_float_input("AdaptiveAvgPool2d.forward", x)
  pool.check_adaptive_input("AdaptiveAvgPool2d.forward", x, 2, self.output_size)
  local xb, unbatch = pool.batch(x)
  return unbatch(pool.adaptive2d(xb, self.output_size))
end

--- The output size, for printing.
function AdaptiveAvgPool2d:extra_repr()
  return "output_size=" .. pool.output_repr(self.output_size)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AdaptiveAvgPool2d.forward = require("ember._errors").wrap(AdaptiveAvgPool2d.forward)

return AdaptiveAvgPool2d
