--- nn.GroupNorm(num_groups, num_channels [, {eps=1e-5, affine=true, dtype=, device=}]):
-- group normalisation, as torch.nn.GroupNorm: the channels of [N, C, *]
-- are split into num_groups groups of C / num_groups, and each sample's
-- group is normalised with its own mean and (biased) variance, then each
-- channel is scaled by weight (ones) and shifted by bias (zeros). The same
-- in training and evaluation (no running statistics). num_groups = 1 is a
-- LayerNorm over (C, *) with per-channel affine; num_groups = C is
-- instance normalisation.
-- Composed from core ops (a reshape, mean, rsqrt): gradients through autograd;
-- the computation is `nn.functional.group_norm`'s (nn/_norm.lua).
-- Errors name nn.GroupNorm: num_channels not divisible by num_groups, input channels that differ.
-- @usage local gn = nn.GroupNorm(4, 32)
-- local y = gn(ember.randn(2, 32, 8, 8))
-- @classmod nn.GroupNorm
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local norm = require "ember.nn._norm"

local GroupNorm = Module:extend("GroupNorm")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
GroupNorm.SIGNATURE = { sizes = { "num_groups", "num_channels" },
  options = { "eps", "affine" } }

function GroupNorm:__init(num_groups, num_channels, opts)
  for _, v in ipairs { { "num_groups", num_groups }, { "num_channels", num_channels } } do
    if math.type(v[2]) ~= "integer" or v[2] < 1 then
      error(("GroupNorm: %s must be a positive integer, got %s"):format(v[1], tostring(v[2])), 2)
    end
  end
  if num_channels % num_groups ~= 0 then
    error(("GroupNorm: num_channels=%d must be divisible by num_groups=%d"):format(num_channels, num_groups), 2)
  end
  opts = Module.check_options("nn.GroupNorm", opts, { "eps", "affine", "dtype", "device" })
  self.num_groups, self.num_channels = num_groups, num_channels
  self.eps = opts.eps or 1e-5
  self.affine = opts.affine ~= false
  local topts = { dtype = opts.dtype, device = opts.device }
  if self.affine then
    self:register_parameter("weight", ember.ones({ num_channels }, topts))
    self:register_parameter("bias", ember.zeros({ num_channels }, topts))
  end
end

--- x normalised per sample and group, then scaled and shifted per channel.
-- @tparam Tensor x [N, C, *]
-- @treturn Tensor the same shape
function GroupNorm:forward(x)
  if not ember.is_tensor(x) or x.ndim < 2 or x.shape[2] ~= self.num_channels then
    error(("GroupNorm.forward: expected an input [N, C, *] with C = num_channels = %d, got %s"):format(
      self.num_channels, ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)), 2)
  end
  Module.check_float_input("GroupNorm.forward", x)
  return norm.group_norm("GroupNorm.forward", x, self.num_groups, self.weight, self.bias, self.eps)
end

--- The settings, for printing.
function GroupNorm:extra_repr()
  return ("%d, %d, eps=%g, affine=%s"):format(self.num_groups, self.num_channels, self.eps, tostring(self.affine))
end

--- The weight 1 and the bias 0, as the constructor makes them (PyTorch's reset_parameters).
function GroupNorm:reset_parameters() norm.reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
GroupNorm.forward = require("ember._errors").wrap(GroupNorm.forward)

return GroupNorm
