--- nn.LazyBatchNorm1d([{eps=1e-5, momentum=0.1, affine=true, track_running_stats=true, ...}]):
-- nn.BatchNorm1d whose num_features is taken from the first input's channel dim, as
-- torch.nn.LazyBatchNorm1d. The first forward (or a load_state_dict holding "running_mean" or
-- "weight") makes nn.BatchNorm1d's parameters and statistics, and the module becomes an
-- nn.BatchNorm1d (nn/_lazy.lua). Errors: bad options name nn.BatchNorm1d (checked when built).
-- @usage local bn = nn.LazyBatchNorm1d()
-- print(bn(ember.randn(8, 4, 10)).shape[2], bn.num_features)   --> 4   4
-- @classmod nn.LazyBatchNorm1d
return require("ember.nn._lazy").batch_norm("LazyBatchNorm1d", require "ember.nn.BatchNorm1d")
