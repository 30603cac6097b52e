--- nn.LazyBatchNorm3d([{eps=1e-5, momentum=0.1, affine=true, track_running_stats=true, ...}]):
-- nn.BatchNorm3d whose num_features is taken from the first input's channel dim, as
-- torch.nn.LazyBatchNorm3d. The first forward (or a load_state_dict holding "running_mean" or
-- "weight") makes nn.BatchNorm3d's parameters and statistics, and the module becomes an
-- nn.BatchNorm3d (nn/_lazy.lua). Errors: bad options name nn.BatchNorm3d (checked when built).
-- @usage local bn = nn.LazyBatchNorm3d()
-- print(bn(ember.randn(8, 4, 3, 3, 3)).shape[2], bn.num_features)   --> 4   4
-- @classmod nn.LazyBatchNorm3d
return require("ember.nn._lazy").batch_norm("LazyBatchNorm3d", require "ember.nn.BatchNorm3d")
