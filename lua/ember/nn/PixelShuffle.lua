--- nn.PixelShuffle(upscale_factor): [*, C r^2, H, W] -> [*, C, H r, W r]
-- for r = upscale_factor, as torch.nn.PixelShuffle (sub-pixel convolution's
-- rearrangement: output[c, h r + i, w r + j] = input[c r^2 + i r + j, h, w]).
-- `nn.PixelUnshuffle(r)` undoes it. A reshape, a permute and a reshape.
-- Errors name nn.PixelShuffle: a bad factor, an input of fewer than 3 dims or with channels not divisible by r^2.
-- @usage print(nn.PixelShuffle(2)(ember.randn(1, 12, 4, 4)).shape)   --> ember.Size{1, 3, 8, 8}
-- @classmod nn.PixelShuffle
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local PixelShuffle = Module:extend("PixelShuffle")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
PixelShuffle.SIGNATURE = { sizes = { "upscale_factor" }, options = {} }

-- r as a positive integer (the module's `field` names it in errors).
function PixelShuffle._factor(self, field, r)
  if math.type(r) ~= "integer" or r < 1 then
    error(("%s: %s must be a positive integer, got %s"):format(self.__name, field, tostring(r)), 3)
  end
  self[field] = r
end

function PixelShuffle:__init(upscale_factor) PixelShuffle._factor(self, "upscale_factor", upscale_factor) end

-- x's leading (batch) dims, and C, H, W, after checking x has at least 3
-- dims; who: the caller ("PixelShuffle.forward"), for errors.
function PixelShuffle._split(who, x)
  if not ember.is_tensor(x) or x.ndim < 3 then
    error(("%s: expected an input [*, C, H, W], got %s"):format(who,
      ember.is_tensor(x) and ("shape " .. shape_str(x)) or type(x)))
  end
  local lead = {}
  for i = 1, x.ndim - 3 do lead[i] = x.shape[i] end
  return lead, x.shape[x.ndim - 2], x.shape[x.ndim - 1], x.shape[x.ndim]
end

-- {table.unpack(a), ...} for a list a followed by more sizes.
local function shape(a, ...)
  local s = { table.unpack(a) }
  for _, v in ipairs { ... } do s[#s + 1] = v end
  return s
end
PixelShuffle._shape = shape

--- The rearranged tensor.
-- @tparam Tensor x [*, C r^2, H, W]
-- @treturn Tensor [*, C, H r, W r]
function PixelShuffle:forward(x)
  return PixelShuffle._shuffle(self.__name .. ".forward", x, self.upscale_factor)
end

-- [*, C r^2, H, W] -> [*, C, H r, W r]: the module's forward and
-- nn.functional.pixel_shuffle's. who: the caller, for errors.
function PixelShuffle._shuffle(who, x, r)
  local lead, C, H, W = PixelShuffle._split(who, x)
  if C % (r * r) ~= 0 then
    error(("%s: the channels (%d, dim %d of shape %s) must be divisible by upscale_factor^2 = %d")
      :format(who, C, x.ndim - 2, shape_str(x), r * r))
  end
  local n, c = #lead, C // (r * r)
  local perm = {}
  for i = 1, n do perm[i] = i end
  for _, d in ipairs { 1, 4, 2, 5, 3 } do perm[#perm + 1] = n + d end -- c, H, r, W, r
  return x:reshape(shape(lead, c, r, r, H, W)):permute(perm):reshape(shape(lead, c, H * r, W * r))
end

--- The factor, for printing.
function PixelShuffle:extra_repr() return ("upscale_factor=%d"):format(self.upscale_factor) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
PixelShuffle.forward = require("ember._errors").wrap(PixelShuffle.forward)

return PixelShuffle
