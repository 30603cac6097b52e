--- nn.FractionalMaxPool2d(kernel_size [, {output_size =, output_ratio =, return_indices = false,
-- _random_samples =}]): fractional max pooling of [N, C, H, W] (or [C, H, W]), as
-- torch.nn.FractionalMaxPool2d (`nn.functional.fractional_max_pool2d`): windows of kernel_size at
-- pseudo-random starts, a fresh draw per plane at each call (or the [N, C, 2] _random_samples
-- given, as PyTorch's), so that the output is output_size, or floor(size * output_ratio). With
-- return_indices the forward also returns the 1-based flat indices (for nn.MaxUnpool2d).
-- Errors name nn.FractionalMaxPool2d (its options) and nn.functional.fractional_max_pool2d (sizes, inputs).
-- @usage local pool = nn.FractionalMaxPool2d(3, {output_ratio = 0.5})
-- print(pool(ember.randn(1, 4, 10, 12)).shape)   --> ember.Size{1, 4, 5, 6}
-- @classmod nn.FractionalMaxPool2d
local errors = require "ember._errors"
local Module = require "ember.nn.Module"
local conv = require "ember.nn._conv"

local FractionalMaxPool2d = Module:extend("FractionalMaxPool2d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
FractionalMaxPool2d.SIGNATURE = { sizes = { "kernel_size" },
  options = { "output_size", "output_ratio", "return_indices", "_random_samples" } }
FractionalMaxPool2d._nd = 2 -- nn.FractionalMaxPool3d is this class with 3

function FractionalMaxPool2d:__init(kernel_size, opts)
  local name, nd = self.__name, self._nd
  self.kernel_size = conv.check_size(name, "kernel_size", kernel_size, nd, 1)
  opts = Module.check_options("nn." .. name, opts, { "output_size", "output_ratio", "return_indices",
    "_random_samples" })
  if (opts.output_size == nil) == (opts.output_ratio == nil) then
    errors.raise("%s: give output_size or output_ratio (one of them), as PyTorch", name)
  end
  if opts.output_size ~= nil then conv.check_size(name, "output_size", opts.output_size, nd, 1) end
  self.output_size, self.output_ratio = opts.output_size, opts.output_ratio
  self.return_indices = opts.return_indices == true
  if opts.return_indices ~= nil and type(opts.return_indices) ~= "boolean" then
    errors.raise("%s: return_indices must be true or false, got %s", name, tostring(opts.return_indices))
  end
  if opts._random_samples ~= nil then self:register_buffer("_random_samples", opts._random_samples) end
end

--- The pooled input (and the indices, with return_indices).
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor
-- @treturn[opt] Tensor int64 indices, with return_indices
function FractionalMaxPool2d:forward(x)
  return require("ember.nn.functional")["fractional_max_pool" .. self._nd .. "d"](x, self.kernel_size, {
    output_size = self.output_size, output_ratio = self.output_ratio, return_indices = self.return_indices,
    _random_samples = self._random_samples,
  })
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
FractionalMaxPool2d.forward = errors.wrap(FractionalMaxPool2d.forward)

return FractionalMaxPool2d
