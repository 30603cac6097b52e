--- nn.Conv3d(in_channels, out_channels, kernel_size [, {stride=1, padding=0, dilation=1, groups=1, bias=true, padding_mode="zeros", dtype=, device=}]):
-- 3-d convolution (cross-correlation) of [N, C, D, H, W] (or unbatched
-- [C, D, H, W]), as torch.nn.Conv3d. Sizes are a number or a triple
-- {d, h, w}; padding is also "same" (stride 1) or "valid"; padding_mode
-- "reflect", "replicate" or "circular" pads the input so (`ember.pad`)
-- and convolves it without padding, as PyTorch. Parameters as PyTorch's:
-- `weight` [out, in/groups, kd, kh, kw] and `bias` [out], both
-- U(+-1/sqrt(fan_in)) (kaiming_uniform_ with a = sqrt(5)), fan_in =
-- in/groups * kd * kh * kw. The convolution is `nn.functional.conv3d`'s.
-- Errors name nn.Conv3d at the caller's line: bad sizes or options, groups not dividing the
-- channels, a wrong input (rank, dtype, channels), a kernel larger than the padded input,
-- padding_mode padding more than the input allows.
-- @usage local conv = nn.Conv3d(2, 4, 3, {padding = 1})
-- print(conv(ember.randn(1, 2, 4, 5, 6)).shape)   --> ember.Size{1, 4, 4, 5, 6}
-- @classmod nn.Conv3d
local ember = require "ember.nn._ember"
local conv = require "ember.nn._conv"

local Conv3d = require("ember.nn.Module"):extend("Conv3d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
Conv3d.SIGNATURE = { sizes = { "in_channels", "out_channels", "kernel_size" },
  options = { "stride", "padding", "dilation", "groups", "bias", "padding_mode" } }

function Conv3d:__init(in_channels, out_channels, kernel_size, opts)
  conv.setup(self, "Conv3d", 3, in_channels, out_channels, kernel_size, opts)
end

local MODES = { reflect = "reflect", replicate = "replicate", circular = "circular" }

--- The convolution.
-- @tparam Tensor x [N, in_channels, D, H, W] or [in_channels, D, H, W]
-- @treturn Tensor [N, out_channels, Do, Ho, Wo] (or unbatched)
function Conv3d:forward(x)
  conv.check_input(self, "Conv3d.forward", 3, x)
  local o = { stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups }
  if self.padding_mode ~= "zeros" and require("ember.nn.Module").is_tensor(x) then
    local p = self._pads -- {front, back, top, bottom, left, right}; ember.pad takes the last dim first
    conv.check_mode_pads("Conv3d.forward", self.padding_mode, x, { { p[1], p[2] }, { p[3], p[4] }, { p[5], p[6] } })
    x = ember.pad(x, { p[5], p[6], p[3], p[4], p[1], p[2] }, MODES[self.padding_mode])
    o.padding = 0
  end
  return require("ember.nn._functional_impl")._conv3d("Conv3d.forward", x, self.weight, self.bias, o)
end

--- The sizes, for printing (PyTorch's text).
function Conv3d:extra_repr()
  local function t(v) return ("(%d, %d, %d)"):format(v[1], v[2], v[3]) end
  local s = ("%d, %d, kernel_size=%s, stride=%s"):format(self.in_channels, self.out_channels, t(self.kernel_size),
    t(self.stride))
  if self.padding == "same" then
    s = s .. ", padding=same"
  elseif self.padding[1] + self.padding[2] + self.padding[3] ~= 0 then
    s = s .. ", padding=" .. t(self.padding)
  end
  if self.dilation[1] * self.dilation[2] * self.dilation[3] ~= 1 then s = s .. ", dilation=" .. t(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if not self.bias then s = s .. ", bias=false" end
  if self.padding_mode ~= "zeros" then s = s .. ", padding_mode=" .. self.padding_mode end
  return s
end

--- Draws the weight and bias again as the constructor does (PyTorch's reset_parameters).
function Conv3d:reset_parameters() conv.reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Conv3d.forward = require("ember._errors").wrap(Conv3d.forward)

return Conv3d
