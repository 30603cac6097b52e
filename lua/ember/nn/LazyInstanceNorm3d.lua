--- nn.LazyInstanceNorm3d([{eps=1e-5, momentum=0.1, affine=true, track_running_stats=true, ...}]):
-- nn.InstanceNorm3d whose num_features is taken from the first input's channel dim, as
-- torch.nn.LazyInstanceNorm3d (batched or unbatched inputs). The first forward (or a
-- load_state_dict holding "weight" or "running_mean") sizes it and the module becomes an
-- nn.InstanceNorm3d (nn/_lazy.lua). As PyTorch 1.13's, affine and track_running_stats default to
-- true here (nn.InstanceNorm3d's are false). Errors: bad options name nn.InstanceNorm3d (checked when built).
-- @usage local norm = nn.LazyInstanceNorm3d{affine = true}
-- print(norm(ember.randn(2, 4, 3, 3, 3)).shape[2], norm.num_features)   --> 4   4
-- @classmod nn.LazyInstanceNorm3d
return require("ember.nn._lazy").instance_norm("LazyInstanceNorm3d", require "ember.nn.InstanceNorm3d", 3)
