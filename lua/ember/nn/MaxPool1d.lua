--- nn.MaxPool1d(kernel_size [, {stride=kernel_size, padding=0, dilation=1, ceil_mode=false}]):
-- the largest value of each window of [N, C, L] (or [C, L]), as
-- torch.nn.MaxPool1d. Sizes are a number (or a table of one). Padding is
-- -inf, at most half the kernel (PyTorch's limit). The output is
-- [N, C, Lo], Lo = floor((L + 2 padding - dilation (kernel - 1) - 1) / stride) + 1
-- (ceil with ceil_mode, as `nn.MaxPool2d`);
-- the gradient goes to the first largest value of each window.
-- It is `nn.MaxPool2d`'s code on a [N, C, 1, L] view.
-- Errors name nn.MaxPool1d: bad sizes, an input that is not 2-d or 3-d, a window larger than the padded input.
-- @usage local pool = nn.MaxPool1d(3, {stride = 2, padding = 1})
-- print(pool(ember.randn(4, 8, 20)).shape)   --> ember.Size{4, 8, 10}
-- @classmod nn.MaxPool1d
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local MaxPool2d = require "ember.nn.MaxPool2d"
local pool = require "ember.nn._pool"

local MaxPool1d = Module:extend("MaxPool1d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
MaxPool1d.SIGNATURE = { sizes = { "kernel_size" },
  options = { "stride", "padding", "dilation", "return_indices", "ceil_mode" } }

-- The 1-d sizes as fields (for printing) and as the 2-d pairs of a
-- [N, C, 1, L] view in self._cfg, through nn.MaxPool2d's checks (shared
-- with nn.AvgPool1d; `name` is the module's).
function MaxPool1d._sizes(self, name, kernel_size, opts)
  opts = Module.check_options(name:find("^nn%.") and name or "nn." .. name, opts, MaxPool2d.OPTIONS[name])
  if opts.return_indices ~= nil and type(opts.return_indices) ~= "boolean" then
    error(("%s: return_indices must be a boolean, got %s"):format(name, tostring(opts.return_indices)), 2)
  end
  self.return_indices = opts.return_indices == true
  local k = pool.single(kernel_size)
  if not k then
    error(("%s: kernel_size must be a positive integer, got %s"):format(name, tostring(kernel_size)), 2)
  end
  local v = { kernel_size = k }
  for _, f in ipairs { { "stride", k, 1 }, { "padding", 0, 0 }, { "dilation", 1, 1 } } do
    local given = opts[f[1]]
    v[f[1]] = given == nil and f[2] or pool.single(given, f[3])
    if not v[f[1]] then
      error(("%s: %s must be a %s integer, got %s"):format(name, f[1], f[3] == 0 and "non-negative" or "positive",
        tostring(given)), 2)
    end
  end
  self.kernel_size, self.stride, self.padding, self.dilation = v.kernel_size, v.stride, v.padding, v.dilation
  self._cfg = {}
  MaxPool2d._sizes(self._cfg, name, { 1, v.kernel_size }, { stride = { 1, v.stride }, padding = { 0, v.padding },
    dilation = { 1, v.dilation }, ceil_mode = opts.ceil_mode })
  self.ceil_mode = self._cfg.ceil_mode
end

function MaxPool1d:__init(kernel_size, opts)
  MaxPool1d._sizes(self, "MaxPool1d", kernel_size, opts)
end

-- Checks x ([N, C, L] or [C, L]; the name is the module's) and gives its
-- [N, C, 1, L] view and the function that takes a result back.
function MaxPool1d._check(self, name, x)
  local who = name:find("%.") and name or name .. ".forward"
  if not ember.is_tensor(x) or (x.ndim ~= 2 and x.ndim ~= 3) then
    error(("%s: expected an input [N, C, L] or [C, L], got %s"):format(who,
      ember.is_tensor(x) and ("shape " .. shape_str(x)) or type(x)), 2)
  end
  local L = x.shape[x.ndim]
  if pool.out_size(L, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode) < 1 then
    error(("%s: the window (kernel %d, dilation %d) is larger than the padded input (%d + 2 * %d) of shape %s")
      :format(who, self.kernel_size, self.dilation, L, self.padding, shape_str(x)), 2)
  end
  return pool.as_2d(x)
end

--- The max of each window; with return_indices, also its 1-based position
-- along L (int64; PyTorch's index plus one).
-- @tparam Tensor x [N, C, L] or [C, L]
-- @treturn Tensor [N, C, Lo] (or [C, Lo])
-- @treturn[opt] Tensor indices, shaped as the output (with return_indices)
function MaxPool1d:forward(x)
  local x4, back = MaxPool1d._check(self, "MaxPool1d", x)
  local c = self._cfg
  if self.return_indices then -- 1-based positions along L (its plane is 1 x L)
    local y, i = pool.max2d_indices(c, x4)
    return back(y), back(i)
  end
  return back(pool.max2d(c, x4))
end

--- The sizes, for printing.
function MaxPool1d:extra_repr()
  return ("kernel_size=%d, stride=%d, padding=%d, dilation=%d%s"):format(self.kernel_size, self.stride, self.padding,
    self.dilation, (self.ceil_mode and ", ceil_mode=true" or "") .. (self.return_indices and ", return_indices=true" or ""))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
MaxPool1d.forward = require("ember._errors").wrap(MaxPool1d.forward)

return MaxPool1d
