--- nn.AdaptiveMaxPool1d(output_size): the largest value of each of PyTorch's
-- adaptive bins of the last dim, so the output is [N, C, output_size]
-- whatever L is, as torch.nn.AdaptiveMaxPool1d (the bins of
-- `nn.AdaptiveMaxPool2d`, on one dim). With `return_indices` forward also
-- returns the 1-based positions of the maxima (int64).
-- Errors name nn.AdaptiveMaxPool1d: a bad output_size, an input that is not 2-d or 3-d or has an empty
-- dim (but the batch's).
-- @usage print(nn.AdaptiveMaxPool1d(4)(ember.randn(2, 3, 10)).shape)   --> ember.Size{2, 3, 4}
-- @classmod nn.AdaptiveMaxPool1d
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local pool = require "ember.nn._pool"

local AdaptiveMaxPool1d = Module:extend("AdaptiveMaxPool1d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
AdaptiveMaxPool1d.SIGNATURE = { sizes = { "output_size" },
  options = { "return_indices" } }

function AdaptiveMaxPool1d:__init(output_size, opts)
  opts = Module.check_options("nn.AdaptiveMaxPool1d", opts, { "return_indices" })
  self.return_indices = opts.return_indices or false
  self.output_size = pool.single(output_size)
  if not self.output_size then
    error("AdaptiveMaxPool1d: output_size must be a positive integer, got " .. tostring(output_size), 2)
  end
end

--- The largest value of each adaptive bin of the last dim.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @treturn Tensor [N, C, output_size] (or [C, output_size])
function AdaptiveMaxPool1d:forward(x)
  if not ember.is_tensor(x) or (x.ndim ~= 2 and x.ndim ~= 3) then
    error(("AdaptiveMaxPool1d.forward: expected an input [N, C, L] or [C, L], got %s"):format(
      ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)), 2)
  end
  pool.check_adaptive_input("AdaptiveMaxPool1d.forward", x, 1, self.output_size)
  if self.return_indices then
    return require("ember.nn._functional_impl").adaptive_max_pool1d(x, self.output_size, true)
  end
  return pool.adaptive_mean(x, x.ndim, self.output_size, "max")
end

--- The output size, for printing.
function AdaptiveMaxPool1d:extra_repr() return "output_size=" .. self.output_size end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AdaptiveMaxPool1d.forward = require("ember._errors").wrap(AdaptiveMaxPool1d.forward)

return AdaptiveMaxPool1d
