--- nn.UpsamplingBilinear2d([size [, scale_factor]]) or nn.UpsamplingBilinear2d{size =, scale_factor =}: bilinear (align_corners = true, as torch's)
-- upsampling of [N, C, H, W], as torch.nn.UpsamplingBilinear2d: `nn.Upsample` with mode "bilinear", align_corners = true.
-- Errors name nn.Upsample's checks: neither or both of size and scale_factor, bad sizes.
-- @usage print(nn.UpsamplingBilinear2d{scale_factor = 2}(ember.randn(1, 3, 4, 4)).shape)   --> ember.Size{1, 3, 8, 8}
-- @classmod nn.UpsamplingBilinear2d
local Module = require "ember.nn.Module"
local Upsample = require "ember.nn.Upsample"

local UpsamplingBilinear2d = Upsample:extend("UpsamplingBilinear2d")

function UpsamplingBilinear2d:__init(...)
  require("ember._errors").no_extra("nn.UpsamplingBilinear2d", { "size", "scale_factor" }, 1, ...)
  local size, scale_factor = ...
  if select("#", ...) == 1 and type(size) == "table" and size[1] == nil then -- {size =, scale_factor =}
    size, scale_factor = Module.keyword_args("nn.UpsamplingBilinear2d", { "size", "scale_factor" }, ...)
  elseif type(scale_factor) == "table" and getmetatable(scale_factor) == nil and scale_factor[1] == nil then
    scale_factor = Module.check_options("nn.UpsamplingBilinear2d", scale_factor, { "scale_factor" }).scale_factor -- (size, {scale_factor =})
  end
  Upsample.__init(self, { size = size, scale_factor = scale_factor, mode = "bilinear", align_corners = true })
end

return UpsamplingBilinear2d
