--- nn.PixelUnshuffle(downscale_factor): [*, C, H r, W r] -> [*, C r^2, H, W]
-- for r = downscale_factor, as torch.nn.PixelUnshuffle: the inverse of
-- `nn.PixelShuffle(r)`.
-- Errors name nn.PixelUnshuffle: a bad factor, an input of fewer than 3 dims or with H, W not divisible by r.
-- @usage print(nn.PixelUnshuffle(2)(ember.randn(1, 3, 8, 8)).shape)   --> ember.Size{1, 12, 4, 4}
-- @classmod nn.PixelUnshuffle
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local Module = require "ember.nn.Module"
local PixelShuffle = require "ember.nn.PixelShuffle"

local PixelUnshuffle = Module:extend("PixelUnshuffle")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
PixelUnshuffle.SIGNATURE = { sizes = { "downscale_factor" }, options = {} }

function PixelUnshuffle:__init(downscale_factor) PixelShuffle._factor(self, "downscale_factor", downscale_factor) end

--- The rearranged tensor.
-- @tparam Tensor x [*, C, H r, W r]
-- @treturn Tensor [*, C r^2, H, W]
function PixelUnshuffle:forward(x)
  return PixelUnshuffle._unshuffle("PixelUnshuffle.forward", x, self.downscale_factor)
end

-- [*, C, H r, W r] -> [*, C r^2, H, W]: the module's forward and
-- nn.functional.pixel_unshuffle's. who: the caller, for errors.
function PixelUnshuffle._unshuffle(who, x, r)
  local lead, C, H, W = PixelShuffle._split(who, x)
  if H % r ~= 0 or W % r ~= 0 then
    error(("%s: the height and width (%d, %d of shape %s) must be divisible by downscale_factor = %d")
      :format(who, H, W, shape_str(x), r))
  end
  local n, shape = #lead, PixelShuffle._shape
  local perm = {}
  for i = 1, n do perm[i] = i end
  for _, d in ipairs { 1, 3, 5, 2, 4 } do perm[#perm + 1] = n + d end -- C, r, r, H, W
  return x:reshape(shape(lead, C, H // r, r, W // r, r)):permute(perm):reshape(shape(lead, C * r * r, H // r, W // r))
end

--- The factor, for printing.
function PixelUnshuffle:extra_repr() return ("downscale_factor=%d"):format(self.downscale_factor) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
PixelUnshuffle.forward = require("ember._errors").wrap(PixelUnshuffle.forward)

return PixelUnshuffle
