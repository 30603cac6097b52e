--- nn.InstanceNorm3d(num_features [, {eps=1e-5, momentum=0.1, affine=false,
-- track_running_stats=false, dtype=, device=}]): instance normalisation of
-- [N, C, D, H, W] (or unbatched [C, D, H, W]): each sample's channel
-- normalised over D, H and W, as torch.nn.InstanceNorm3d. The same rules
-- and state dict as `nn.InstanceNorm2d` (its code).
-- @usage local norm = nn.InstanceNorm3d(4, {affine = true})
-- print(norm(ember.randn(2, 4, 3, 5, 5)).shape)   --> ember.Size{2, 4, 3, 5, 5}
-- @classmod nn.InstanceNorm3d
local Module = require "ember.nn.Module"
local InstanceNorm2d = require "ember.nn.InstanceNorm2d"

local InstanceNorm3d = Module:extend("InstanceNorm3d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
InstanceNorm3d.SIGNATURE = { sizes = { "num_features" },
  options = { "eps", "momentum", "affine", "track_running_stats" } }

function InstanceNorm3d:__init(num_features, opts)
  InstanceNorm2d._init_shared(self, "InstanceNorm3d", num_features, opts)
end

--- Each sample's channels normalised over D, H and W, scaled and shifted with affine.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @treturn Tensor the same shape
function InstanceNorm3d:forward(x)
  return InstanceNorm2d._normalize(self, "InstanceNorm3d", 3, x)
end

InstanceNorm3d.extra_repr = InstanceNorm2d.extra_repr
InstanceNorm3d.upgrade_state_dict = InstanceNorm2d.upgrade_state_dict

--- running_mean 0, running_var 1, num_batches_tracked 0 (PyTorch's reset_running_stats; nothing without them).
function InstanceNorm3d:reset_running_stats() require("ember.nn._norm").reset_running_stats(self) end

--- The running statistics reset, the weight 1 and the bias 0 (PyTorch's reset_parameters).
function InstanceNorm3d:reset_parameters() require("ember.nn._norm").reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
InstanceNorm3d.forward = require("ember._errors").wrap(InstanceNorm3d.forward)

return InstanceNorm3d
