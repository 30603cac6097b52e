--- nn.AdaptiveMaxPool2d(output_size): the largest value of each of PyTorch's
-- adaptive bins, so the output is [N, C, oh, ow] whatever H and W are, as
-- torch.nn.AdaptiveMaxPool2d. output_size is a number or a pair {oh, ow}
-- (an entry false, or a first nil, keeps that dim's size: PyTorch's None);
-- the bins are `nn.AdaptiveAvgPool2d`'s (output row i, 0-based, takes
-- input rows floor(i H / oh) to ceil((i + 1) H / oh) - 1). The gradient
-- goes to the largest value of each bin, the first in the bin's row-major
-- order where several are equal (PyTorch's). With `return_indices` forward
-- also returns where each max is: int64, 1-based flat indices into each
-- input plane of H * W (nn.MaxPool2d's, for nn.MaxUnpool2d).
-- Composed from index_select (each bin's rows, then columns) and one max
-- (nn/_pool.lua's adaptive_max; nn.AdaptiveMaxPool3d's too).
-- Errors name nn.AdaptiveMaxPool2d: a bad output_size, an input that is not 3-d or 4-d or has an empty
-- dim (but the batch's; PyTorch refuses it too).
-- @usage local gmp = nn.AdaptiveMaxPool2d(1)   -- global max pool
-- print(gmp(ember.randn(2, 64, 7, 7)).shape)   --> ember.Size{2, 64, 1, 1}
-- @classmod nn.AdaptiveMaxPool2d
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local pool = require "ember.nn._pool"

local AdaptiveMaxPool2d = Module:extend("AdaptiveMaxPool2d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
AdaptiveMaxPool2d.SIGNATURE = { sizes = { "output_size" },
  options = { "return_indices" } }

function AdaptiveMaxPool2d:__init(output_size, opts)
  opts = Module.check_options("nn.AdaptiveMaxPool2d", opts, { "return_indices" })
  self.return_indices = opts.return_indices or false
  self.output_size = pool.output_pair(output_size)
  if not self.output_size then
    error("AdaptiveMaxPool2d: output_size must be a positive integer or a pair of them (false: that dim's size, PyTorch's None), got " .. tostring(output_size), 2)
  end
end

--- The largest value of each adaptive bin.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor [N, C, oh, ow] (or [C, oh, ow])
function AdaptiveMaxPool2d:forward(x)
  if not ember.is_tensor(x) or (x.ndim ~= 3 and x.ndim ~= 4) then
    error(("AdaptiveMaxPool2d.forward: expected an input [N, C, H, W] or [C, H, W], got %s"):format(
      ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)), 2)
  end
  pool.check_adaptive_input("AdaptiveMaxPool2d.forward", x, 2, self.output_size)
  local xb, unbatch = pool.batch(x)
  if self.return_indices then
    local y, i = pool.adaptive_max(xb, self.output_size, true)
    return unbatch(y), unbatch(i)
  end
  return unbatch(pool.adaptive2d(xb, self.output_size, "max"))
end

--- The output size, for printing.
function AdaptiveMaxPool2d:extra_repr()
  return "output_size=" .. pool.output_repr(self.output_size)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AdaptiveMaxPool2d.forward = require("ember._errors").wrap(AdaptiveMaxPool2d.forward)

return AdaptiveMaxPool2d
