--- nn.AdaptiveAvgPool3d(output_size): adaptive avg pooling of [N, C, D, H, W] (or [C, D, H, W]) to
-- output_size (a number or a triple; false keeps that dim, PyTorch's None), as
-- torch.nn.AdaptiveAvgPool3d (`nn.functional.adaptive_avg_pool3d`).
-- Errors name nn.AdaptiveAvgPool3d: a bad output_size, an input that is not 4-d or 5-d or has an empty dim
-- (but the batch's).
-- @usage print(nn.AdaptiveAvgPool3d({1, 2, 2})(ember.randn(1, 3, 4, 5, 6)).shape)   --> ember.Size{1, 3, 1, 2, 2}
-- @classmod nn.AdaptiveAvgPool3d
local Module = require "ember.nn.Module"

local AdaptiveAvgPool3d = Module:extend("AdaptiveAvgPool3d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
AdaptiveAvgPool3d.SIGNATURE = { sizes = { "output_size" }, options = {} }

-- The output size and its check; nn.AdaptiveMaxPool3d's too (self.__name names the module).
function AdaptiveAvgPool3d:__init(output_size)
  -- a positive integer, or three of them where false keeps that dim's size (PyTorch's None)
  local ok = math.type(output_size) == "integer" and output_size > 0
  if type(output_size) == "table" and output_size[3] ~= nil and #output_size == 3 then
    ok = true
    for i = 1, 3 do
      local e = output_size[i]
      ok = ok and (e == false or (math.type(e) == "integer" and e > 0))
    end
  end
  if not ok then
    require("ember._errors").raise("%s: output_size must be a positive integer or a table of three (false: that dim's "
      .. "size, PyTorch's None), got %s", self.__name, require("ember.nn._conv").fmt(output_size))
  end
  self.output_size = output_size
end

--- The pooled input.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @treturn Tensor
function AdaptiveAvgPool3d:forward(x)
  return require("ember.nn._functional_impl")._adaptive3d("AdaptiveAvgPool3d.forward", "mean", x, self.output_size)
end

--- Its output size, for printing (nn.AdaptiveMaxPool3d's too).
function AdaptiveAvgPool3d:extra_repr() return "output_size=" .. require("ember.nn._conv").fmt(self.output_size) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AdaptiveAvgPool3d.forward = require("ember._errors").wrap(AdaptiveAvgPool3d.forward)

return AdaptiveAvgPool3d
