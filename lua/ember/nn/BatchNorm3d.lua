--- nn.BatchNorm3d(num_features [, {eps=1e-5, momentum=0.1, affine=true,
-- track_running_stats=true, dtype=, device=}]): batch normalisation of
-- [N, C, D, H, W] per channel (over N, D, H and W), as torch.nn.BatchNorm3d.
-- The same rules, options and state dict as `nn.BatchNorm2d` (its code).
-- Errors name nn.BatchNorm3d: bad num_features, an input that is not
-- [N, C, D, H, W] with C = num_features.
-- @usage local bn = nn.BatchNorm3d(4)
-- print(bn(ember.randn(2, 4, 3, 5, 5)).shape)   --> ember.Size{2, 4, 3, 5, 5}
-- @classmod nn.BatchNorm3d
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local BatchNorm2d = require "ember.nn.BatchNorm2d"

local BatchNorm3d = Module:extend("BatchNorm3d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
BatchNorm3d.SIGNATURE = { sizes = { "num_features" },
  options = { "eps", "momentum", "affine", "track_running_stats" } }

function BatchNorm3d:__init(num_features, opts)
  BatchNorm2d._init_shared(self, "BatchNorm3d", num_features, opts)
end

--- x normalised per channel (batch statistics in training, running ones in eval), scaled and shifted.
-- @tparam Tensor x [N, C, D, H, W]
-- @treturn Tensor the same shape
function BatchNorm3d:forward(x)
  if not ember.is_tensor(x) or x.ndim ~= 5 or x.shape[2] ~= self.num_features then
    error(("BatchNorm3d.forward: expected a 5-d input [N, C, D, H, W] with C = num_features = %d, got %s"):format(
      self.num_features, ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)), 2)
  end
  return BatchNorm2d._normalize(self, "BatchNorm3d", x)
end

BatchNorm3d.extra_repr = BatchNorm2d.extra_repr
BatchNorm3d.upgrade_state_dict = BatchNorm2d.upgrade_state_dict

--- running_mean 0, running_var 1, num_batches_tracked 0 (PyTorch's reset_running_stats; nothing without them).
function BatchNorm3d:reset_running_stats() require("ember.nn._norm").reset_running_stats(self) end

--- The running statistics reset, the weight 1 and the bias 0 (PyTorch's reset_parameters).
function BatchNorm3d:reset_parameters() require("ember.nn._norm").reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
BatchNorm3d.forward = require("ember._errors").wrap(BatchNorm3d.forward)

return BatchNorm3d
