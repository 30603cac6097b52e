--- nn.LazyBatchNorm2d([{eps=1e-5, momentum=0.1, affine=true, track_running_stats=true, ...}]):
-- nn.BatchNorm2d whose num_features is taken from the first input's channel dim, as
-- torch.nn.LazyBatchNorm2d. The first forward (or a load_state_dict holding "running_mean" or
-- "weight") makes nn.BatchNorm2d's parameters and statistics, and the module becomes an
-- nn.BatchNorm2d (nn/_lazy.lua). Errors: bad options name nn.BatchNorm2d (checked when built).
-- @usage local bn = nn.LazyBatchNorm2d()
-- print(bn(ember.randn(8, 4, 5, 5)).shape[2], bn.num_features)   --> 4   4
-- @classmod nn.LazyBatchNorm2d
return require("ember.nn._lazy").batch_norm("LazyBatchNorm2d", require "ember.nn.BatchNorm2d")
