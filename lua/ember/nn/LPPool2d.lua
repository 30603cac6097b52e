--- nn.LPPool2d(norm_type, kernel_size [, {stride = kernel_size, ceil_mode = false}]): the p-norm
-- (p = norm_type) of each window, (sum x^p)^(1/p), as torch.nn.LPPool2d (`nn.functional.lp_pool2d`).
-- Errors name nn.LPPool2d at the caller's line: its options, and its input (checked as nn.functional's, named LPPool2d.forward).
-- @usage print(nn.LPPool2d(2, 2)(ember.randn(1, 3, 8, 8)).shape)   --> ember.Size{1, 3, 4, 4}
-- @classmod nn.LPPool2d
local Module = require "ember.nn.Module"
local LPPool1d = require "ember.nn.LPPool1d"

local LPPool2d = Module:extend("LPPool2d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
LPPool2d.SIGNATURE = { sizes = { "norm_type", "kernel_size" },
  options = { "stride", "ceil_mode" } }

-- nn.LPPool1d's options, checks and printing, in this module's name
LPPool2d.__init = LPPool1d.__init
LPPool2d.extra_repr = LPPool1d.extra_repr

--- The pooled input.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor
function LPPool2d:forward(x)
  Module.check_tensor_input("LPPool2d.forward", x)
  return require("ember.nn.functional").lp_pool2d(x, self.norm_type, self.kernel_size, {
    stride = self.stride, ceil_mode = self.ceil_mode,
  })
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LPPool2d.forward = require("ember._errors").wrap(LPPool2d.forward, true)

return LPPool2d
