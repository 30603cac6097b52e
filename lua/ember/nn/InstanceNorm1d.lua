--- nn.InstanceNorm1d(num_features [, {eps=1e-5, momentum=0.1, affine=false,
-- track_running_stats=false, dtype=, device=}]): instance normalisation of
-- [N, C, L] (or unbatched [C, L]): each sample's channel normalised over L,
-- as torch.nn.InstanceNorm1d. The same rules and state dict as
-- `nn.InstanceNorm2d` (its code).
-- Errors name nn.InstanceNorm1d at the caller's line.
-- @usage local norm = nn.InstanceNorm1d(16, {affine = true, track_running_stats = true})
-- print(norm(ember.randn(8, 16, 100)).shape)   --> ember.Size{8, 16, 100}
-- norm:eval()                                   -- the running statistics from now on
-- @classmod nn.InstanceNorm1d
local Module = require "ember.nn.Module"
local InstanceNorm2d = require "ember.nn.InstanceNorm2d"

local InstanceNorm1d = Module:extend("InstanceNorm1d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
InstanceNorm1d.SIGNATURE = { sizes = { "num_features" },
  options = { "eps", "momentum", "affine", "track_running_stats" } }

function InstanceNorm1d:__init(num_features, opts)
  InstanceNorm2d._init_shared(self, "InstanceNorm1d", num_features, opts)
end

--- Each sample's channels normalised over L (running statistics in eval with track_running_stats), scaled and shifted with affine.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @treturn Tensor the same shape
function InstanceNorm1d:forward(x)
  return InstanceNorm2d._normalize(self, "InstanceNorm1d", 1, x)
end

--- The settings, for printing (PyTorch's text).
InstanceNorm1d.extra_repr = InstanceNorm2d.extra_repr
--- A state without num_batches_tracked loads with it 0 (BatchNorm2d.upgrade_state_dict).
InstanceNorm1d.upgrade_state_dict = InstanceNorm2d.upgrade_state_dict

--- running_mean 0, running_var 1, num_batches_tracked 0 (PyTorch's reset_running_stats; nothing without them).
function InstanceNorm1d:reset_running_stats() require("ember.nn._norm").reset_running_stats(self) end

--- The running statistics reset, the weight 1 and the bias 0 (PyTorch's reset_parameters).
function InstanceNorm1d:reset_parameters() require("ember.nn._norm").reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
InstanceNorm1d.forward = require("ember._errors").wrap(InstanceNorm1d.forward)

return InstanceNorm1d
