--- nn.MaxPool2d(kernel_size [, {stride=kernel_size, padding=0, dilation=1, ceil_mode=false}]):
-- the largest value of each window of [N, C, H, W] (or [C, H, W]), as
-- torch.nn.MaxPool2d. Sizes are a number or a pair {h, w}. Padding is
-- -inf (it is never the max); PyTorch's limit applies: padding at most
-- half the kernel. The output is [N, C, Ho, Wo] with
-- Ho = floor((H + 2 padding - dilation (kernel - 1) - 1) / stride) + 1;
-- with ceil_mode, ceil instead of floor (as PyTorch: the last window may
-- run past the padded input, and is dropped if it would start past the
-- input and the left padding).
-- The gradient goes to the first largest value of each window, as PyTorch.
-- Composed from strided views (one per kernel offset) and a max
-- (nn/_pool.lua's max2d, `nn.functional.max_pool2d`'s too).
-- Errors name nn.MaxPool2d: bad sizes, an input that is not 3-d or 4-d, a window larger than the padded input.
-- @usage local pool = nn.MaxPool2d(2)                        -- halves H and W
-- local y = nn.MaxPool2d(3, {stride = 2, padding = 1})(ember.randn(1, 8, 32, 32))   -- [1, 8, 16, 16]
-- print(nn.MaxPool2d(3, {stride = 2, ceil_mode = true})(ember.randn(1, 8, 8, 8)).shape)   --> ember.Size{1, 8, 4, 4}
-- @classmod nn.MaxPool2d
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local pool = require "ember.nn._pool"

local MaxPool2d = Module:extend("MaxPool2d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
MaxPool2d.SIGNATURE = { sizes = { "kernel_size" },
  options = { "stride", "padding", "dilation", "return_indices", "ceil_mode" } }

-- The options each pool takes (MaxPool1d's and AvgPool1d's as their 2-d twins').
local OPTIONS = {
  MaxPool2d = { "stride", "padding", "dilation", "ceil_mode", "return_indices" },
  AvgPool2d = { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" },
}
OPTIONS.MaxPool1d, OPTIONS.AvgPool1d = OPTIONS.MaxPool2d, { "stride", "padding", "ceil_mode", "count_include_pad" }
-- nn.functional's (`name` is then the function's whole name)
OPTIONS["nn.functional.max_pool2d"], OPTIONS["nn.functional.avg_pool2d"] = OPTIONS.MaxPool2d, OPTIONS.AvgPool2d
OPTIONS["nn.functional.max_pool1d"], OPTIONS["nn.functional.avg_pool1d"] = OPTIONS.MaxPool1d, OPTIONS.AvgPool1d
OPTIONS["nn.functional.max_pool2d_with_indices"] = OPTIONS.MaxPool2d
OPTIONS["nn.functional.max_pool1d_with_indices"] = OPTIONS.MaxPool1d
MaxPool2d.OPTIONS = OPTIONS

-- The pool's sizes (kernel_size, stride, padding, dilation, ceil_mode) set
-- on self from opts: the modules' and nn.functional's max_pool2d and
-- avg_pool2d's. name: the module's ("MaxPool2d") or the function's
-- ("nn.functional.max_pool2d"), for errors.
local function sizes(self, name, kernel_size, opts)
  -- (the 1-d pools check theirs first, then come here with a 2-d view's)
  opts = Module.check_options(name:find("^nn%.") and name or "nn." .. name, opts,
    name:find("1d$") and OPTIONS.MaxPool2d or OPTIONS[name])
  if opts.ceil_mode ~= nil and type(opts.ceil_mode) ~= "boolean" then
    error(("%s: ceil_mode must be a boolean, got %s"):format(name, tostring(opts.ceil_mode)), 3)
  end
  self.ceil_mode = opts.ceil_mode == true
  if opts.return_indices ~= nil and type(opts.return_indices) ~= "boolean" then
    error(("%s: return_indices must be a boolean, got %s"):format(name, tostring(opts.return_indices)), 3)
  end
  self.return_indices = opts.return_indices == true
  self.kernel_size = pool.pair(kernel_size)
  if not self.kernel_size then
    error(("%s: kernel_size must be a positive integer or a pair of them, got %s"):format(name, tostring(kernel_size)), 3)
  end
  self.stride = opts.stride == nil and self.kernel_size or pool.pair(opts.stride)
  self.padding = pool.pair(opts.padding or 0, 0)
  self.dilation = pool.pair(opts.dilation or 1)
  for _, f in ipairs { "stride", "padding", "dilation" } do
    if not self[f] then
      error(("%s: %s must be a %s integer or a pair of them, got %s"):format(name, f,
        f == "padding" and "non-negative" or "positive", tostring(opts[f])), 3)
    end
  end
  for i = 1, 2 do
    local eff = self.dilation[i] * (self.kernel_size[i] - 1) + 1
    if self.padding[i] * 2 > eff then
      error(("%s: padding %d is more than half the kernel (%d); PyTorch refuses it too"):format(name,
        self.padding[i], eff), 3)
    end
  end
end
MaxPool2d._sizes = sizes

function MaxPool2d:__init(kernel_size, opts)
  sizes(self, "MaxPool2d", kernel_size, opts)
end

-- Checks x and gives it a batch dim; the name is the module's ("MaxPool2d",
-- errors say "MaxPool2d.forward") or a function's ("nn.functional.max_pool2d").
function MaxPool2d._check(self, name, x)
  local who = name:find("%.") and name or name .. ".forward"
  if not ember.is_tensor(x) or (x.ndim ~= 3 and x.ndim ~= 4) then
    error(("%s: expected an input [N, C, H, W] or [C, H, W], got %s"):format(who,
      ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)), 3)
  end
  local xb, unbatch = pool.batch(x)
  for i = 1, 2 do
    local n = xb.shape[2 + i]
    if pool.out_size(n, self.kernel_size[i], self.stride[i], self.padding[i], self.dilation[i], self.ceil_mode) < 1 then
      error(("%s: the window (kernel %d, dilation %d) is larger than the padded input (%d + 2 * %d) "
        .. "along dim %d of shape [%s]"):format(who, self.kernel_size[i], self.dilation[i], n, self.padding[i],
        x.ndim - 2 + i, table.concat(x.shape, ", ")), 3)
    end
  end
  return xb, unbatch
end

--- The max of each window; with return_indices, also where it was: int64,
-- the 1-based position in its input plane of H * W (PyTorch's 0-based
-- index plus one), the first of equal values, as nn.MaxUnpool2d and
-- nn.functional.max_unpool2d take it.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor [N, C, Ho, Wo] (or [C, Ho, Wo])
-- @treturn[opt] Tensor indices, shaped as the output (with return_indices)
function MaxPool2d:forward(x)
  local xb, unbatch = self:_check("MaxPool2d", x)
  if self.return_indices then
    local y, i = pool.max2d_indices(self, xb)
    return unbatch(y), unbatch(i)
  end
  return unbatch(pool.max2d(self, xb))
end

--- The sizes, for printing.
function MaxPool2d:extra_repr()
  local function s(p) return p[1] == p[2] and tostring(p[1]) or ("(%d, %d)"):format(p[1], p[2]) end
  return ("kernel_size=%s, stride=%s, padding=%s, dilation=%s%s"):format(s(self.kernel_size), s(self.stride),
    s(self.padding), s(self.dilation), (self.ceil_mode and ", ceil_mode=true" or "")
    .. (self.return_indices and ", return_indices=true" or ""))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
MaxPool2d.forward = require("ember._errors").wrap(MaxPool2d.forward)

return MaxPool2d
