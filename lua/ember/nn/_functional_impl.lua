-- nn/_functional_impl.lua (internal): what nn.functional's functions do
-- (the convolutions, pools, norms, resampling and sampling here; the
-- rest in nn/_functional_extra.lua, merged into this table).
-- lua/ember/nn/functional.lua is the public table, each function's
-- documentation and a call of the function of the same name here; this
-- file checks torch's arguments (nn/_functional_checks.lua's conventions)
-- and calls the rule the modules call too (nn/_conv.lua,
-- nn/_conv_transpose.lua, nn/_pool.lua, nn/_norm.lua, nn/_interpolate.lua,
-- the modules' own _functions), or, for what no module has (torch's
-- activations and losses ember had not), is the rule. Errors name the
-- function ("nn.functional.conv2d") at the caller's line.
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
local shape_str = errors.shape_str

local M = {}

-- ---- convolutions ------------------------------------------------------

local CONV = { "stride", "padding", "dilation", "groups" }

-- What both convolutions check of their weight and groups: its rank (its
-- first two dims named by `dims`), groups a positive integer dividing the
-- weight's first dim (whose channels `first` names). Returns groups and
-- the kernel's sizes.
local function weight_and_groups(who, nd, w, o, dims, first)
  check_tensor(who, "weight", w, true)
  if w.ndim ~= nd + 2 then
    errors.raise("%s: weight must be %d-d [%s, %s], got %s", who, nd + 2, dims, nd == 2 and "kh, kw" or "k",
      shape_str(w))
  end
  local g = o.groups or 1
  if math.type(g) ~= "integer" or g < 1 then
    errors.raise("%s: groups must be a positive integer, got %s", who, tostring(g))
  end
  if w.shape[1] % g ~= 0 then
    errors.raise("%s: the weight's %d %s channels (dim 1 of %s) must be divisible by groups=%d", who, w.shape[1],
      first, shape_str(w), g)
  end
  local k = {}
  for i = 1, nd do k[i] = w.shape[2 + i] end
  return g, k
end

local function convolution(nd, x, w, b, ...)
  local who = "nn.functional.conv" .. nd .. "d"
  if is_options(b) and select("#", ...) == 0 then return convolution(nd, x, w, nil, b) end
  local o = args(who, CONV, ...)
  check_tensor(who, "input", x)
  local g, k = weight_and_groups(who, nd, w, o, "out_channels, in_channels / groups", "output")
  check_optional(who, "bias", b, { w.shape[1] })
  local cfg = { weight = w, bias = b, groups = g, in_channels = w.shape[2] * g }
  conv.sizes(cfg, who, nd, k, o)
  if (x.ndim == nd + 1 or x.ndim == nd + 2) and x.shape[x.ndim - nd] ~= cfg.in_channels then
    errors.raise("%s: expected %d input channels (the weight %s times groups=%d), got %d in an input of shape %s", who,
      cfg.in_channels, shape_str(w), g, x.shape[x.ndim - nd], shape_str(x))
  end
  return conv.forward(cfg, who, nd, x, who)
end

function M.conv2d(x, weight, bias, ...)
  return convolution(2, x, weight, bias, ...)
end

function M.conv1d(x, weight, bias, ...)
  return convolution(1, x, weight, bias, ...)
end

local TCONV = { "stride", "padding", "output_padding", "groups", "dilation" }

local function transposed(nd, x, w, b, ...)
  local who = "nn.functional.conv_transpose" .. nd .. "d"
  if is_options(b) and select("#", ...) == 0 then return transposed(nd, x, w, nil, b) end
  local o = args(who, TCONV, ...)
  check_tensor(who, "input", x)
  local g, k = weight_and_groups(who, nd, w, o, "in_channels, out_channels / groups", "input")
  check_optional(who, "bias", b, { w.shape[2] * g })
  local cfg = { weight = w, bias = b, groups = g, in_channels = w.shape[1] }
  tconv.sizes(cfg, who, nd, k, o)
  return tconv.forward(cfg, who, nd, x, nil, who)
end

function M.conv_transpose2d(x, weight, bias, ...)
  return transposed(2, x, weight, bias, ...)
end

function M.conv_transpose1d(x, weight, bias, ...)
  return transposed(1, x, weight, bias, ...)
end

function M.conv_transpose3d(x, weight, bias, ...)
  return transposed(3, x, weight, bias, ...)
end

-- ---- pooling -----------------------------------------------------------

local function pooled(who, kind, nd, x, kernel_size, ...)
  local names = kind == "max" and { "stride", "padding", "dilation", "ceil_mode", "return_indices" }
    or nd == 2 and { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" }
    or { "stride", "padding", "ceil_mode", "count_include_pad" }
  local o = args(who, names, ...)
  check_tensor(who, "input", x, true)
  check_bool(who, "return_indices", o.return_indices)
  local indices = o.return_indices
  o.return_indices = nil -- the sizes only: the indices are taken here
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

-- torch's max_pool*_with_indices: the pool with return_indices = true
local function with_indices(nd, x, kernel_size, ...)
  local who = "nn.functional.max_pool" .. nd .. "d_with_indices"
  local o = args(who, { "stride", "padding", "dilation", "ceil_mode", "return_indices" }, ...)
  if o.return_indices == false then errors.raise("%s: return_indices is always true here", who) end
  o.return_indices = true
  return pooled(who, "max", nd, x, kernel_size, o)
end

function M.max_pool2d_with_indices(x, kernel_size, ...) return with_indices(2, x, kernel_size, ...) end
function M.max_pool1d_with_indices(x, kernel_size, ...) return with_indices(1, x, kernel_size, ...) end

function M.max_pool2d(x, kernel_size, ...)
  return pooled("nn.functional.max_pool2d", "max", 2, x, kernel_size, ...)
end

function M.avg_pool2d(x, kernel_size, ...)
  return pooled("nn.functional.avg_pool2d", "avg", 2, x, kernel_size, ...)
end

function M.max_pool1d(x, kernel_size, ...)
  return pooled("nn.functional.max_pool1d", "max", 1, x, kernel_size, ...)
end

function M.avg_pool1d(x, kernel_size, ...)
  return pooled("nn.functional.avg_pool1d", "avg", 1, x, kernel_size, ...)
end

local function unpooled(nd, x, indices, kernel_size, ...)
  local who = "nn.functional.max_unpool" .. nd .. "d"
  local o = args(who, { "stride", "padding", "output_size" }, ...)
  check_tensor(who, "input", x, true)
  check_tensor(who, "indices", indices)
  if indices.dtype ~= "int64" then errors.raise("%s: indices must be int64 (1-based), got %s", who, indices.dtype) end
  if x.ndim ~= nd + 1 and x.ndim ~= nd + 2 then
    errors.raise("%s: expected an input %s, got shape %s", who,
      ({ "[N, C, L] or [C, L]", "[N, C, H, W] or [C, H, W]", "[N, C, D, H, W] or [C, D, H, W]" })[nd], shape_str(x))
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
        ({ "", " or a pair of them", " or a table of three" })[nd], conv.fmt(f[3]))
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
  local shape = { table.unpack(x.shape, 1, x.ndim - nd) }
  for i = 1, nd do shape[#shape + 1] = out[i] end
  pool.check_shape_fits(who, shape)
  local plane = 1
  for i = 1, nd do plane = plane * out[i] end
  if indices:numel() > 0 and (indices:min():item() < 1 or indices:max():item() > plane) then
    errors.raise("%s: indices must lie in 1..%d (the output's %s plane), got %d..%d", who, plane,
      table.concat(out, " x "), indices:min():item(), indices:max():item())
  end
  if nd == 1 then
    local x4, back = pool.as_2d(x)
    return back(pool.unpool2d(x4, pool.as_2d(indices), { 1, out[1] }))
  end
  if nd == 3 then
    if x.ndim == 5 then return pool.unpool2d(x, indices, out) end
    return pool.unpool2d(x:unsqueeze(1), indices:unsqueeze(1), out):squeeze(1)
  end
  local xb, unbatch = pool.batch(x)
  return unbatch(pool.unpool2d(xb, pool.batch(indices), out))
end

function M.max_unpool2d(x, indices, kernel_size, ...)
  return unpooled(2, x, indices, kernel_size, ...)
end

function M.max_unpool1d(x, indices, kernel_size, ...)
  return unpooled(1, x, indices, kernel_size, ...)
end

function M.max_unpool3d(x, indices, kernel_size, ...)
  return unpooled(3, x, indices, kernel_size, ...)
end

local function adaptive(who, how, nd, x, output_size, ...)
  local o = args(who, { "return_indices" }, ...)
  local with_indices = how == "max" and o.return_indices
  check_tensor(who, "input", x, true)
  if x.ndim ~= nd + 1 and x.ndim ~= nd + 2 then
    errors.raise("%s: expected an input %s, got shape %s", who,
      nd == 2 and "[N, C, H, W] or [C, H, W]" or "[N, C, L] or [C, L]",
      shape_str(x))
  end
  pool.check_adaptive_input(who, x, nd, output_size)
  if nd == 1 then
    local s = pool.single(output_size)
    if not s then errors.raise("%s: output_size must be a positive integer, got %s", who, tostring(output_size)) end
    if not with_indices then return pool.adaptive_mean(x, x.ndim, s, how) end
    local xb = x.ndim == 2 and x:unsqueeze(1) or x
    local y, i = pool.adaptive_max(xb, { s }, true)
    if x.ndim == 2 then return y:squeeze(1), i:squeeze(1) end
    return y, i
  end
  local o2 = pool.output_pair(output_size)
  if not o2 then
    errors.raise("%s: output_size must be a positive integer or a pair of them (false: that dim's size, "
      .. "PyTorch's None), got %s",
      who, conv.fmt(output_size))
  end
  local xb, unbatch = pool.batch(x)
  if with_indices then
    local y, i = pool.adaptive_max(xb, o2, true)
    return unbatch(y), unbatch(i)
  end
  return unbatch(pool.adaptive2d(xb, o2, how))
end

function M.adaptive_avg_pool2d(x, output_size)
  return adaptive("nn.functional.adaptive_avg_pool2d", "mean", 2, x, output_size)
end

function M.adaptive_max_pool2d(x, output_size, ...)
  return adaptive("nn.functional.adaptive_max_pool2d", "max", 2, x, output_size, ...)
end

function M.adaptive_avg_pool1d(x, output_size)
  return adaptive("nn.functional.adaptive_avg_pool1d", "mean", 1, x, output_size)
end

function M.adaptive_max_pool1d(x, output_size, ...)
  return adaptive("nn.functional.adaptive_max_pool1d", "max", 1, x, output_size, ...)
end

-- ---- normalisation -----------------------------------------------------

function M.batch_norm(x, ...)
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

function M.instance_norm(x, ...)
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

function M.group_norm(x, num_groups, ...)
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
  return norm.group_norm(who, x, num_groups, o.weight, o.bias, eps)
end

function M.layer_norm(x, normalized_shape, ...)
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

function M.rms_norm(x, normalized_shape, ...)
  local who = "nn.functional.rms_norm"
  local o = args(who, { "weight", "eps" }, ...)
  check_tensor(who, "input", x, true)
  local ns = normalized(who, normalized_shape)
  check_affine(who, "weight", o.weight, ns)
  if o.eps ~= nil then check_number(who, "eps", o.eps, 0) end
  return norm.rms_norm(who, x, ns, o.weight, o.eps)
end

-- ---- resampling --------------------------------------------------------

function M.interpolate(x, ...)
  local who = "nn.functional.interpolate"
  return interp.resample(who, x, args(who, interp.OPTIONS, ...))
end

function M.upsample(x, ...)
  local who = "nn.functional.upsample"
  return interp.resample(who, x, args(who, interp.OPTIONS, ...))
end

function M.upsample_nearest(x, ...)
  local who = "nn.functional.upsample_nearest"
  local o = args(who, { "size", "scale_factor" }, ...)
  o.mode = "nearest"
  return interp.resample(who, x, o)
end

function M.upsample_bilinear(x, ...)
  local who = "nn.functional.upsample_bilinear"
  local o = args(who, { "size", "scale_factor" }, ...)
  o.mode, o.align_corners = "bilinear", true
  return interp.resample(who, x, o)
end

-- ---- sliding windows ---------------------------------------------------

local WINDOW = { "dilation", "padding", "stride" }

function M.unfold(x, kernel_size, ...)
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

function M.fold(x, output_size, kernel_size, ...)
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

-- ---- lp pooling, local response normalisation ------------------------------

local function lp_pool(nd, x, norm_type, kernel_size, ...)
  local who = "nn.functional.lp_pool" .. nd .. "d"
  local o = args(who, { "stride", "ceil_mode" }, ...)
  check_number(who, "norm_type", norm_type)
  if not (norm_type > 0) then errors.raise("%s: norm_type must be a number > 0, got %s", who, tostring(norm_type)) end
  local opts = { stride = o.stride, ceil_mode = o.ceil_mode }
  local pooled = nd == 2 and M.avg_pool2d(x ^ norm_type, kernel_size, opts)
    or M.avg_pool1d(x ^ norm_type, kernel_size, opts)
  local k = conv.tuple(kernel_size, nd, 1)
  local n = nd == 2 and k[1] * k[2] or k[1]
  -- PyTorch's: sign(out) * relu(|out|), times the window's size, to the 1/p
  return (pooled:sign() * pooled:abs():relu() * n) ^ (1 / norm_type)
end

function M.lp_pool2d(x, norm_type, kernel_size, ...) return lp_pool(2, x, norm_type, kernel_size, ...) end
function M.lp_pool1d(x, norm_type, kernel_size, ...) return lp_pool(1, x, norm_type, kernel_size, ...) end

function M.local_response_norm(x, size, ...)
  local who = "nn.functional.local_response_norm"
  local o = args(who, { "alpha", "beta", "k" }, ...)
  check_tensor(who, "input", x, true)
  if x.ndim < 3 then
    errors.raise("%s: expected an input [N, C, *] of at least 3 dims, got shape %s", who, shape_str(x))
  end
  if math.type(size) ~= "integer" or size < 1 then
    errors.raise("%s: size must be a positive integer, got %s", who, tostring(size))
  end
  local alpha, beta, k = o.alpha or 1e-4, o.beta or 0.75, o.k or 1
  check_number(who, "alpha", alpha)
  check_number(who, "beta", beta)
  check_number(who, "k", k)
  -- the mean of x^2 over the `size` channels around each (zeros past the ends count)
  local C = x.shape[2]
  local before, after = size // 2, (size - 1) // 2
  local shape = {}
  for i = 1, x.ndim do shape[i] = x.shape[i] end
  local parts = {}
  if before > 0 then shape[2] = before; parts[#parts + 1] = ember.zeros(shape, { dtype = x.dtype, device = x.device }) end
  parts[#parts + 1] = x * x
  if after > 0 then shape[2] = after; parts[#parts + 1] = ember.zeros(shape, { dtype = x.dtype, device = x.device }) end
  local sq = #parts == 1 and parts[1] or ember.cat(parts, 2)
  local sum = sq:narrow(2, 1, C)
  for j = 2, size do sum = sum + sq:narrow(2, j, C) end
  return x / ((sum / size) * alpha + k) ^ beta
end

-- ---- sampling at points --------------------------------------------------

function M.grid_sample(input, grid, ...)
  local who = "nn.functional.grid_sample"
  local o = args(who, { "mode", "padding_mode", "align_corners" }, ...)
  check_tensor(who, "input", input, true)
  check_tensor(who, "grid", grid, true)
  if input.ndim ~= 4 and input.ndim ~= 5 then
    errors.raise("%s: expected an input [N, C, H, W] or [N, C, D, H, W], got shape %s", who, shape_str(input))
  end
  local nd = input.ndim - 2
  if grid.ndim ~= input.ndim or grid.shape[grid.ndim] ~= nd or grid.shape[1] ~= input.shape[1] then
    errors.raise("%s: expected a grid %s with N = %d (the input's), got shape %s", who,
      nd == 2 and "[N, Ho, Wo, 2]" or "[N, Do, Ho, Wo, 3]", input.shape[1], shape_str(grid))
  end
  local mode, padding = o.mode or "bilinear", o.padding_mode or "zeros"
  if mode ~= "bilinear" and mode ~= "nearest" and (mode ~= "bicubic" or nd ~= 2) then
    -- PyTorch's "bilinear" is trilinear for a volume; its "bicubic" is 4-d only
    errors.raise("%s: mode must be \"bilinear\", \"nearest\" or (a 4-d input only) \"bicubic\", got %s", who,
      conv.fmt(mode))
  end
  if padding ~= "zeros" and padding ~= "border" and padding ~= "reflection" then
    errors.raise("%s: padding_mode must be \"zeros\", \"border\" or \"reflection\", got %s", who, conv.fmt(padding))
  end
  check_bool(who, "align_corners", o.align_corners)
  if grid.dtype ~= input.dtype then
    errors.raise("%s: the grid is %s but the input is %s (convert one)", who, grid.dtype, input.dtype)
  end
  return require("ember.nn._grid").grid_sample(input, grid, mode, padding, o.align_corners == true)
end

function M.affine_grid(theta, size, ...)
  local who = "nn.functional.affine_grid"
  local o = args(who, { "align_corners" }, ...)
  check_tensor(who, "theta", theta, true)
  if type(size) == "userdata" and size.totable then size = size:totable() end
  local ok = type(size) == "table" and (#size == 4 or #size == 5)
  for i = 1, ok and #size or 0 do ok = ok and math.type(size[i]) == "integer" and size[i] > 0 end
  if not ok then
    errors.raise("%s: size must be the output's {N, C, H, W} or {N, C, D, H, W} (positive integers), got %s",
      who, conv.fmt(size))
  end
  local nd = #size - 2
  if theta.ndim ~= 3 or theta.shape[2] ~= nd or theta.shape[3] ~= nd + 1 or theta.shape[1] ~= size[1] then
    errors.raise("%s: expected theta [N, %d, %d] with N = %d (size's), got shape %s", who, nd, nd + 1, size[1],
      shape_str(theta))
  end
  check_bool(who, "align_corners", o.align_corners)
  return require("ember.nn._grid").affine_grid(theta, size[1], { table.unpack(size, 3) }, o.align_corners == true)
end

-- ---- 3-d: volumes [N, C, D, H, W] ---------------------------------------------

local function batch5(who, x)
  check_tensor(who, "input", x, true)
  if x.ndim ~= 4 and x.ndim ~= 5 then
    errors.raise("%s: expected an input [N, C, D, H, W] or [C, D, H, W], got shape %s", who, shape_str(x))
  end
  if x.ndim == 4 then return x:unsqueeze(1), function(y) return y:squeeze(1) end end
  return x, function(y) return y end
end

-- who: the caller named in errors (nn.Conv3d's forward names itself)
local function conv3d(who, x, w, b, ...)
  if is_options(b) and select("#", ...) == 0 then return conv3d(who, x, w, nil, b) end
  local o = args(who, CONV, ...)
  local xb, unbatch = batch5(who, x)
  check_tensor(who, "weight", w, true)
  if w.ndim ~= 5 then
    errors.raise("%s: weight must be 5-d [out_channels, in_channels / groups, kd, kh, kw], got %s", who, shape_str(w))
  end
  local g = o.groups or 1
  if math.type(g) ~= "integer" or g < 1 then errors.raise("%s: groups must be a positive integer, got %s", who, tostring(g)) end
  if w.shape[1] % g ~= 0 then
    errors.raise("%s: the weight's %d output channels (dim 1 of %s) must be divisible by groups=%d", who, w.shape[1],
      shape_str(w), g)
  end
  check_optional(who, "bias", b, { w.shape[1] })
  if xb.shape[2] ~= w.shape[2] * g then
    errors.raise("%s: expected %d input channels (the weight %s times groups=%d), got %d in an input of shape %s", who,
      w.shape[2] * g, shape_str(w), g, xb.shape[2], shape_str(x))
  end
  if w.dtype ~= xb.dtype and not ember.autocast.enabled() then
    errors.raise("%s: the input is %s but the weight is %s (convert one)", who, xb.dtype, w.dtype)
  end
  if b ~= nil and b.dtype ~= w.dtype and not ember.autocast.enabled() then
    errors.raise("%s: the bias is %s but the weight is %s (convert one: bias:to(\"%s\"))", who, b.dtype, w.dtype,
      w.dtype)
  end
  local cfg = {}
  conv.sizes(cfg, who, 3, { w.shape[3], w.shape[4], w.shape[5] }, o)
  local p = cfg._pads
  for i = 1, 3 do
    local n, k, dl = xb.shape[2 + i], cfg.kernel_size[i], cfg.dilation[i]
    if n + p[2 * i - 1] + p[2 * i] < dl * (k - 1) + 1 then
      errors.raise("%s: the kernel (size %d, dilation %d) is larger than the padded input (%d + %d) along dim %d of "
        .. "shape %s", who, k, dl, n, p[2 * i - 1] + p[2 * i], x.ndim - 3 + i, shape_str(x))
    end
  end
  return unbatch(conv.conv3d(xb, w, b, cfg.stride, p, cfg.dilation, g, cfg.route))
end

function M.conv3d(x, w, b, ...) return conv3d("nn.functional.conv3d", x, w, b, ...) end
M._conv3d = conv3d

local POOL3 = {
  max = { "stride", "padding", "dilation", "ceil_mode", "return_indices" },
  avg = { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" },
}

-- who: the caller named in errors (nn.MaxPool3d's and nn.AvgPool3d's forwards name themselves)
local function pool3(who, how, x, kernel_size, ...)
  local o = args(who, POOL3[how], ...)
  check_bool(who, "return_indices", o.return_indices)
  local xb, unbatch = batch5(who, x)
  local cfg = { kernel_size = conv.tuple(kernel_size, 3, 1) }
  cfg.stride = o.stride == nil and cfg.kernel_size or conv.tuple(o.stride, 3, 1)
  cfg.padding = conv.tuple(o.padding or 0, 3, 0)
  cfg.dilation = conv.tuple(o.dilation or 1, 3, 1)
  for _, f in ipairs { { "kernel_size", kernel_size }, { "stride", o.stride }, { "padding", o.padding },
    { "dilation", o.dilation } } do
    if not cfg[f[1]] then
      errors.raise("%s: %s must be a %s integer or a table of three, got %s", who, f[1],
        f[1] == "padding" and "non-negative" or "positive", conv.fmt(f[2]))
    end
  end
  check_bool(who, "ceil_mode", o.ceil_mode)
  check_bool(who, "count_include_pad", o.count_include_pad)
  cfg.ceil_mode, cfg.count_include_pad = o.ceil_mode == true, o.count_include_pad ~= false
  local dv = o.divisor_override
  if dv ~= nil and (math.type(dv) ~= "integer" or dv < 1) then
    errors.raise("%s: divisor_override must be a positive integer, got %s", who, tostring(dv))
  end
  cfg.divisor_override = dv
  for i = 1, 3 do
    local eff = cfg.dilation[i] * (cfg.kernel_size[i] - 1) + 1
    if cfg.padding[i] * 2 > eff then
      errors.raise("%s: padding %d is more than half the kernel (%d); PyTorch refuses it too", who, cfg.padding[i], eff)
    end
    local n = xb.shape[2 + i]
    if pool.out_size(n, cfg.kernel_size[i], cfg.stride[i], cfg.padding[i], cfg.dilation[i], cfg.ceil_mode) < 1 then
      errors.raise("%s: the window (kernel %d, dilation %d) is larger than the padded input (%d + 2 * %d) along dim %d "
        .. "of shape %s", who, cfg.kernel_size[i], cfg.dilation[i], n, cfg.padding[i], x.ndim - 3 + i, shape_str(x))
    end
  end
  if o.return_indices then
    local y, i = pool.pool3d(how, cfg, xb, true)
    return unbatch(y), unbatch(i)
  end
  return unbatch(pool.pool3d(how, cfg, xb))
end

function M.max_pool3d(x, kernel_size, ...) return pool3("nn.functional.max_pool3d", "max", x, kernel_size, ...) end
function M.avg_pool3d(x, kernel_size, ...) return pool3("nn.functional.avg_pool3d", "avg", x, kernel_size, ...) end
M._pool3d = pool3

-- torch's max_pool3d_with_indices: max_pool3d with return_indices = true
function M.max_pool3d_with_indices(x, kernel_size, ...)
  local who = "nn.functional.max_pool3d_with_indices"
  local o = args(who, POOL3.max, ...)
  if o.return_indices == false then errors.raise("%s: return_indices is always true here", who) end
  local opts = { return_indices = true }
  for k, v in pairs(o) do if k ~= "return_indices" then opts[k] = v end end
  return pool3(who, "max", x, kernel_size, opts)
end

-- who: the caller named in errors (the adaptive 3-d modules' forwards name themselves)
local function adaptive3(who, how, x, output_size, ...)
  local o = args(who, { "return_indices" }, ...)
  local xb, unbatch = batch5(who, x)
  pool.check_adaptive_input(who, x, 3, output_size)
  local out = math.type(output_size) == "integer" and { output_size, output_size, output_size } or output_size
  local ok = type(out) == "table" and (out[3] ~= nil)
  for i = 1, ok and 3 or 0 do
    local e = out[i]
    ok = ok and (e == false or e == nil or (math.type(e) == "integer" and e > 0))
  end
  if not ok then
    errors.raise("%s: output_size must be a positive integer or a table of three (false: that dim's size, PyTorch's "
      .. "None), got %s", who, conv.fmt(output_size))
  end
  if how == "max" then
    local y, i = pool.adaptive_max(xb, { out[1] or false, out[2] or false, out[3] or false }, o.return_indices)
    if o.return_indices then return unbatch(y), unbatch(i) end
    return unbatch(y)
  end
  local y = xb
  for i = 1, 3 do y = pool.adaptive_mean(y, 2 + i, out[i] or xb.shape[2 + i], how) end
  return unbatch(y)
end

function M.adaptive_avg_pool3d(x, output_size)
  return adaptive3("nn.functional.adaptive_avg_pool3d", "mean", x, output_size)
end
function M.adaptive_max_pool3d(x, output_size, ...)
  return adaptive3("nn.functional.adaptive_max_pool3d", "max", x, output_size, ...)
end
M._adaptive3d = adaptive3

-- The functions whose kernels allocate what the arguments ask for (a padding of 10^6, an
-- output of 10^10 elements): the kernel's refusal is raised at the user's line, not in here.
for _, name in ipairs { "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
  "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "max_unpool1d", "max_unpool2d", "max_unpool3d" } do
  M[name] = errors.wrap(M[name])
end

-- the rest of nn.functional (activations, losses, the modules' rules as functions); the
-- core ops they call (ember.mse_loss's shapes, ember.one_hot's labels) raise at the user's line
for k, v in pairs(require "ember.nn._functional_extra") do M[k] = errors.wrap(v) end

return M
