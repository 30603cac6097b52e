--- nn.AdaptiveMaxPool3d(output_size): adaptive max pooling of [N, C, D, H, W] (or [C, D, H, W]) to
-- output_size (a number or a triple; false keeps that dim, PyTorch's None), as
-- torch.nn.AdaptiveMaxPool3d (`nn.functional.adaptive_max_pool3d`). With `return_indices` forward
-- also returns where each max is: int64, 1-based flat indices into each input volume of D * H * W.
-- Errors name nn.AdaptiveMaxPool3d: a bad output_size, an input that is not 4-d or 5-d or has an empty dim
-- (but the batch's).
-- @usage print(nn.AdaptiveMaxPool3d({1, 2, 2})(ember.randn(1, 3, 4, 5, 6)).shape)   --> ember.Size{1, 3, 1, 2, 2}
-- @classmod nn.AdaptiveMaxPool3d
local Module = require "ember.nn.Module"

local AdaptiveMaxPool3d = Module:extend("AdaptiveMaxPool3d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
AdaptiveMaxPool3d.SIGNATURE = { sizes = { "output_size" }, options = { "return_indices" } }

-- nn.AdaptiveAvgPool3d's output size, check and printing, in this module's name
local AdaptiveAvgPool3d = require "ember.nn.AdaptiveAvgPool3d"
function AdaptiveMaxPool3d:__init(output_size, opts)
  opts = Module.check_options("nn.AdaptiveMaxPool3d", opts, { "return_indices" })
  AdaptiveAvgPool3d.__init(self, output_size)
  self.return_indices = opts.return_indices or false
end
AdaptiveMaxPool3d.extra_repr = AdaptiveAvgPool3d.extra_repr

--- The pooled input.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @treturn Tensor
function AdaptiveMaxPool3d:forward(x)
  return require("ember.nn._functional_impl")._adaptive3d("AdaptiveMaxPool3d.forward", "max", x, self.output_size,
    self.return_indices)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AdaptiveMaxPool3d.forward = require("ember._errors").wrap(AdaptiveMaxPool3d.forward)

return AdaptiveMaxPool3d
