--- nn.functional: torch.nn.functional's functions, under its names:
-- `local F = ember.nn.functional` (or `require "ember.nn.functional"`),
-- then `F.conv2d(x, w, b, {stride = 2, padding = 1})`, `F.max_pool2d(x, 2)`,
-- `F.batch_norm(x, mean, var, {training = true})`, `F.interpolate(x,
-- {scale_factor = 2, mode = "bilinear"})`, `F.cross_entropy(logits, y)`.
--
-- What ember already has as a function is the same function here (no
-- copy: `F.relu == ember.relu`, `F.softmax == ember.softmax`, with their
-- conventions: ember.softmax needs its dim, dims, targets and ids are
-- 1-based). Where torch's default differs from ember's function, F has
-- torch's: F.normalize and F.cosine_similarity work along dim 2 (torch's
-- dim=1), ember.normalize and ember.cosine_similarity along the last.
-- The rest are written once, and the modules call the same code: nn.Conv2d's
-- forward is `F.conv2d`'s with its own weight, nn.BatchNorm2d's is
-- `F.batch_norm`'s with its running statistics, and so on.
--
-- Arguments: the tensors positionally, the rest either positionally in
-- torch's order (`F.conv2d(x, w, b, 2, 1)`: stride 2, padding 1) or as an
-- options table by torch's keyword names, where an options table may
-- stand for all the arguments from its place on (`F.conv2d(x, w, {padding
-- = 1})`: no bias). Unknown options are refused. Sizes are an integer or
-- a table ({h, w}), as torch's int or tuple. Errors name the function
-- ("nn.functional.conv2d: ...") at the caller's line.
-- @usage local F = ember.nn.functional
-- local x = ember.randn(2, 3, 8, 8)
-- local y = F.conv2d(x, ember.randn(4, 3, 3, 3), nil, {padding = 1})
-- print(y.shape)                                       --> ember.Size{2, 4, 8, 8}
-- print(F.max_pool2d(y, 2).shape)                      --> ember.Size{2, 4, 4, 4}
-- print(F.interpolate(x, {scale_factor = 2, mode = "bilinear"}).shape)   --> ember.Size{2, 3, 16, 16}
-- print(F.relu == ember.relu)                          --> true
-- @module nn.functional
local errors = require "ember._errors"
local ember = require "ember.nn._ember"
local conv = require "ember.nn._conv"
local tconv = require "ember.nn._conv_transpose"
local pool = require "ember.nn._pool"
local norm = require "ember.nn._norm"
local interp = require "ember.nn._interpolate"
local MaxPool2d = require "ember.nn.MaxPool2d"
local MaxPool1d = require "ember.nn.MaxPool1d"
local checks = require "ember.nn._functional_checks"
local args, is_options, check_tensor, check_optional = checks.args, checks.is_options, checks.check_tensor,
  checks.check_optional
local check_number, check_bool, check_input, check_stats = checks.check_number, checks.check_bool, checks.check_input,
  checks.check_stats
local check_momentum_eps, normalized, check_affine = checks.check_momentum_eps, checks.normalized, checks.check_affine
local window_sizes, check_reduction, factor, lambd_of = checks.window_sizes, checks.check_reduction, checks.factor,
  checks.lambd_of

local F = {}

-- ember's functions that are torch.nn.functional's (the same values)
local SAME = {
  "relu", "relu6", "gelu", "silu", "elu", "leaky_relu", "softplus", "sigmoid", "tanh", "hardtanh", "hardswish",
  "hardsigmoid", "mish", "glu", "softmax", "log_softmax", "linear", "one_hot", "pad", "cross_entropy", "nll_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
  "binary_cross_entropy", "binary_cross_entropy_with_logits", "scaled_dot_product_attention",
}
for _, name in ipairs(SAME) do F[name] = ember[name] end

local shape_str = errors.shape_str

------------------------------------------------------------------------
-- convolutions

local CONV = { "stride", "padding", "dilation", "groups" }

local function convolution(nd, x, w, b, ...)
  local who = "nn.functional.conv" .. nd .. "d"
  if is_options(b) and select("#", ...) == 0 then return convolution(nd, x, w, nil, b) end
  local o = args(who, CONV, ...)
  check_tensor(who, "input", x)
  check_tensor(who, "weight", w, true)
  if w.ndim ~= nd + 2 then
    errors.raise("%s: weight must be %d-d [out_channels, in_channels / groups, %s], got %s", who, nd + 2,
      nd == 2 and "kh, kw" or "k", shape_str(w))
  end
  local g = o.groups or 1
  if math.type(g) ~= "integer" or g < 1 then
    errors.raise("%s: groups must be a positive integer, got %s", who, tostring(g))
  end
  local O = w.shape[1]
  if O % g ~= 0 then
    errors.raise("%s: the weight's %d output channels (dim 1 of %s) must be divisible by groups=%d", who, O,
      shape_str(w), g)
  end
  check_optional(who, "bias", b, { O })
  local cfg = { weight = w, bias = b, groups = g, in_channels = w.shape[2] * g }
  local k = {}
  for i = 1, nd do k[i] = w.shape[2 + i] end
  conv.sizes(cfg, who, nd, k, o)
  if (x.ndim == nd + 1 or x.ndim == nd + 2) and x.shape[x.ndim - nd] ~= cfg.in_channels then
    errors.raise("%s: expected %d input channels (the weight %s times groups=%d), got %d in an input of shape %s", who,
      cfg.in_channels, shape_str(w), g, x.shape[x.ndim - nd], shape_str(x))
  end
  return conv.forward(cfg, who, nd, x, who)
end

--- 2-d convolution (cross-correlation), as torch.nn.functional.conv2d:
-- `F.conv2d(x, weight [, bias] [, {stride=1, padding=0, dilation=1, groups=1}])`
-- or torch's positional `F.conv2d(x, weight, bias, stride, padding, dilation, groups)`.
-- x [N, C, H, W] or [C, H, W], weight [out, C / groups, kh, kw], bias [out]
-- or nil. Sizes are an integer or a pair {h, w}; padding is also "same"
-- (stride 1) or "valid". nn.Conv2d's forward is this (nn/_conv.lua): the
-- backend's kernel where it has one, else composed from core ops.
-- @tparam Tensor x
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @param[opt] ... stride, padding, dilation, groups, or an options table
-- @treturn Tensor [N, out, Ho, Wo]
-- @usage local F = ember.nn.functional
-- local y = F.conv2d(ember.randn(1, 4, 9, 9), ember.randn(8, 2, 3, 3), nil, {stride = 2, groups = 2})
-- print(y.shape)   --> ember.Size{1, 8, 4, 4}
function F.conv2d(x, weight, bias, ...) return convolution(2, x, weight, bias, ...) end

--- 1-d convolution, as torch.nn.functional.conv1d: `F.conv1d(x, weight [,
-- bias] [, {stride=1, padding=0, dilation=1, groups=1}])` (or positional, as
-- conv2d), x [N, C, L] or [C, L], weight [out, C / groups, k]. nn.Conv1d's
-- forward is this.
-- @tparam Tensor x
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @param[opt] ... stride, padding, dilation, groups, or an options table
-- @treturn Tensor [N, out, Lo]
-- @usage local F = ember.nn.functional
-- print(F.conv1d(ember.randn(2, 3, 10), ember.randn(5, 3, 3), nil, {padding = "same"}).shape)   --> ember.Size{2, 5, 10}
function F.conv1d(x, weight, bias, ...) return convolution(1, x, weight, bias, ...) end

local TCONV = { "stride", "padding", "output_padding", "groups", "dilation" }

local function transposed(nd, x, w, b, ...)
  local who = "nn.functional.conv_transpose" .. nd .. "d"
  if is_options(b) and select("#", ...) == 0 then return transposed(nd, x, w, nil, b) end
  local o = args(who, TCONV, ...)
  check_tensor(who, "input", x)
  check_tensor(who, "weight", w, true)
  if w.ndim ~= nd + 2 then
    errors.raise("%s: weight must be %d-d [in_channels, out_channels / groups, %s], got %s", who, nd + 2,
      nd == 2 and "kh, kw" or "k", shape_str(w))
  end
  local g = o.groups or 1
  if math.type(g) ~= "integer" or g < 1 then
    errors.raise("%s: groups must be a positive integer, got %s", who, tostring(g))
  end
  local C = w.shape[1]
  if C % g ~= 0 then
    errors.raise("%s: the weight's %d input channels (dim 1 of %s) must be divisible by groups=%d", who, C,
      shape_str(w), g)
  end
  check_optional(who, "bias", b, { w.shape[2] * g })
  local cfg = { weight = w, bias = b, groups = g, in_channels = C }
  local k = {}
  for i = 1, nd do k[i] = w.shape[2 + i] end
  tconv.sizes(cfg, who, nd, k, o)
  return tconv.forward(cfg, who, nd, x, nil, who)
end

--- 2-d transposed convolution, as torch.nn.functional.conv_transpose2d:
-- `F.conv_transpose2d(x, weight [, bias] [, {stride=1, padding=0,
-- output_padding=0, groups=1, dilation=1}])` or torch's positional order
-- (stride, padding, output_padding, groups, dilation). weight [C, out /
-- groups, kh, kw]. The output is [N, out, Ho, Wo], Ho = (H - 1) stride -
-- 2 padding + dilation (kh - 1) + output_padding + 1. nn.ConvTranspose2d's
-- forward is this (nn/_conv_transpose.lua).
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @param[opt] ... stride, padding, output_padding, groups, dilation, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.conv_transpose2d(ember.randn(1, 4, 5, 5), ember.randn(4, 2, 4, 4), nil, {stride = 2, padding = 1}).shape)   --> ember.Size{1, 2, 10, 10}
function F.conv_transpose2d(x, weight, bias, ...) return transposed(2, x, weight, bias, ...) end

--- 1-d transposed convolution, as torch.nn.functional.conv_transpose1d:
-- as conv_transpose2d on [N, C, L] (or [C, L]) with weight [C, out / groups, k].
-- @tparam Tensor x
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @param[opt] ... stride, padding, output_padding, groups, dilation, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.conv_transpose1d(ember.randn(2, 3, 6), ember.randn(3, 5, 3), nil, {stride = 2}).shape)   --> ember.Size{2, 5, 13}
function F.conv_transpose1d(x, weight, bias, ...) return transposed(1, x, weight, bias, ...) end

------------------------------------------------------------------------
-- pooling

local function pooled(who, kind, nd, x, kernel_size, ...)
  local names = kind == "max" and { "stride", "padding", "dilation", "ceil_mode", "return_indices" }
    or nd == 2 and { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" }
    or { "stride", "padding", "ceil_mode", "count_include_pad" }
  local o = args(who, names, ...)
  check_tensor(who, "input", x, true)
  check_bool(who, "return_indices", o.return_indices)
  local indices = o.return_indices
  o.return_indices = nil -- (the modules' sizes refuse it: nn.MaxPool2d has no return_indices yet)
  local cfg = {}
  if nd == 2 then
    MaxPool2d._sizes(cfg, who, kernel_size, o)
    local xb, unbatch = MaxPool2d._check(cfg, who, x)
    if kind == "max" and indices then
      local y, i = pool.max2d_indices(cfg, xb)
      return unbatch(y), unbatch(i)
    end
    if kind == "max" then return unbatch(pool.max2d(cfg, xb)) end
    check_bool(who, "count_include_pad", o.count_include_pad)
    cfg.count_include_pad = o.count_include_pad ~= false
    local dv = o.divisor_override
    if dv ~= nil and (math.type(dv) ~= "integer" or dv < 1) then
      errors.raise("%s: divisor_override must be a positive integer, got %s", who, tostring(dv))
    end
    cfg.divisor_override = dv
    return unbatch(pool.avg2d(cfg, xb))
  end
  MaxPool1d._sizes(cfg, who, kernel_size, o)
  local x4, back = MaxPool1d._check(cfg, who, x)
  if kind == "max" and indices then
    local y, i = pool.max2d_indices(cfg._cfg, x4)
    return back(y), back(i)
  end
  if kind == "max" then return back(pool.max2d(cfg._cfg, x4)) end
  check_bool(who, "count_include_pad", o.count_include_pad)
  cfg._cfg.count_include_pad = o.count_include_pad ~= false
  return back(pool.avg2d(cfg._cfg, x4))
end

--- 2-d max pooling, as torch.nn.functional.max_pool2d: `F.max_pool2d(x,
-- kernel_size [, {stride=kernel_size, padding=0, dilation=1, ceil_mode=false,
-- return_indices=false}])` or positional (stride, padding, dilation,
-- ceil_mode, return_indices). x [N, C, H, W] or [C, H, W]; padding is
-- -inf, at most half the kernel. The gradient goes to the first largest
-- value of each window. nn.MaxPool2d's forward is this. With
-- return_indices, also where each max is: int64, 1-based flat indices into
-- each H * W plane (PyTorch's, plus one), what `F.max_unpool2d` takes.
-- @tparam Tensor x
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... stride, padding, dilation, ceil_mode, return_indices, or an options table
-- @treturn Tensor
-- @treturn[opt] Tensor the indices, with return_indices
-- @usage local F = ember.nn.functional
-- print(F.max_pool2d(ember.randn(1, 2, 7, 7), 3, {stride = 2, ceil_mode = true}).shape)   --> ember.Size{1, 2, 3, 3}
-- local y, idx = F.max_pool2d(ember.tensor{{{{1, 5}, {7, 2}}}}, 2, {return_indices = true})
-- print(y:item(), idx:item())                                   --> 7.0 3
function F.max_pool2d(x, kernel_size, ...) return pooled("nn.functional.max_pool2d", "max", 2, x, kernel_size, ...) end

--- 2-d average pooling, as torch.nn.functional.avg_pool2d: `F.avg_pool2d(x,
-- kernel_size [, {stride=kernel_size, padding=0, ceil_mode=false,
-- count_include_pad=true, divisor_override=}])` or positional in that
-- order. nn.AvgPool2d's forward is this.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... stride, padding, ceil_mode, count_include_pad, divisor_override, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.avg_pool2d(ember.ones(1, 1, 4, 4), 2):sum():item())   --> 4.0
function F.avg_pool2d(x, kernel_size, ...) return pooled("nn.functional.avg_pool2d", "avg", 2, x, kernel_size, ...) end

--- 1-d max pooling, as torch.nn.functional.max_pool1d: `F.max_pool1d(x,
-- kernel_size [, {stride=, padding=0, dilation=1, ceil_mode=false,
-- return_indices=false}])`, x [N, C, L] or [C, L]. nn.MaxPool1d's forward
-- is this. return_indices: also the 1-based positions of the maxima.
-- @tparam Tensor x
-- @int kernel_size
-- @param[opt] ... stride, padding, dilation, ceil_mode, return_indices, or an options table
-- @treturn Tensor
-- @treturn[opt] Tensor the indices, with return_indices
-- @usage local F = ember.nn.functional
-- print(F.max_pool1d(ember.tensor{{{1, 5, 2, 4}}}, 2))   --> tensor([[[5.0000, 4.0000]]], shape=[1, 1, 2], dtype=float32, device=cpu)
function F.max_pool1d(x, kernel_size, ...) return pooled("nn.functional.max_pool1d", "max", 1, x, kernel_size, ...) end

--- 1-d average pooling, as torch.nn.functional.avg_pool1d: `F.avg_pool1d(x,
-- kernel_size [, {stride=, padding=0, ceil_mode=false, count_include_pad=true}])`.
-- nn.AvgPool1d's forward is this.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @int kernel_size
-- @param[opt] ... stride, padding, ceil_mode, count_include_pad, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.avg_pool1d(ember.tensor{{{1, 5, 2, 4}}}, 2))   --> tensor([[[3.0000, 3.0000]]], shape=[1, 1, 2], dtype=float32, device=cpu)
function F.avg_pool1d(x, kernel_size, ...) return pooled("nn.functional.avg_pool1d", "avg", 1, x, kernel_size, ...) end

local function unpooled(nd, x, indices, kernel_size, ...)
  local who = "nn.functional.max_unpool" .. nd .. "d"
  local o = args(who, { "stride", "padding", "output_size" }, ...)
  check_tensor(who, "input", x, true)
  check_tensor(who, "indices", indices)
  if indices.dtype ~= "int64" then errors.raise("%s: indices must be int64 (1-based), got %s", who, indices.dtype) end
  if x.ndim ~= nd + 1 and x.ndim ~= nd + 2 then
    errors.raise("%s: expected an input %s, got shape %s", who,
      nd == 2 and "[N, C, H, W] or [C, H, W]" or "[N, C, L] or [C, L]", shape_str(x))
  end
  if table.concat(x.shape, ",") ~= table.concat(indices.shape, ",") then
    errors.raise("%s: indices must have the input's shape %s, got %s", who, shape_str(x), shape_str(indices))
  end
  local k = conv.tuple(kernel_size, nd, 1)
  local s = o.stride == nil and k or conv.tuple(o.stride, nd, 1)
  local p = conv.tuple(o.padding or 0, nd, 0)
  for _, f in ipairs { { "kernel_size", k, kernel_size }, { "stride", s, o.stride }, { "padding", p, o.padding } } do
    if not f[2] then
      errors.raise("%s: %s must be a %s integer%s, got %s", who, f[1], f[1] == "padding" and "non-negative" or "positive",
        nd == 2 and " or a pair of them" or "", conv.fmt(f[3]))
    end
  end
  local out = {}
  for i = 1, nd do out[i] = (x.shape[x.ndim - nd + i] - 1) * s[i] - 2 * p[i] + k[i] end
  if o.output_size ~= nil then
    local want = math.type(o.output_size) == "integer" and { o.output_size } or o.output_size
    local ok = type(want) == "table" and #want >= nd
    for i = 1, nd do
      local v = ok and want[#want - nd + i]
      ok = ok and math.type(v) == "integer" and v > 0
      out[i] = ok and v or out[i]
    end
    if not ok then
      errors.raise("%s: output_size must be %d positive integers (or a whole shape ending in them), got %s", who, nd,
        conv.fmt(o.output_size))
    end
  end
  local plane = nd == 2 and out[1] * out[2] or out[1]
  if indices:numel() > 0 and (indices:min():item() < 1 or indices:max():item() > plane) then
    errors.raise("%s: indices must lie in 1..%d (the output's %s plane), got %d..%d", who, plane,
      table.concat(out, " x "), indices:min():item(), indices:max():item())
  end
  if nd == 1 then
    local x4, back = pool.as_2d(x)
    return back(pool.unpool2d(x4, pool.as_2d(indices), { 1, out[1] }))
  end
  local xb, unbatch = pool.batch(x)
  return unbatch(pool.unpool2d(xb, pool.batch(indices), out))
end

--- max_pool2d's partial inverse, as torch.nn.functional.max_unpool2d:
-- `F.max_unpool2d(x, indices, kernel_size [, {stride=kernel_size,
-- padding=0, output_size=}])` (or positional): each value of x put at its
-- index (max_pool2d's return_indices, 1-based) of an output plane of
-- (H - 1) stride - 2 padding + kernel rows (and columns; output_size
-- chooses another size), zeros elsewhere. An index that repeats
-- (overlapping windows) keeps one of its values, as PyTorch's (which one
-- is unspecified there too).
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @tparam Tensor indices int64, x's shape
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... stride, padding, output_size, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local x = ember.tensor{{{{1, 5}, {7, 2}}}}
-- local y, idx = F.max_pool2d(x, 2, {return_indices = true})
-- print(F.max_unpool2d(y, idx, 2))   --> tensor([[[[0.0000, 0.0000], [7.0000, 0.0000]]]], shape=[1, 1, 2, 2], dtype=float32, device=cpu)
function F.max_unpool2d(x, indices, kernel_size, ...) return unpooled(2, x, indices, kernel_size, ...) end

--- max_pool1d's partial inverse, as torch.nn.functional.max_unpool1d:
-- `F.max_unpool1d(x, indices, kernel_size [, {stride=, padding=0, output_size=}])`.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @tparam Tensor indices int64, x's shape (1-based)
-- @int kernel_size
-- @param[opt] ... stride, padding, output_size, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local y, idx = F.max_pool1d(ember.tensor{{{1, 5, 2, 4}}}, 2, {return_indices = true})
-- print(F.max_unpool1d(y, idx, 2))   --> tensor([[[0.0000, 5.0000, 0.0000, 4.0000]]], shape=[1, 1, 4], dtype=float32, device=cpu)
function F.max_unpool1d(x, indices, kernel_size, ...) return unpooled(1, x, indices, kernel_size, ...) end

local function adaptive(who, how, nd, x, output_size, ...)
  local o = args(who, { "return_indices" }, ...)
  if o.return_indices then errors.raise("%s: return_indices is not supported", who) end
  check_tensor(who, "input", x, true)
  if x.ndim ~= nd + 1 and x.ndim ~= nd + 2 then
    errors.raise("%s: expected an input %s, got shape %s", who,
      nd == 2 and "[N, C, H, W] or [C, H, W]" or "[N, C, L] or [C, L]",
      shape_str(x))
  end
  if nd == 1 then
    local s = pool.single(output_size)
    if not s then errors.raise("%s: output_size must be a positive integer, got %s", who, tostring(output_size)) end
    return pool.adaptive_mean(x, x.ndim, s, how)
  end
  local o2 = pool.output_pair(output_size)
  if not o2 then
    errors.raise("%s: output_size must be a positive integer or a pair of them (false: that dim's size, "
      .. "PyTorch's None), got %s",
      who, conv.fmt(output_size))
  end
  local xb, unbatch = pool.batch(x)
  return unbatch(pool.adaptive2d(xb, o2, how))
end

--- Adaptive 2-d average pooling, as torch.nn.functional.adaptive_avg_pool2d:
-- `F.adaptive_avg_pool2d(x, output_size)`, output_size an integer or
-- {oh, ow} (false: that dim's size, PyTorch's None); PyTorch's bins.
-- nn.AdaptiveAvgPool2d's forward is this.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @param output_size
-- @treturn Tensor [N, C, oh, ow]
-- @usage local F = ember.nn.functional
-- print(F.adaptive_avg_pool2d(ember.randn(2, 8, 7, 5), 1).shape)   --> ember.Size{2, 8, 1, 1}
function F.adaptive_avg_pool2d(x, output_size)
  return adaptive("nn.functional.adaptive_avg_pool2d", "mean", 2, x, output_size)
end

--- Adaptive 2-d max pooling, as torch.nn.functional.adaptive_max_pool2d
-- (return_indices is not supported). nn.AdaptiveMaxPool2d's forward is this.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @param output_size an integer or {oh, ow}
-- @param[opt] ... return_indices (false), or an options table
-- @treturn Tensor [N, C, oh, ow]
-- @usage local F = ember.nn.functional
-- print(F.adaptive_max_pool2d(ember.randn(2, 8, 7, 5), {3, 2}).shape)   --> ember.Size{2, 8, 3, 2}
function F.adaptive_max_pool2d(x, output_size, ...)
  return adaptive("nn.functional.adaptive_max_pool2d", "max", 2, x, output_size, ...)
end

--- Adaptive 1-d average pooling, as torch.nn.functional.adaptive_avg_pool1d.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @int output_size
-- @treturn Tensor [N, C, output_size]
-- @usage local F = ember.nn.functional
-- print(F.adaptive_avg_pool1d(ember.tensor{{{1, 2, 3, 4}}}, 2))   --> tensor([[[1.5000, 3.5000]]], shape=[1, 1, 2], dtype=float32, device=cpu)
function F.adaptive_avg_pool1d(x, output_size)
  return adaptive("nn.functional.adaptive_avg_pool1d", "mean", 1, x, output_size)
end

--- Adaptive 1-d max pooling, as torch.nn.functional.adaptive_max_pool1d
-- (return_indices is not supported).
-- @tparam Tensor x [N, C, L] or [C, L]
-- @int output_size
-- @param[opt] ... return_indices (false), or an options table
-- @treturn Tensor [N, C, output_size]
-- @usage local F = ember.nn.functional
-- print(F.adaptive_max_pool1d(ember.tensor{{{1, 2, 3, 4}}}, 2))   --> tensor([[[2.0000, 4.0000]]], shape=[1, 1, 2], dtype=float32, device=cpu)
function F.adaptive_max_pool1d(x, output_size, ...)
  return adaptive("nn.functional.adaptive_max_pool1d", "max", 1, x, output_size, ...)
end

------------------------------------------------------------------------
-- normalisation

--- Batch normalisation, as torch.nn.functional.batch_norm:
-- `F.batch_norm(x, running_mean, running_var [, weight, bias, training=false,
-- momentum=0.1, eps=1e-5])`, or an options table for any of them from its
-- place on (`F.batch_norm(x, rm, rv, {training = true})`). x [N, C, *].
-- Training (or without running statistics): each channel normalised by the
-- batch's mean and biased variance, and the running statistics (when
-- given) updated in place: running = (1 - momentum) running + momentum
-- batch (unbiased variance). Evaluation: the running statistics are used.
-- Then times weight and plus bias ([C] each, optional). nn.BatchNorm1d/2d's
-- forward is this (nn/_norm.lua).
-- @tparam Tensor x
-- @tparam[opt] Tensor running_mean [C], updated in place when training
-- @tparam[opt] Tensor running_var [C], updated in place when training
-- @param[opt] ... weight, bias, training, momentum, eps, or an options table
-- @treturn Tensor x's shape
-- @usage local F = ember.nn.functional
-- local mean, var = ember.zeros(3), ember.ones(3)
-- local y = F.batch_norm(ember.randn(8, 3, 4, 4) + 2, mean, var, {training = true})
-- print(mean:gt(0.1):all():item())   --> true
function F.batch_norm(x, ...)
  local who = "nn.functional.batch_norm"
  local o = args(who, { "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps" }, ...)
  local C = check_input(who, x, 2)
  check_stats(who, o.running_mean, o.running_var, C)
  check_optional(who, "weight", o.weight, { C })
  check_optional(who, "bias", o.bias, { C })
  check_bool(who, "training", o.training)
  local m, eps = check_momentum_eps(who, o)
  if not o.training and o.running_mean == nil then
    errors.raise("%s: running_mean and running_var are needed when training is false (evaluation normalises with them)",
      who)
  end
  return norm.batch_norm(who, x, o.running_mean, o.running_var, o.weight, o.bias, o.training == true, m, eps)
end

--- Instance normalisation, as torch.nn.functional.instance_norm:
-- `F.instance_norm(x [, running_mean, running_var, weight, bias,
-- use_input_stats=true, momentum=0.1, eps=1e-5])` or an options table:
-- each sample's channel normalised over the spatial dims of x [N, C, *]
-- with its own mean and biased variance (use_input_stats; the running
-- statistics, when given, move towards the batch's average of them), or
-- with the running statistics. nn.InstanceNorm1d/2d's forward is this.
-- @tparam Tensor x
-- @param[opt] ... running_mean, running_var, weight, bias, use_input_stats, momentum, eps, or an options table
-- @treturn Tensor x's shape
-- @usage local F = ember.nn.functional
-- local y = F.instance_norm(ember.randn(2, 3, 16) * 5 + 1)
-- print(y:mean(3):abs():max():item() < 1e-5)   --> true
function F.instance_norm(x, ...)
  local who = "nn.functional.instance_norm"
  local o = args(who, { "running_mean", "running_var", "weight", "bias", "use_input_stats", "momentum", "eps" }, ...)
  local C = check_input(who, x, 3)
  check_stats(who, o.running_mean, o.running_var, C)
  check_optional(who, "weight", o.weight, { C })
  check_optional(who, "bias", o.bias, { C })
  check_bool(who, "use_input_stats", o.use_input_stats)
  local m, eps = check_momentum_eps(who, o)
  local use = o.use_input_stats ~= false
  if not use and o.running_mean == nil then
    errors.raise("%s: running_mean and running_var are needed when use_input_stats is false", who)
  end
  return norm.instance_norm(who, x, o.running_mean, o.running_var, o.weight, o.bias, use, m, eps, true)
end

--- Group normalisation, as torch.nn.functional.group_norm:
-- `F.group_norm(x, num_groups [, weight, bias, eps=1e-5])` or an options
-- table: the channels of x [N, C, *] split into num_groups groups, each
-- sample's group normalised by its mean and biased variance, then times
-- weight and plus bias ([C], optional). nn.GroupNorm's forward is this.
-- @tparam Tensor x
-- @int num_groups dividing C
-- @param[opt] ... weight, bias, eps, or an options table
-- @treturn Tensor x's shape
-- @usage local F = ember.nn.functional
-- print(F.group_norm(ember.randn(2, 6, 5), 3).shape)   --> ember.Size{2, 6, 5}
function F.group_norm(x, num_groups, ...)
  local who = "nn.functional.group_norm"
  local o = args(who, { "weight", "bias", "eps" }, ...)
  local C = check_input(who, x, 2)
  if math.type(num_groups) ~= "integer" or num_groups < 1 then
    errors.raise("%s: num_groups must be a positive integer, got %s", who, tostring(num_groups))
  end
  if C % num_groups ~= 0 then
    errors.raise("%s: the input's %d channels (dim 2 of %s) must be divisible by num_groups=%d", who, C, shape_str(x),
      num_groups)
  end
  check_optional(who, "weight", o.weight, { C })
  check_optional(who, "bias", o.bias, { C })
  local eps = o.eps == nil and 1e-5 or o.eps
  check_number(who, "eps", eps, 0)
  return norm.group_norm(x, num_groups, o.weight, o.bias, eps)
end

--- Layer normalisation, as torch.nn.functional.layer_norm:
-- `F.layer_norm(x, normalized_shape [, weight, bias, eps=1e-5])` or an
-- options table: x normalised over its last #normalized_shape dims (which
-- must be normalized_shape: an integer or a table), then times weight and
-- plus bias (normalized_shape each, optional). `ember.layer_norm(x, n, ...)`
-- takes the number of dims instead. nn.LayerNorm's forward is this.
-- @tparam Tensor x
-- @param normalized_shape
-- @param[opt] ... weight, bias, eps, or an options table
-- @treturn Tensor x's shape
-- @usage local F = ember.nn.functional
-- local y = F.layer_norm(ember.randn(2, 5, 8), 8)
-- print(y:mean(-1):abs():max():item() < 1e-5)   --> true
function F.layer_norm(x, normalized_shape, ...)
  local who = "nn.functional.layer_norm"
  local o = args(who, { "weight", "bias", "eps" }, ...)
  check_tensor(who, "input", x, true)
  local ns = normalized(who, normalized_shape)
  check_affine(who, "weight", o.weight, ns)
  check_affine(who, "bias", o.bias, ns)
  local eps = o.eps == nil and 1e-5 or o.eps
  check_number(who, "eps", eps, 0)
  return norm.layer_norm(who, x, ns, o.weight, o.bias, eps)
end

--- Root-mean-square normalisation, as torch.nn.functional.rms_norm
-- (PyTorch 2.4): `F.rms_norm(x, normalized_shape [, weight, eps])` or an
-- options table: x / sqrt(mean(x^2 over the last dims) + eps) * weight;
-- eps nil is the machine epsilon of the dtype (float32's for bfloat16
-- input, which is computed in float32). nn.RMSNorm's forward is this.
-- @tparam Tensor x
-- @param normalized_shape an integer or a table
-- @param[opt] ... weight, eps, or an options table
-- @treturn Tensor x's shape
-- @usage local F = ember.nn.functional
-- local y = F.rms_norm(ember.randn(3, 16) * 4, 16, {eps = 1e-6})
-- print(((y * y):mean(-1) - 1):abs():max():item() < 1e-4)   --> true
function F.rms_norm(x, normalized_shape, ...)
  local who = "nn.functional.rms_norm"
  local o = args(who, { "weight", "eps" }, ...)
  check_tensor(who, "input", x, true)
  local ns = normalized(who, normalized_shape)
  check_affine(who, "weight", o.weight, ns)
  if o.eps ~= nil then check_number(who, "eps", o.eps, 0) end
  return norm.rms_norm(who, x, ns, o.weight, o.eps)
end

------------------------------------------------------------------------
-- resampling

--- Resampling, as torch.nn.functional.interpolate: `F.interpolate(x,
-- {size =, scale_factor =, mode = "nearest", align_corners =,
-- recompute_scale_factor =})` (or torch's positional order). x
-- [N, C, L], [N, C, H, W] or [N, C, D, H, W]; give size (an integer or a
-- table: the output's spatial sizes) or scale_factor (a number or a table:
-- each size times it, rounded down). Modes: "nearest" (PyTorch's, with its
-- float32 index arithmetic), "nearest-exact", "linear" (3-d), "bilinear"
-- (4-d), "bicubic" (4-d, A = -0.75, as PyTorch), "trilinear" (5-d) and
-- "area" (adaptive average pooling). align_corners (the interpolating
-- modes only; false by default) maps the corner pixels' centres onto each
-- other. With a scale_factor the source positions use it (1 / scale_factor),
-- as PyTorch, unless recompute_scale_factor. Differentiable (an
-- index_select per tap, summed); nn.Upsample's forward is this. antialias
-- is not supported.
-- @tparam Tensor x
-- @param[opt] ... size, scale_factor, mode, align_corners, recompute_scale_factor, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local x = ember.tensor{{{{1, 2}, {3, 4}}}}
-- print(F.interpolate(x, {size = 3, mode = "bilinear", align_corners = true}))   --> tensor([[[[1.0000, 1.5000, 2.0000], [2.0000, 2.5000, 3.0000], [3.0000, 3.5000, 4.0000]]]], shape=[1, 1, 3, 3], dtype=float32, device=cpu)
-- print(F.interpolate(x, {scale_factor = 2}).shape)                             --> ember.Size{1, 1, 4, 4}
function F.interpolate(x, ...)
  local who = "nn.functional.interpolate"
  return interp.resample(who, x, args(who, interp.OPTIONS, ...))
end

--- torch.nn.functional.upsample (deprecated there): F.interpolate.
-- @tparam Tensor x
-- @param[opt] ... as interpolate's
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.upsample(ember.randn(1, 2, 3), {scale_factor = 2, mode = "linear"}).shape)   --> ember.Size{1, 2, 6}
function F.upsample(x, ...)
  local who = "nn.functional.upsample"
  return interp.resample(who, x, args(who, interp.OPTIONS, ...))
end

--- torch.nn.functional.upsample_nearest: `F.upsample_nearest(x [, size, scale_factor])` (or an options table).
-- @tparam Tensor x
-- @param[opt] ... size, scale_factor, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.upsample_nearest(ember.randn(1, 2, 3, 3), {size = 5}).shape)   --> ember.Size{1, 2, 5, 5}
function F.upsample_nearest(x, ...)
  local who = "nn.functional.upsample_nearest"
  local o = args(who, { "size", "scale_factor" }, ...)
  o.mode = "nearest"
  return interp.resample(who, x, o)
end

--- torch.nn.functional.upsample_bilinear: bilinear with align_corners = true,
-- as PyTorch's: `F.upsample_bilinear(x [, size, scale_factor])` (or an options table).
-- @tparam Tensor x [N, C, H, W]
-- @param[opt] ... size, scale_factor, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.upsample_bilinear(ember.randn(1, 2, 3, 3), {scale_factor = 2}).shape)   --> ember.Size{1, 2, 6, 6}
function F.upsample_bilinear(x, ...)
  local who = "nn.functional.upsample_bilinear"
  local o = args(who, { "size", "scale_factor" }, ...)
  o.mode, o.align_corners = "bilinear", true
  return interp.resample(who, x, o)
end

------------------------------------------------------------------------
-- sliding windows

local WINDOW = { "dilation", "padding", "stride" }

--- Sliding local blocks (im2col), as torch.nn.functional.unfold:
-- `F.unfold(x, kernel_size [, dilation=1, padding=0, stride=1])` or an
-- options table. x [N, C, H, W] (or [C, H, W]) gives [N, C kh kw, L]: column
-- l holds block l's values (channel-major, then the kernel's rows and
-- columns), L = Ho Wo blocks in row-major order. The columns nn.Conv2d's
-- composed route multiplies (nn/_conv.lua). `ember.unfold` / `x:unfold` is
-- torch's Tensor.unfold (windows of one dim), not this.
-- @tparam Tensor x
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... dilation, padding, stride, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.unfold(ember.randn(2, 3, 5, 5), 3, {padding = 1}).shape)   --> ember.Size{2, 27, 25}
function F.unfold(x, kernel_size, ...)
  local who = "nn.functional.unfold"
  local o = args(who, WINDOW, ...)
  check_tensor(who, "input", x)
  if x.ndim ~= 3 and x.ndim ~= 4 then
    errors.raise("%s: expected an input [N, C, H, W] or [C, H, W], got shape %s", who, shape_str(x))
  end
  local v = window_sizes(who, kernel_size, o)
  local xb, unbatch = pool.batch(x)
  local p, k, d, s = v.padding, v.kernel_size, v.dilation, v.stride
  for i = 1, 2 do
    if conv.out_size(xb.shape[2 + i], k[i], s[i], p[i], p[i], d[i]) < 1 then
      errors.raise("%s: the block (kernel %d, dilation %d) is larger than the padded input (%d + 2 * %d) along dim %d "
        .. "of shape %s", who, k[i], d[i], xb.shape[2 + i], p[i], x.ndim - 2 + i, shape_str(x))
    end
  end
  return unbatch(conv.unfold(xb, k, s, { p[1], p[1], p[2], p[2] }, d))
end

--- Sliding local blocks summed back into an image (col2im), as
-- torch.nn.functional.fold, unfold's adjoint: `F.fold(x, output_size,
-- kernel_size [, dilation=1, padding=0, stride=1])` or an options table.
-- x [N, C kh kw, L] (or [C kh kw, L]) gives [N, C, H, W] with {H, W} =
-- output_size; values of overlapping blocks add up.
-- @tparam Tensor x
-- @param output_size an integer or {H, W}
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... dilation, padding, stride, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local ones = ember.ones(1, 4, 9)                 -- 3 x 3 blocks of 2 x 2, one channel
-- local y = F.fold(ones, 4, 2)                       -- overlapping: the middle is hit 4 times
-- print(y.shape, y:sum():item())                     --> ember.Size{1, 1, 4, 4} 36.0
function F.fold(x, output_size, kernel_size, ...)
  local who = "nn.functional.fold"
  local o = args(who, WINDOW, ...)
  check_tensor(who, "input", x)
  if x.ndim ~= 2 and x.ndim ~= 3 then
    errors.raise("%s: expected an input [N, C * kh * kw, L] or [C * kh * kw, L], got shape %s", who, shape_str(x))
  end
  local v = window_sizes(who, kernel_size, o)
  local out = conv.tuple(output_size, 2, 1)
  if not out then
    errors.raise("%s: output_size must be a positive integer or a pair of them, got %s", who, conv.fmt(output_size))
  end
  local xb = x.ndim == 2 and x:unsqueeze(1) or x
  local p, k, d, s = v.padding, v.kernel_size, v.dilation, v.stride
  local K = k[1] * k[2]
  local L, blocks = 1, {}
  for i = 1, 2 do
    blocks[i] = conv.out_size(out[i], k[i], s[i], p[i], p[i], d[i])
    L = L * math.max(blocks[i], 0)
  end
  if xb.shape[2] % K ~= 0 then
    errors.raise("%s: dim %d of the input (%d) must be divisible by the kernel's size %d x %d, got shape %s", who,
      x.ndim - 1, xb.shape[2], k[1], k[2], shape_str(x))
  end
  if xb.shape[3] ~= L or L < 1 then
    errors.raise("%s: expected %d blocks (dim %d) for output_size %s, kernel %s, dilation %s, padding %s and stride "
      .. "%s, got shape %s", who, L, x.ndim, conv.fmt(out), conv.fmt(k), conv.fmt(d), conv.fmt(p), conv.fmt(s),
      shape_str(x))
  end
  local y = conv.fold(xb, out, k, s, p, d, blocks)
  return x.ndim == 2 and y:squeeze(1) or y
end

------------------------------------------------------------------------
-- the rest: torch's argument order where ember's differs

--- Rows of `weight` picked by int64 ids, as torch.nn.functional.embedding
-- (torch's order: the ids first; `ember.embedding(weight, ids)` is the
-- other): `F.embedding(ids, weight [, {padding_idx =}])`. Ids are 1-based
-- (ember's convention); padding_idx (1-based) gets no gradient, as
-- PyTorch's. nn.Embedding's forward is this.
-- @tparam Tensor ids int64, 1-based
-- @tparam Tensor weight [num, dim]
-- @param[opt] ... padding_idx, or an options table
-- @treturn Tensor [..., dim]
-- @usage local F = ember.nn.functional
-- local w = ember.tensor{{0, 0}, {1, 2}, {3, 4}}
-- print(F.embedding(ember.tensor({3, 2}, {dtype = "int64"}), w))   --> tensor([[3.0000, 4.0000], [1.0000, 2.0000]], shape=[2, 2], dtype=float32, device=cpu)
function F.embedding(ids, weight, ...)
  local who = "nn.functional.embedding"
  local o = args(who, { "padding_idx" }, ...)
  check_tensor(who, "weight", weight)
  local pad = o.padding_idx
  if pad ~= nil and (math.type(pad) ~= "integer" or pad < 1 or pad > weight.shape[1]) then
    errors.raise("%s: padding_idx must be an id in 1..%d, got %s", who, weight.shape[1], tostring(pad))
  end
  return require("ember.nn.Embedding")._lookup(who, weight, ids, pad)
end

--- Mean squared error, as torch.nn.functional.mse_loss: `F.mse_loss(input,
-- target [, reduction])`, reduction "mean" (default), "sum" or "none", by
-- position (as `ember.mse_loss`, which this calls) or as `{reduction =}`.
-- @tparam Tensor input
-- @tparam Tensor target
-- @param[opt] ... reduction, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.mse_loss(ember.tensor{1, 2}, ember.tensor{0, 0}, {reduction = "sum"}):item())   --> 5.0
function F.mse_loss(input, target, ...)
  local o = args("nn.functional.mse_loss", { "reduction" }, ...)
  return ember.mse_loss(input, target, o.reduction or "mean")
end

------------------------------------------------------------------------
-- the modules' rules as functions, and torch's activations ember had not

--- x / (1 + |x|), as torch.nn.functional.softsign (nn.Softsign's forward).
-- @tparam Tensor x
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.softsign(ember.tensor{-3, 1}))   --> tensor([-0.7500,  0.5000], shape=[2], dtype=float32, device=cpu)
function F.softsign(x)
  check_tensor("nn.functional.softsign", "input", x, true)
  return require("ember.nn.Softsign")._softsign(x)
end

--- x where x > 0, weight * x elsewhere, as torch.nn.functional.prelu
-- (nn.PReLU's forward): weight has one value, or C values for the
-- channels of x [N, C, *].
-- @tparam Tensor x
-- @tparam Tensor weight
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.prelu(ember.tensor{-2, 3}, ember.tensor{0.25}))   --> tensor([-0.5000,  3.0000], shape=[2], dtype=float32, device=cpu)
function F.prelu(x, weight)
  local who = "nn.functional.prelu"
  check_tensor(who, "input", x, true)
  check_tensor(who, "weight", weight, true)
  if weight.ndim > 1 then errors.raise("%s: weight must be 0-d or 1-d, got %s", who, shape_str(weight)) end
  return require("ember.nn.PReLU")._prelu(who, x, weight)
end

--- Channel dropout, as torch.nn.functional.dropout2d: `F.dropout2d(x [, p=0.5,
-- training=true])` (or an options table): each channel of [N, C, H, W]
-- (or [C, H, W]) zeroed whole with probability p, the rest scaled by
-- 1 / (1 - p); x itself when not training. nn.Dropout2d's forward.
-- @tparam Tensor x
-- @param[opt] ... p, training, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.dropout2d(ember.ones(2, 3, 4, 4), 0.5, false):sum():item())   --> 96.0
function F.dropout2d(x, ...)
  local who = "nn.functional.dropout2d"
  local o = args(who, { "p", "training" }, ...)
  local p = o.p == nil and 0.5 or o.p
  if type(p) ~= "number" or p < 0 or p >= 1 then
    errors.raise("%s: p must be a number in [0, 1), got %s", who, tostring(p))
  end
  check_bool(who, "training", o.training)
  return require("ember.nn.Dropout2d")._dropout2d(who, x, p, o.training ~= false)
end

--- [*, C r^2, H, W] -> [*, C, H r, W r], as torch.nn.functional.pixel_shuffle (nn.PixelShuffle's forward).
-- @tparam Tensor x
-- @int upscale_factor r
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.pixel_shuffle(ember.randn(1, 8, 3, 3), 2).shape)   --> ember.Size{1, 2, 6, 6}
function F.pixel_shuffle(x, upscale_factor)
  factor("nn.functional.pixel_shuffle", "upscale_factor", upscale_factor)
  return require("ember.nn.PixelShuffle")._shuffle("nn.functional.pixel_shuffle", x, upscale_factor)
end

--- [*, C, H r, W r] -> [*, C r^2, H, W], as torch.nn.functional.pixel_unshuffle (nn.PixelUnshuffle's forward).
-- @tparam Tensor x
-- @int downscale_factor r
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.pixel_unshuffle(ember.randn(1, 2, 6, 6), 2).shape)   --> ember.Size{1, 8, 3, 3}
function F.pixel_unshuffle(x, downscale_factor)
  factor("nn.functional.pixel_unshuffle", "downscale_factor", downscale_factor)
  return require("ember.nn.PixelUnshuffle")._unshuffle("nn.functional.pixel_unshuffle", x, downscale_factor)
end

--- ||x1 - x2 + eps||_p over the last dim, as torch.nn.functional.pairwise_distance:
-- `F.pairwise_distance(x1, x2 [, p=2, eps=1e-6, keepdim=false])` or an
-- options table. nn.PairwiseDistance's forward.
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @param[opt] ... p, eps, keepdim, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.pairwise_distance(ember.tensor{{3, 4}}, ember.zeros(1, 2), {eps = 0}))   --> tensor([5.0000], shape=[1], dtype=float32, device=cpu)
function F.pairwise_distance(x1, x2, ...)
  local who = "nn.functional.pairwise_distance"
  local o = args(who, { "p", "eps", "keepdim" }, ...)
  check_tensor(who, "x1", x1, true)
  check_tensor(who, "x2", x2, true)
  local p, eps = o.p or 2, o.eps or 1e-6
  if type(p) ~= "number" or not (p > 0) then errors.raise("%s: p must be a number > 0, got %s", who, tostring(p)) end
  check_number(who, "eps", eps)
  check_bool(who, "keepdim", o.keepdim)
  return require("ember.nn.PairwiseDistance")._distance(x1, x2, p, eps, o.keepdim == true)
end

--- The triplet margin loss, as torch.nn.functional.triplet_margin_loss:
-- `F.triplet_margin_loss(anchor, positive, negative [, margin=1, p=2,
-- eps=1e-6, swap=false])`, with {reduction = "mean"} by name (or every
-- option in the table): max(d(a, p) - d(a, n) + margin, 0), d the
-- pairwise distance. nn.TripletMarginLoss's forward.
-- @tparam Tensor anchor [N, D] or [D]
-- @tparam Tensor positive
-- @tparam Tensor negative
-- @param[opt] ... margin, p, eps, swap, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local a = ember.zeros(1, 2)
-- print(F.triplet_margin_loss(a, a, ember.tensor{{3, 4}}, {margin = 6, eps = 0}):item())   --> 1.0
function F.triplet_margin_loss(anchor, positive, negative, ...)
  local who = "nn.functional.triplet_margin_loss"
  local o = args(who, { "margin", "p", "eps", "swap", "reduction" }, ...)
  local losses = require "ember.nn._loss"
  if not (losses.same_shape(anchor, positive, negative) and (anchor.ndim == 1 or anchor.ndim == 2)) then
    local d = losses.describe
    errors.raise("%s: expected anchor, positive and negative of one shape [N, D] or [D], got %s, %s and %s", who,
      d(anchor), d(positive), d(negative))
  end
  local margin, p, eps = o.margin or 1, o.p or 2, o.eps or 1e-6
  check_number(who, "margin", margin)
  if type(p) ~= "number" or not (p > 0) then errors.raise("%s: p must be a number > 0, got %s", who, tostring(p)) end
  check_number(who, "eps", eps)
  check_bool(who, "swap", o.swap)
  return require("ember.nn.TripletMarginLoss")._loss(anchor, positive, negative, margin, p, eps, o.swap == true,
    check_reduction(who, o.reduction))
end

--- The margin ranking loss, as torch.nn.functional.margin_ranking_loss:
-- `F.margin_ranking_loss(x1, x2, y [, margin=0])`, {reduction = "mean"} by
-- name: max(-y (x1 - x2) + margin, 0), y 1 or -1. nn.MarginRankingLoss's forward.
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @tparam Tensor y
-- @param[opt] ... margin, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.margin_ranking_loss(ember.tensor{1, 2}, ember.tensor{2, 1}, ember.tensor{1, 1}):item())   --> 0.5
function F.margin_ranking_loss(x1, x2, y, ...)
  local who = "nn.functional.margin_ranking_loss"
  local o = args(who, { "margin", "reduction" }, ...)
  local losses = require "ember.nn._loss"
  if not losses.same_shape(x1, x2, y) then
    local d = losses.describe
    errors.raise("%s: expected x1, x2 and y (1 or -1) of one shape, got %s, %s and %s", who, d(x1), d(x2), d(y))
  end
  local margin = o.margin or 0
  check_number(who, "margin", margin)
  return require("ember.nn.MarginRankingLoss")._loss(x1, x2, y, margin, check_reduction(who, o.reduction))
end

--- x1^T W_o x2 (+ b_o) for every output o, as torch.nn.functional.bilinear:
-- x1 [..., I1], x2 [..., I2] with the same leading dims, weight [O, I1, I2],
-- bias [O] or nil. nn.Bilinear's forward.
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @treturn Tensor [..., O]
-- @usage local F = ember.nn.functional
-- print(F.bilinear(ember.randn(4, 2), ember.randn(4, 3), ember.randn(5, 2, 3)).shape)   --> ember.Size{4, 5}
function F.bilinear(x1, x2, weight, bias)
  local who = "nn.functional.bilinear"
  check_tensor(who, "weight", weight, true)
  if weight.ndim ~= 3 then errors.raise("%s: weight must be 3-d [out, in1, in2], got %s", who, shape_str(weight)) end
  check_optional(who, "bias", bias, { weight.shape[1] })
  local ok = ember.is_tensor(x1) and ember.is_tensor(x2) and x1.ndim >= 1 and x1.ndim == x2.ndim
    and x1.shape[x1.ndim] == weight.shape[2] and x2.shape[x2.ndim] == weight.shape[3]
  for i = 1, ok and x1.ndim - 1 or 0 do ok = ok and x1.shape[i] == x2.shape[i] end
  if not ok then
    local d = require("ember.nn._loss").describe
    errors.raise("%s: expected x1 [..., %d] and x2 [..., %d] with the same leading dims (the weight %s), got %s and %s",
      who, weight.shape[2], weight.shape[3], shape_str(weight), d(x1), d(x2))
  end
  return require("ember.nn.Bilinear")._bilinear(x1, x2, weight, bias)
end

--- log(sigmoid(x)) = -softplus(-x), as torch.nn.functional.logsigmoid (stable for large |x|).
-- @tparam Tensor x
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.logsigmoid(ember.tensor{0, -100}))   --> tensor([  -0.6931, -100.0000], shape=[2], dtype=float32, device=cpu)
function F.logsigmoid(x)
  check_tensor("nn.functional.logsigmoid", "input", x, true)
  return -ember.softplus(-x)
end

--- softmax(-x) along a dim, as torch.nn.functional.softmin: `F.softmin(x, dim)`
-- (ember.softmax's arguments: a dim is required, `{dim =, dtype =}` too).
-- @tparam Tensor x
-- @param ... dim, as ember.softmax's
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.softmin(ember.tensor{0, math.log(3)}, 1))   --> tensor([0.7500, 0.2500], shape=[2], dtype=float32, device=cpu)
function F.softmin(x, ...)
  check_tensor("nn.functional.softmin", "input", x, true)
  return ember.softmax(-x, ...)
end

local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

--- scale * elu(x, alpha) with PyTorch's constants (alpha 1.6733, scale 1.0507), as torch.nn.functional.selu.
-- @tparam Tensor x
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.selu(ember.tensor{1}):item())   --> 1.0507010221481
function F.selu(x)
  check_tensor("nn.functional.selu", "input", x, true)
  return ember.elu(x, SELU_ALPHA) * SELU_SCALE
end

--- max(0, x) + min(0, alpha (e^(x / alpha) - 1)), as torch.nn.functional.celu: `F.celu(x [, alpha=1])` (or {alpha =}).
-- @tparam Tensor x
-- @param[opt] ... alpha, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.celu(ember.tensor{2, -100}, 2))   --> tensor([ 2.0000, -2.0000], shape=[2], dtype=float32, device=cpu)
function F.celu(x, ...)
  local who = "nn.functional.celu"
  local o = args(who, { "alpha" }, ...)
  check_tensor(who, "input", x, true)
  local alpha = o.alpha or 1
  if type(alpha) ~= "number" or alpha == 0 then
    errors.raise("%s: alpha must be a nonzero number, got %s", who, tostring(alpha))
  end
  return ember.elu(x / alpha) * alpha
end

--- x - tanh(x), as torch.nn.functional.tanhshrink.
-- @tparam Tensor x
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.tanhshrink(ember.tensor{0}):item())   --> 0.0
function F.tanhshrink(x)
  check_tensor("nn.functional.tanhshrink", "input", x, true)
  return x - x:tanh()
end

--- x where x > threshold, value elsewhere, as torch.nn.functional.threshold: `F.threshold(x, threshold, value)`.
-- @tparam Tensor x
-- @number threshold
-- @number value
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.threshold(ember.tensor{1, 3}, 2, -1))   --> tensor([-1.0000, 3.0000], shape=[2], dtype=float32, device=cpu)
function F.threshold(x, threshold, value)
  local who = "nn.functional.threshold"
  check_tensor(who, "input", x, true)
  check_number(who, "threshold", threshold)
  check_number(who, "value", value)
  return ember.where(x:gt(threshold), x, ember.full_like(x, value))
end

--- x where |x| > lambd, 0 elsewhere, as torch.nn.functional.hardshrink: `F.hardshrink(x [, lambd=0.5])` (or {lambd =}).
-- @tparam Tensor x
-- @param[opt] ... lambd, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.hardshrink(ember.tensor{0.25, -2}))   --> tensor([ 0.0000, -2.0000], shape=[2], dtype=float32, device=cpu)
function F.hardshrink(x, ...)
  local who = "nn.functional.hardshrink"
  check_tensor(who, "input", x, true)
  local l = lambd_of(who, ...)
  return ember.where(x:abs():gt(l), x, ember.zeros_like(x))
end

--- x - lambd where x > lambd, x + lambd where x < -lambd, 0 between, as
-- torch.nn.functional.softshrink: `F.softshrink(x [, lambd=0.5])` (or {lambd =}).
-- @tparam Tensor x
-- @param[opt] ... lambd, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.softshrink(ember.tensor{0.25, -2}))   --> tensor([ 0.0000, -1.5000], shape=[2], dtype=float32, device=cpu)
function F.softshrink(x, ...)
  local who = "nn.functional.softshrink"
  check_tensor(who, "input", x, true)
  local l = lambd_of(who, ...)
  return ember.where(x:gt(l), x - l, ember.where(x:lt(-l), x + l, ember.zeros_like(x)))
end

--- Dropout, as torch.nn.functional.dropout: `F.dropout(x [, p=0.5,
-- training=true])` by position (`ember.dropout`, which this calls) or as
-- `{p =, training =}`.
-- @tparam Tensor x
-- @param[opt] ... p, training, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.dropout(ember.ones(4), {p = 0.5, training = false}))   --> tensor([1.0000, 1.0000, 1.0000, 1.0000], shape=[4], dtype=float32, device=cpu)
function F.dropout(x, ...)
  local o = args("nn.functional.dropout", { "p", "training" }, ...)
  return ember.dropout(x, o.p == nil and 0.5 or o.p, o.training ~= false)
end

--- x / max(||x||_p, eps) along a dim, as torch.nn.functional.normalize:
-- `F.normalize(x [, p=2, dim=2, eps=1e-12])` or an options table. The
-- default dim is torch's dim=1 (1-based: 2, the channels of [N, C, ...]);
-- `ember.normalize`, which this calls, defaults to the last dim.
-- @tparam Tensor x
-- @param[opt] ... p, dim, eps, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.normalize(ember.tensor{{3, 0}, {4, 1}}, {dim = 1}))   --> tensor([[0.6000, 0.0000], [0.8000, 1.0000]], shape=[2, 2], dtype=float32, device=cpu)
-- print(F.normalize(ember.tensor{{3, 4}}))                       --> tensor([[0.6000, 0.8000]], shape=[1, 2], dtype=float32, device=cpu)
function F.normalize(x, ...)
  local o = args("nn.functional.normalize", { "p", "dim", "eps" }, ...)
  return ember.normalize(x, { p = o.p, dim = o.dim or 2, eps = o.eps })
end

--- The cosine of the angle between x1 and x2 along a dim, as
-- torch.nn.functional.cosine_similarity: `F.cosine_similarity(x1, x2 [,
-- dim=2, eps=1e-8])` or an options table; dim 2 is torch's default dim=1
-- (`ember.cosine_similarity`, which this calls, defaults to the last dim).
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @param[opt] ... dim, eps, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.cosine_similarity(ember.tensor{{1, 0}}, ember.tensor{{1, 1}}):item())   --> 0.70710676908493
function F.cosine_similarity(x1, x2, ...)
  local o = args("nn.functional.cosine_similarity", { "dim", "eps" }, ...)
  return ember.cosine_similarity(x1, x2, { dim = o.dim or 2, eps = o.eps })
end

------------------------------------------------------------------------
-- torch's losses ember had no module for (each formula here only)

local function reduced(loss, reduction) return require("ember.nn._loss").reduce(loss, reduction) end

local function same_shapes(who, names, ...)
  local losses = require "ember.nn._loss"
  if not losses.same_shape(...) then
    local got = {}
    for i = 1, select("#", ...) do got[i] = losses.describe((select(i, ...))) end
    errors.raise("%s: expected %s of one shape, got %s", who, names, table.concat(got, ", "))
  end
end

--- log(1 + e^(-y x)) averaged, as torch.nn.functional.soft_margin_loss:
-- `F.soft_margin_loss(input, target [, {reduction = "mean"}])`, target 1 or -1.
-- @tparam Tensor input
-- @tparam Tensor target
-- @param[opt] ... reduction, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.soft_margin_loss(ember.tensor{0}, ember.tensor{1}):item())   --> 0.6931471824646
function F.soft_margin_loss(input, target, ...)
  local who = "nn.functional.soft_margin_loss"
  local o = args(who, { "reduction" }, ...)
  same_shapes(who, "input and target", input, target)
  return reduced(ember.softplus(-target:to(input.dtype) * input), check_reduction(who, o.reduction))
end

--- x where y = 1, max(0, margin - x) where y = -1, as
-- torch.nn.functional.hinge_embedding_loss: `F.hinge_embedding_loss(input,
-- target [, margin=1])`, {reduction =} by name.
-- @tparam Tensor input
-- @tparam Tensor target 1 or -1
-- @param[opt] ... margin, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.hinge_embedding_loss(ember.tensor{0.3, 0.4}, ember.tensor{1, -1}, {reduction = "sum"}):item())   --> 0.90000003576279
function F.hinge_embedding_loss(input, target, ...)
  local who = "nn.functional.hinge_embedding_loss"
  local o = args(who, { "margin", "reduction" }, ...)
  same_shapes(who, "input and target", input, target)
  local margin = o.margin == nil and 1 or o.margin
  check_number(who, "margin", margin)
  local zeros = ember.zeros_like(input)
  -- PyTorch's: both terms where the target is neither 1 nor -1
  local loss = ember.where(target:ne(1), (-input + margin):clamp_min(0), zeros) + ember.where(target:ne(-1), input, zeros)
  return reduced(loss, check_reduction(who, o.reduction))
end

--- 1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1,
-- as torch.nn.functional.cosine_embedding_loss: `F.cosine_embedding_loss(x1,
-- x2, y [, margin=0])`, {reduction =} by name; x1, x2 [N, D] (y [N]) or [D]
-- (y 0-d), the cosine along D with PyTorch's 1e-12 in each norm's square.
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @tparam Tensor y
-- @param[opt] ... margin, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.cosine_embedding_loss(ember.tensor{{1, 0}}, ember.tensor{{0, 1}}, ember.tensor{1}):item())   --> 1.0
function F.cosine_embedding_loss(x1, x2, y, ...)
  local who = "nn.functional.cosine_embedding_loss"
  local o = args(who, { "margin", "reduction" }, ...)
  same_shapes(who, "x1 and x2", x1, x2)
  local ok = (x1.ndim == 2 or x1.ndim == 1) and ember.is_tensor(y) and y.ndim == x1.ndim - 1
    and (x1.ndim == 1 or y.shape[1] == x1.shape[1])
  if not ok then
    errors.raise("%s: expected x1, x2 [N, D] with y [N], or [D] with a 0-d y, got %s, %s and %s", who,
      shape_str(x1), shape_str(x2), ember.is_tensor(y) and shape_str(y) or type(y))
  end
  local margin = o.margin == nil and 0 or o.margin
  check_number(who, "margin", margin)
  local d = x1.ndim
  local eps = 1e-12
  local cos = (x1 * x2):sum(d) / ((x1 * x1):sum(d) + eps):mul((x2 * x2):sum(d) + eps):sqrt()
  local zeros = ember.zeros_like(cos)
  local loss = ember.where(y:eq(1), -cos + 1, zeros) + ember.where(y:eq(-1), (cos - margin):clamp_min(0), zeros)
  return reduced(loss, check_reduction(who, o.reduction))
end

--- The Poisson negative log-likelihood, as torch.nn.functional.poisson_nll_loss:
-- `F.poisson_nll_loss(input, target [, log_input=true, full=false, eps=1e-8])`,
-- {reduction =} by name: e^input - target input (log_input), else
-- input - target log(input + eps); full adds Stirling's term
-- target log(target) - target + log(2 pi target) / 2 where target > 1.
-- @tparam Tensor input
-- @tparam Tensor target
-- @param[opt] ... log_input, full, eps, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.poisson_nll_loss(ember.tensor{0}, ember.tensor{2}):item())   --> 1.0
function F.poisson_nll_loss(input, target, ...)
  local who = "nn.functional.poisson_nll_loss"
  local o = args(who, { "log_input", "full", "eps", "reduction" }, ...)
  same_shapes(who, "input and target", input, target)
  check_bool(who, "log_input", o.log_input)
  check_bool(who, "full", o.full)
  local eps = o.eps == nil and 1e-8 or o.eps
  check_number(who, "eps", eps)
  local loss
  if o.log_input ~= false then loss = input:exp() - target * input else loss = input - target * (input + eps):log() end
  if o.full then
    -- (where target <= 1 the term is 0, its gradient too: PyTorch's masked_fill gives NaN at target = 0)
    local big = target:gt(1)
    local safe = ember.where(big, target, ember.ones_like(target))
    local stirling = safe * safe:log() - safe + (safe * (2 * math.pi)):log() * 0.5
    loss = loss + ember.where(big, stirling, ember.zeros_like(stirling))
  end
  return reduced(loss, check_reduction(who, o.reduction))
end

--- The multi-label one-versus-all loss, as
-- torch.nn.functional.multilabel_soft_margin_loss: input [N, C] (or [C]),
-- target of 0s and 1s the same shape: the mean over the classes of
-- -(y log sigmoid(x) + (1 - y) log sigmoid(-x)) (times weight [C] when
-- given), then reduced over N. `F.multilabel_soft_margin_loss(input,
-- target [, {weight =, reduction = "mean"}])`.
-- @tparam Tensor input
-- @tparam Tensor target
-- @param[opt] ... weight, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.multilabel_soft_margin_loss(ember.zeros(1, 2), ember.tensor{{1, 0}}):item())   --> 0.6931471824646
function F.multilabel_soft_margin_loss(input, target, ...)
  local who = "nn.functional.multilabel_soft_margin_loss"
  local o = args(who, { "weight", "reduction" }, ...)
  same_shapes(who, "input and target", input, target)
  local C = input.shape[input.ndim]
  check_optional(who, "weight", o.weight, { C })
  local y = target:to(input.dtype)
  local loss = -(y * F.logsigmoid(input) + (1 - y) * F.logsigmoid(-input))
  if o.weight then loss = loss * o.weight end
  return reduced(loss:mean(input.ndim), check_reduction(who, o.reduction))
end

--- The multi-class hinge loss, as torch.nn.functional.multi_margin_loss:
-- input [N, C] (or [C]), 1-based int64 targets [N] (or 0-d): for each
-- sample, the sum over the classes i other than y of max(0, margin -
-- x[y] + x[i])^p, divided by C (times weight[y] when given).
-- `F.multi_margin_loss(input, target [, p=1, margin=1, weight])`,
-- {reduction =} by name; p is 1 or 2.
-- @tparam Tensor input
-- @tparam Tensor target int64, 1-based
-- @param[opt] ... p, margin, weight, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.multi_margin_loss(ember.tensor{{0.1, 0.2, 0.4, 0.8}}, ember.tensor({4}, {dtype = "int64"})):item())   --> 0.32499998807907
function F.multi_margin_loss(input, target, ...)
  local who = "nn.functional.multi_margin_loss"
  local o = args(who, { "p", "margin", "weight", "reduction" }, ...)
  check_tensor(who, "input", input, true)
  check_tensor(who, "target", target)
  if target.dtype ~= "int64" then errors.raise("%s: target must be int64 class ids (1-based), got %s", who, target.dtype) end
  if not ((input.ndim == 2 and target.ndim == 1 and target.shape[1] == input.shape[1])
      or (input.ndim == 1 and target.ndim == 0)) then
    errors.raise("%s: expected input [N, C] with target [N], or [C] with a 0-d target, got %s and %s", who,
      shape_str(input), shape_str(target))
  end
  local p = o.p == nil and 1 or o.p
  if p ~= 1 and p ~= 2 then errors.raise("%s: p must be 1 or 2, got %s", who, tostring(p)) end
  local margin = o.margin == nil and 1 or o.margin
  check_number(who, "margin", margin)
  local C = input.shape[input.ndim]
  check_optional(who, "weight", o.weight, { C })
  if target:numel() > 0 and (target:min():item() < 1 or target:max():item() > C) then
    errors.raise("%s: target ids must lie in 1..%d (1-based), got %d..%d", who, C, target:min():item(),
      target:max():item())
  end
  local x = input.ndim == 1 and input:unsqueeze(1) or input
  local t = target:reshape({ -1, 1 })
  local xy = x:gather(2, t) -- [N, 1]
  local m = (-xy + x + margin):clamp_min(0)
  if p == 2 then m = m * m end
  if o.weight then m = m * o.weight:gather(1, t:reshape({ -1 })):view({ -1, 1 }) end
  -- the target's own class does not count
  local own = ember.one_hot(t:reshape({ -1 }), C):to("bool")
  local loss = ember.where(own, ember.zeros_like(m), m):sum(2) / C
  if input.ndim == 1 then loss = loss:squeeze(1) end
  return reduced(loss, check_reduction(who, o.reduction))
end

return F
