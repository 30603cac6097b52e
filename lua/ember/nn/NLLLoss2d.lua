--- nn.NLLLoss2d([{weight =, ignore_index =, reduction = "mean"}]): nn.NLLLoss under its old name, as
-- torch.nn.NLLLoss2d (deprecated there in favour of NLLLoss, which takes [N, C, H, W] with targets
-- [N, H, W] itself); kept so that older scripts run. The same options, forward and printing.
-- @usage local logp = ember.randn(2, 3, 4, 4):log_softmax(2)
-- local target = ember.randint(1, 4, {2, 4, 4})   -- 1-based class ids
-- print(nn.NLLLoss2d()(logp, target).shape)   --> ember.Size{}
-- @classmod nn.NLLLoss2d
local NLLLoss = require "ember.nn.NLLLoss"

local NLLLoss2d = NLLLoss:extend("NLLLoss2d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
NLLLoss2d.SIGNATURE = NLLLoss.SIGNATURE

return NLLLoss2d
