--- nn.LazyInstanceNorm1d([{eps=1e-5, momentum=0.1, affine=true, track_running_stats=true, ...}]):
-- nn.InstanceNorm1d whose num_features is taken from the first input's channel dim, as
-- torch.nn.LazyInstanceNorm1d (batched or unbatched inputs). The first forward (or a
-- load_state_dict holding "weight" or "running_mean") sizes it and the module becomes an
-- nn.InstanceNorm1d (nn/_lazy.lua). As PyTorch 1.13's, affine and track_running_stats default to
-- true here (nn.InstanceNorm1d's are false). Errors: bad options name nn.InstanceNorm1d (checked when built).
-- @usage local norm = nn.LazyInstanceNorm1d{affine = true}
-- print(norm(ember.randn(2, 4, 6)).shape[2], norm.num_features)   --> 4   4
-- @classmod nn.LazyInstanceNorm1d
return require("ember.nn._lazy").instance_norm("LazyInstanceNorm1d", require "ember.nn.InstanceNorm1d", 1)
