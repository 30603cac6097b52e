-- nn/_functional_extra.lua (internal): what nn.functional's functions
-- do, the part beside nn/_functional_impl.lua (which merges it): the
-- functions whose argument order differs from ember's, the modules' rules
-- as functions, torch's activations and losses ember had no module for,
-- the random ones.
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

-- ---- the rest: torch's argument order where ember's differs ------------

function M.embedding(ids, weight, ...)
  local who = "nn.functional.embedding"
  local o = args(who, { "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse" }, ...)
  check_tensor(who, "weight", weight)
  local pad = o.padding_idx
  if pad ~= nil and (math.type(pad) ~= "integer" or pad < 1 or pad > weight.shape[1]) then
    errors.raise("%s: padding_idx must be an id in 1..%d, got %s", who, weight.shape[1], tostring(pad))
  end
  local Embedding = require "ember.nn.Embedding"
  return Embedding._lookup(who, weight, ids, pad, Embedding._lookup_options(who, o))
end

function M.one_hot(labels, num_classes)
  if num_classes == nil or num_classes == -1 then
    check_tensor("nn.functional.one_hot", "labels", labels)
    num_classes = labels:numel() > 0 and labels:max():item() or 0
  end
  return ember.one_hot(labels, num_classes)
end

-- torch's cross_entropy: ember.cross_entropy's fused op, or, with a class weight
-- or class-probability targets (which it has not), nn.CrossEntropyLoss's rule
local CE_OPTIONS = { weight = true, ignore_index = true, label_smoothing = true, reduction = true }
function M.cross_entropy(logits, target, opts)
  local who = "nn.functional.cross_entropy"
  local info = ember.is_tensor(target) and ember.dtype_info(target.dtype)
  local soft = info and info.floating
  if opts ~= nil and type(opts) ~= "table" then
    errors.raise("%s: options must be a table {weight =, ignore_index =, label_smoothing =, reduction =}, got %s",
      who, type(opts))
  end
  if not soft and (opts == nil or opts.weight == nil) then return ember.cross_entropy(logits, target, opts) end
  for k in pairs(opts or {}) do
    if not CE_OPTIONS[k] then
      errors.raise("%s: unknown option '%s' (options are: ignore_index, label_smoothing, reduction, weight)", who,
        tostring(k))
    end
  end
  return require("ember.nn.CrossEntropyLoss")(opts)(logits, target)
end

function M.mse_loss(input, target, ...)
  local o = args("nn.functional.mse_loss", { "reduction" }, ...)
  return ember.mse_loss(input, target, o.reduction or "mean")
end

-- ---- the modules' rules as functions, and torch's activations ember had not ----

function M.softsign(x)
  check_tensor("nn.functional.softsign", "input", x, true)
  return require("ember.nn.Softsign")._softsign(x)
end

function M.prelu(x, weight)
  local who = "nn.functional.prelu"
  check_tensor(who, "input", x, true)
  check_tensor(who, "weight", weight, true)
  if weight.ndim > 1 then errors.raise("%s: weight must be 0-d or 1-d, got %s", who, shape_str(weight)) end
  return require("ember.nn.PReLU")._prelu(who, x, weight)
end

-- torch's `inplace` argument (the last, by position or name): true puts y into x
-- (a copy_, recorded by autograd as ember's in-place ops are), as F.relu_ and the like
local function inplace_if(who, o, x, y)
  check_bool(who, "inplace", o.inplace)
  if o.inplace then return x:copy_(y) end
  return y
end

function M.dropout2d(x, ...)
  local who = "nn.functional.dropout2d"
  local o = args(who, { "p", "training", "inplace" }, ...)
  local Dropout2d = require "ember.nn.Dropout2d"
  local p = Dropout2d._check_p(who, o.p == nil and 0.5 or o.p)
  check_bool(who, "training", o.training)
  return inplace_if(who, o, x, Dropout2d._dropout2d(who, x, p, o.training ~= false))
end

function M.pixel_shuffle(x, upscale_factor)
  factor("nn.functional.pixel_shuffle", "upscale_factor", upscale_factor)
  return require("ember.nn.PixelShuffle")._shuffle("nn.functional.pixel_shuffle", x, upscale_factor)
end

function M.pixel_unshuffle(x, downscale_factor)
  factor("nn.functional.pixel_unshuffle", "downscale_factor", downscale_factor)
  return require("ember.nn.PixelUnshuffle")._unshuffle("nn.functional.pixel_unshuffle", x, downscale_factor)
end

function M.pairwise_distance(x1, x2, ...)
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

function M.triplet_margin_loss(anchor, positive, negative, ...)
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

function M.margin_ranking_loss(x1, x2, y, ...)
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

function M.bilinear(x1, x2, weight, bias)
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

function M.logsigmoid(x)
  check_tensor("nn.functional.logsigmoid", "input", x, true)
  return -ember.softplus(-x)
end

function M.softmin(x, dim, opts, ...)
  check_tensor("nn.functional.softmin", "input", x, true)
  require("ember._errors").no_extra("nn.functional.softmin", { "dim", "opts" }, 2, dim, opts, ...)
  return ember.softmax(-x, dim, opts)
end

local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

function M.selu(x, ...)
  local who = "nn.functional.selu"
  local o = args(who, { "inplace" }, ...)
  check_tensor(who, "input", x, true)
  return inplace_if(who, o, x, ember.elu(x, SELU_ALPHA) * SELU_SCALE)
end

function M.celu(x, ...)
  local who = "nn.functional.celu"
  local o = args(who, { "alpha", "inplace" }, ...)
  check_tensor(who, "input", x, true)
  local alpha = o.alpha or 1
  if type(alpha) ~= "number" or alpha == 0 then
    errors.raise("%s: alpha must be a nonzero number, got %s", who, tostring(alpha))
  end
  return inplace_if(who, o, x, ember.elu(x / alpha) * alpha)
end

function M.tanhshrink(x)
  check_tensor("nn.functional.tanhshrink", "input", x, true)
  return x - x:tanh()
end

function M.threshold(x, threshold, value, inplace)
  local who = "nn.functional.threshold"
  check_tensor(who, "input", x, true)
  check_number(who, "threshold", threshold)
  check_number(who, "value", value)
  return inplace_if(who, { inplace = inplace }, x, ember.where(x:gt(threshold), x, ember.full_like(x, value)))
end

function M.hardshrink(x, ...)
  local who = "nn.functional.hardshrink"
  check_tensor(who, "input", x, true)
  local l = lambd_of(who, ...)
  return ember.where(x:abs():gt(l), x, ember.zeros_like(x))
end

function M.softshrink(x, ...)
  local who = "nn.functional.softshrink"
  check_tensor(who, "input", x, true)
  local l = lambd_of(who, ...)
  return ember.where(x:gt(l), x - l, ember.where(x:lt(-l), x + l, ember.zeros_like(x)))
end

function M.dropout(x, ...)
  local who = "nn.functional.dropout"
  local o = args(who, { "p", "training", "inplace" }, ...)
  return inplace_if(who, o, x, ember.dropout(x, o.p == nil and 0.5 or o.p, o.training ~= false))
end

function M.normalize(x, ...)
  local o = args("nn.functional.normalize", { "p", "dim", "eps" }, ...)
  return ember.normalize(x, { p = o.p, dim = o.dim or 2, eps = o.eps })
end

function M.cosine_similarity(x1, x2, ...)
  local o = args("nn.functional.cosine_similarity", { "dim", "eps" }, ...)
  return ember.cosine_similarity(x1, x2, { dim = o.dim or 2, eps = o.eps })
end

-- ---- torch's losses ember had no module for (each formula here only) ----

local function reduced(loss, reduction) return require("ember.nn._loss").reduce(loss, reduction) end

local function same_shapes(who, names, ...)
  local losses = require "ember.nn._loss"
  if not losses.same_shape(...) then
    local got = {}
    for i = 1, select("#", ...) do got[i] = losses.describe((select(i, ...))) end
    errors.raise("%s: expected %s of one shape, got %s", who, names, table.concat(got, ", "))
  end
end

function M.soft_margin_loss(input, target, ...)
  local who = "nn.functional.soft_margin_loss"
  local o = args(who, { "reduction" }, ...)
  same_shapes(who, "input and target", input, target)
  return reduced(ember.softplus(-target:to(input.dtype) * input), check_reduction(who, o.reduction))
end

function M.hinge_embedding_loss(input, target, ...)
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

function M.cosine_embedding_loss(x1, x2, y, ...)
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

function M.poisson_nll_loss(input, target, ...)
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

function M.multilabel_soft_margin_loss(input, target, ...)
  local who = "nn.functional.multilabel_soft_margin_loss"
  local o = args(who, { "weight", "reduction" }, ...)
  same_shapes(who, "input and target", input, target)
  local C = input.shape[input.ndim]
  check_optional(who, "weight", o.weight, { C })
  local y = target:to(input.dtype)
  local loss = -(y * M.logsigmoid(input) + (1 - y) * M.logsigmoid(-input))
  if o.weight then loss = loss * o.weight end
  return reduced(loss:mean(input.ndim), check_reduction(who, o.reduction))
end

function M.multi_margin_loss(input, target, ...)
  local who = "nn.functional.multi_margin_loss"
  local o = args(who, { "p", "margin", "weight", "reduction" }, ...)
  check_tensor(who, "input", input, true)
  check_tensor(who, "target", target)
  if target.dtype ~= "int64" then
    errors.raise("%s: target must be int64 class ids (1-based), got %s", who, target.dtype)
  end
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

-- torch's multilabel_margin_loss: for each sample, sum over its target classes j (the ids
-- before the first 0, PyTorch's -1; a repeated id counts again, as PyTorch's loop does) and
-- the non-target classes i of max(0, 1 - (x[j] - x[i])), over C. All pairs at once: [N, C, C].
function M.multilabel_margin_loss(input, target, ...)
  local who = "nn.functional.multilabel_margin_loss"
  local o = args(who, { "reduction" }, ...)
  check_tensor(who, "input", input, true)
  check_tensor(who, "target", target)
  if target.dtype ~= "int64" then
    errors.raise("%s: target must be int64 class ids (1-based, 0 ends the list: PyTorch's -1), got %s", who, target.dtype)
  end
  if not ((input.ndim == 2 or input.ndim == 1) and table.concat(target.shape, ",") == table.concat(input.shape, ",")) then
    errors.raise("%s: expected input [N, C] or [C] and a target of its shape, got %s and %s", who, shape_str(input),
      shape_str(target))
  end
  local reduction = check_reduction(who, o.reduction)
  local C = input.shape[input.ndim]
  if target:numel() > 0 and (target:min():item() < 0 or target:max():item() > C) then
    errors.raise("%s: target ids must lie in 1..%d (1-based; 0 ends a sample's list), got %d..%d", who, C,
      target:min():item(), target:max():item())
  end
  local x = input.ndim == 1 and input:unsqueeze(1) or input
  local t = input.ndim == 1 and target:unsqueeze(1) or target
  -- the ids before each row's first 0, counted per class
  local valid = t:eq(0):to("int64"):cumsum(2):eq(0)
  local count = (ember.one_hot(t:clamp_min(1), C) * valid:to("int64"):unsqueeze(3)):sum(2):to(x.dtype) -- [N, C]
  local other = count:eq(0):to(x.dtype) -- the non-target classes
  local hinge = (-x:unsqueeze(3) + x:unsqueeze(2) + 1):clamp_min(0) -- [N, j, i]
  local loss = (hinge * count:unsqueeze(3) * other:unsqueeze(2)):sum({ 2, 3 }) / C
  if input.ndim == 1 then loss = loss:squeeze(1) end
  return reduced(loss, reduction)
end

-- torch's fractional_max_pool2d/3d(input, kernel_size, output_size, output_ratio, return_indices,
-- _random_samples): the window starts drawn per plane (nn/_pool.lua's fractional).
local function fractional(nd, x, kernel_size, ...)
  local who = "nn.functional.fractional_max_pool" .. nd .. "d"
  local o = args(who, { "output_size", "output_ratio", "return_indices", "_random_samples" }, ...)
  check_tensor(who, "input", x, true)
  local sizes = nd == 2 and { "H", "W" } or { "D", "H", "W" }
  if x.ndim ~= nd + 1 and x.ndim ~= nd + 2 then
    errors.raise("%s: expected an input [N, C, %s] or [C, %s], got shape %s", who, table.concat(sizes, ", "),
      table.concat(sizes, ", "), shape_str(x))
  end
  local xb = x.ndim == nd + 1 and x:unsqueeze(1) or x
  local N, C = xb.shape[1], xb.shape[2]
  local n = { table.unpack(xb.shape, 3) }
  local what = nd == 2 and "a pair of them" or "a table of three"
  local k = conv.tuple(kernel_size, nd, 1)
  if not k then errors.raise("%s: kernel_size must be a positive integer or %s, got %s", who, what, conv.fmt(kernel_size)) end
  if (o.output_size == nil) == (o.output_ratio == nil) then
    errors.raise("%s: give output_size or output_ratio (one of them), as PyTorch", who)
  end
  local out = o.output_size and conv.tuple(o.output_size, nd, 1)
  if o.output_size and not out then
    errors.raise("%s: output_size must be a positive integer or %s, got %s", who, what, conv.fmt(o.output_size))
  end
  if o.output_ratio then
    local r = o.output_ratio
    if type(r) == "number" then r = nd == 2 and { r, r } or { r, r, r } end
    local ok = type(r) == "table" and #r == nd
    for i = 1, nd do ok = ok and type(r[i]) == "number" and r[i] > 0 and r[i] < 1 end
    if not ok then
      errors.raise("%s: output_ratio must be a number or %s in (0, 1), got %s", who, what, conv.fmt(o.output_ratio))
    end
    out = {}
    for i = 1, nd do out[i] = math.floor(n[i] * r[i]) end -- PyTorch's int(size * ratio)
  end
  for i = 1, nd do
    if out[i] < 1 or out[i] + k[i] - 1 > n[i] then
      errors.raise("%s: output_size %s and kernel_size %s do not fit an input of %s (each output + kernel - 1 "
        .. "must be at most the input's size)", who, conv.fmt(out), conv.fmt(k), table.concat(n, " x "))
    end
  end
  check_bool(who, "return_indices", o.return_indices)
  local samples = o._random_samples
  if samples ~= nil then
    check_tensor(who, "_random_samples", samples)
    if table.concat(samples.shape, ",") ~= ("%d,%d,%d"):format(N, C, nd) then
      errors.raise("%s: _random_samples must be [%d, %d, %d] (N, C, %d), got %s", who, N, C, nd, nd, shape_str(samples))
    end
  else
    samples = ember.rand({ N, C, nd }, { dtype = x.dtype, device = x.device })
  end
  -- PyTorch's samples: {u_w, u_h} in 2-d, {u_t, u_h, u_w} in 3-d
  local y, i = pool.fractional(xb, k, out, samples:double():totable(), nd == 2 and { 2, 1 } or { 1, 2, 3 })
  if x.ndim == nd + 1 then y, i = y:squeeze(1), i:squeeze(1) end
  if o.return_indices then return y, i end
  return y
end

function M.fractional_max_pool2d(x, kernel_size, ...) return fractional(2, x, kernel_size, ...) end
function M.fractional_max_pool3d(x, kernel_size, ...) return fractional(3, x, kernel_size, ...) end

-- ---- more of torch.nn.functional ---------------------------------------------

local BAG = { "offsets", "max_norm", "norm_type", "scale_grad_by_freq", "mode", "sparse", "per_sample_weights",
  "include_last_offset", "padding_idx" }

function M.embedding_bag(input, weight, ...)
  local who = "nn.functional.embedding_bag"
  local o = args(who, BAG, ...)
  for _, k in ipairs { "max_norm", "scale_grad_by_freq", "sparse" } do
    if o[k] then errors.raise("%s: %s is not supported", who, k) end
  end
  check_tensor(who, "weight", weight, true)
  if weight.ndim ~= 2 then
    errors.raise("%s: weight must be 2-d [num_embeddings, dim], got %s", who, shape_str(weight))
  end
  local mode = o.mode or "mean"
  if mode ~= "sum" and mode ~= "mean" and mode ~= "max" then
    errors.raise("%s: mode must be \"sum\", \"mean\" or \"max\", got %s", who, conv.fmt(mode))
  end
  check_bool(who, "include_last_offset", o.include_last_offset)
  local pad = o.padding_idx
  if pad ~= nil and (math.type(pad) ~= "integer" or pad < 1 or pad > weight.shape[1]) then
    errors.raise("%s: padding_idx must be an id in 1..%d, got %s", who, weight.shape[1], tostring(pad))
  end
  local offsets = o.offsets
  if type(offsets) == "table" and not ember.is_tensor(offsets) then
    for i, v in ipairs(offsets) do
      if math.type(v) ~= "integer" then
        errors.raise("%s: offsets must be integers (1-based positions), got %s at %d", who, tostring(v), i)
      end
    end
    offsets = ember.tensor(offsets, { dtype = "int64", device = weight.device })
  end
  local cfg = { weight = weight, num_embeddings = weight.shape[1], embedding_dim = weight.shape[2], mode = mode,
    padding_idx = pad, include_last_offset = o.include_last_offset == true }
  return require("ember.nn.EmbeddingBag")._bag(cfg, who, input, offsets, o.per_sample_weights)
end

local function channel_dropout(nd, x, ...)
  local who = "nn.functional.dropout" .. nd .. "d"
  local o = args(who, { "p", "training", "inplace" }, ...)
  local Dropout2d = require "ember.nn.Dropout2d"
  local p = Dropout2d._check_p(who, o.p == nil and 0.5 or o.p)
  check_bool(who, "training", o.training)
  return inplace_if(who, o, x, Dropout2d._dropout2d(who, x, p, o.training ~= false, nd))
end

function M.dropout1d(x, ...) return channel_dropout(1, x, ...) end
function M.dropout3d(x, ...) return channel_dropout(3, x, ...) end

local SELU_NEG = 1.7580993408473766 -- SELU's scale * alpha: where alpha dropout drops to

local function alpha_dropout_of(who, feature, x, o)
  check_tensor(who, "input", x, true)
  local p = o.p == nil and 0.5 or o.p
  if type(p) ~= "number" or p < 0 or p > 1 then
    errors.raise("%s: p must be a number in [0, 1], got %s", who, tostring(p))
  end
  check_bool(who, "training", o.training)
  if o.training == false or p == 0 then return x end
  if p == 1 then return x * 0 end
  local shape = {}
  for i = 1, x.ndim do shape[i] = (not feature or i <= 2) and x.shape[i] or 1 end
  if feature and x.ndim < 2 then errors.raise("%s: expected an input [N, C, *], got shape %s", who, shape_str(x)) end
  -- PyTorch's: keep with probability 1 - p, the dropped set to -SELU_NEG, then a x + b keeps mean and variance
  local keep = ember.dropout(ember.ones(shape, { dtype = x.dtype, device = x.device }), p, true) * (1 - p)
  local a = 1 / math.sqrt((SELU_NEG * SELU_NEG * p + 1) * (1 - p))
  return x * keep * a + (keep - 1) * (SELU_NEG * a) + SELU_NEG * a * p
end

local function alpha_dropout(who, feature, x, ...)
  local o = args(who, { "p", "training", "inplace" }, ...)
  return inplace_if(who, o, x, alpha_dropout_of(who, feature, x, o))
end

function M.alpha_dropout(x, ...) return alpha_dropout("nn.functional.alpha_dropout", false, x, ...) end
function M.feature_alpha_dropout(x, ...) return alpha_dropout("nn.functional.feature_alpha_dropout", true, x, ...) end

function M.channel_shuffle(x, groups)
  local who = "nn.functional.channel_shuffle"
  check_tensor(who, "input", x)
  if x.ndim < 3 then
    errors.raise("%s: expected an input [N, C, *] of at least 3 dims, got shape %s", who, shape_str(x))
  end
  factor(who, "groups", groups)
  local N, C = x.shape[1], x.shape[2]
  if C % groups ~= 0 then
    errors.raise("%s: the channels (%d, dim 2 of %s) must be divisible by groups=%d", who, C, shape_str(x), groups)
  end
  local rest = {}
  for i = 3, x.ndim do rest[#rest + 1] = x.shape[i] end
  return x:reshape({ N, groups, C // groups, table.unpack(rest) }):transpose(2, 3):reshape(x.shape)
end

function M.pdist(x, ...)
  local who = "nn.functional.pdist"
  local o = args(who, { "p" }, ...)
  check_tensor(who, "input", x, true)
  if x.ndim ~= 2 then errors.raise("%s: expected an input [N, M], got shape %s", who, shape_str(x)) end
  local p = o.p == nil and 2 or o.p
  check_number(who, "p", p, 0)
  local N = x.shape[1]
  local I, J = {}, {}
  for i = 1, N - 1 do
    for j = i + 1, N do I[#I + 1], J[#J + 1] = i, j end
  end
  if #I == 0 then return ember.zeros({ 0 }, { dtype = x.dtype, device = x.device }) end
  local io = { dtype = "int64", device = x.device }
  local d = x:index_select(1, ember.tensor(I, io)) - x:index_select(1, ember.tensor(J, io))
  return d:norm(p, 2)
end

function M.gaussian_nll_loss(input, target, var, ...)
  local who = "nn.functional.gaussian_nll_loss"
  local o = args(who, { "full", "eps", "reduction" }, ...)
  same_shapes(who, "input and target", input, target)
  check_tensor(who, "var", var, true)
  local iv = table.concat(input.shape, ",")
  local lead = table.concat(input.shape, ",", 1, input.ndim - 1)
  local vs = table.concat(var.shape, ",")
  if vs ~= iv then
    if vs == lead and var.ndim == input.ndim - 1 then
      var = var:unsqueeze(-1)
    elseif not (var.ndim == input.ndim and var.shape[var.ndim] == 1
        and table.concat(var.shape, ",", 1, var.ndim - 1) == lead) then
      errors.raise("%s: var must have the input's shape %s, or it with the last dim 1 or dropped, got %s", who,
        shape_str(input), shape_str(var))
    end
  end
  check_bool(who, "full", o.full)
  local eps = o.eps == nil and 1e-6 or o.eps
  check_number(who, "eps", eps, 0)
  local reduction = check_reduction(who, o.reduction)
  if var:numel() > 0 and var:min():item() < 0 then errors.raise("%s: var has negative entries", who) end
  -- clamped to eps in value, with the gradient of var itself (PyTorch clamps a clone under no_grad)
  local v = var + (var:detach():clamp_min(eps) - var:detach())
  local loss = (v:log() + (input - target) ^ 2 / v) * 0.5
  if o.full then loss = loss + 0.5 * math.log(2 * math.pi) end
  return reduced(loss, reduction)
end

function M.gumbel_softmax(logits, ...)
  local who = "nn.functional.gumbel_softmax"
  local o = args(who, { "tau", "hard", "eps", "dim" }, ...)
  check_tensor(who, "logits", logits, true)
  local tau = o.tau == nil and 1 or o.tau
  check_number(who, "tau", tau)
  if not (tau > 0) then errors.raise("%s: tau must be a number > 0, got %s", who, tostring(tau)) end
  check_bool(who, "hard", o.hard)
  local dim = o.dim or -1
  -- Gumbel(0, 1) noise: -log(E), E ~ Exp(1) = -log(U)
  local u = ember.rand_like(logits):clamp(1e-20, 1)
  local gumbels = -(-u:log()):log()
  local y = ember.softmax((logits + gumbels) / tau, dim)
  if not o.hard then return y end
  local idx = y:argmax(dim, true)
  local hard = ember.zeros_like(y):scatter(dim < 0 and y.ndim + 1 + dim or dim, idx, 1)
  return hard - y:detach() + y -- the straight-through estimator: hard values, soft gradients
end

function M.triplet_margin_with_distance_loss(anchor, positive, negative, ...)
  local who = "nn.functional.triplet_margin_with_distance_loss"
  local o = args(who, { "distance_function", "margin", "swap", "reduction" }, ...)
  local d = o.distance_function or function(a, b) return M.pairwise_distance(a, b) end
  if type(d) ~= "function" and not (type(d) == "table" and getmetatable(d) and getmetatable(d).__call) then
    errors.raise("%s: distance_function must be a function (a, b) -> distances, got %s", who, type(d))
  end
  local margin = o.margin == nil and 1 or o.margin
  check_number(who, "margin", margin)
  if not (margin > 0) then errors.raise("%s: margin must be > 0, got %s", who, tostring(margin)) end
  check_bool(who, "swap", o.swap)
  local reduction = check_reduction(who, o.reduction)
  local d_ap, d_an = d(anchor, positive), d(anchor, negative)
  if o.swap then d_an = ember.minimum(d_an, d(positive, negative)) end
  return reduced((d_ap - d_an + margin):clamp_min(0), reduction)
end

function M.rrelu(x, ...)
  local who = "nn.functional.rrelu"
  local o = args(who, { "lower", "upper", "training", "inplace" }, ...)
  check_tensor(who, "input", x, true)
  local lower, upper = o.lower or 1 / 8, o.upper or 1 / 3
  check_number(who, "lower", lower)
  check_number(who, "upper", upper)
  if lower > upper then errors.raise("%s: lower (%g) must not exceed upper (%g)", who, lower, upper) end
  check_bool(who, "training", o.training)
  if not o.training then return inplace_if(who, o, x, ember.leaky_relu(x, (lower + upper) / 2)) end
  -- a slope drawn from U(lower, upper) for each element (used where x < 0)
  local slope = ember.rand_like(x) * (upper - lower) + lower
  return inplace_if(who, o, x, ember.where(x:ge(0), x, x * slope))
end

-- ---- connectionist temporal classification --------------------------------------

local NEG = -1e30 -- log(0) for the recursion: finite, so unreachable states keep finite gradients

-- A list of integers from a tensor or a Lua list, for errors naming `what`.
local function int_list(who, what, v, n)
  if ember.is_tensor(v) then v = v:to("int64"):reshape({ -1 }):totable() end
  if type(v) ~= "table" or #v ~= n then
    errors.raise("%s: %s must be %d integers (a tensor or a table), got %s", who, what, n,
      type(v) == "table" and ("%d"):format(#v) or type(v))
  end
  for i = 1, n do
    if math.type(v[i]) ~= "integer" or v[i] < 0 then
      errors.raise("%s: %s must be non-negative integers, got %s at %d", who, what, tostring(v[i]), i)
    end
  end
  return v
end

function M.ctc_loss(log_probs, targets, input_lengths, target_lengths, ...)
  local who = "nn.functional.ctc_loss"
  local o = args(who, { "blank", "reduction", "zero_infinity" }, ...)
  check_tensor(who, "log_probs", log_probs, true)
  if log_probs.ndim == 2 then
    -- PyTorch's unbatched form: [T, C], the labels [S], the lengths 0-d (or one
    -- each); the loss is 0-d with every reduction
    check_tensor(who, "targets", targets)
    if targets.ndim ~= 1 then
      errors.raise("%s: unbatched log_probs [T, C] take 1-d targets [S], got %s", who, shape_str(targets))
    end
    local function one(v) return ember.is_tensor(v) and v.ndim == 0 and v:view(1) or v end
    return M.ctc_loss(log_probs:unsqueeze(2), targets:unsqueeze(1), one(input_lengths), one(target_lengths),
      ...):reshape({})
  end
  if log_probs.ndim ~= 3 then
    errors.raise("%s: log_probs must be [T, N, C] (log-softmax over C) or unbatched [T, C], got %s", who,
      shape_str(log_probs))
  end
  local T, N, C = log_probs.shape[1], log_probs.shape[2], log_probs.shape[3]
  local blank = o.blank == nil and 1 or o.blank
  if math.type(blank) ~= "integer" or blank < 1 or blank > C then
    errors.raise("%s: blank must be a class id in 1..%d (1-based), got %s", who, C, tostring(blank))
  end
  check_bool(who, "zero_infinity", o.zero_infinity)
  local reduction = check_reduction(who, o.reduction)
  local il = int_list(who, "input_lengths", input_lengths, N)
  local tl = int_list(who, "target_lengths", target_lengths, N)
  check_tensor(who, "targets", targets)
  -- each sample's labels (1-based class ids)
  local labels, flat = {}, targets:to("int64"):totable()
  if targets.ndim == 2 then
    for n = 1, N do labels[n] = { table.unpack(flat[n], 1, tl[n]) } end
  elseif targets.ndim == 1 then
    local at = 0
    for n = 1, N do
      labels[n] = { table.unpack(flat, at + 1, at + tl[n]) }
      at = at + tl[n]
    end
  else
    errors.raise("%s: targets must be [N, S] or the concatenated 1-d labels, got %s", who, shape_str(targets))
  end
  local S = 0
  for n = 1, N do
    if il[n] > T then errors.raise("%s: input_lengths[%d] = %d is longer than log_probs' %d steps", who, n, il[n], T) end
    if #labels[n] ~= tl[n] then
      errors.raise("%s: sample %d has %d labels, target_lengths says %d", who, n, #labels[n], tl[n])
    end
    for _, c in ipairs(labels[n]) do
      if c < 1 or c > C or c == blank then
        errors.raise("%s: labels must be class ids in 1..%d other than blank (%d), got %d", who, C, blank, c)
      end
    end
    S = math.max(S, tl[n])
  end
  -- the extended labels (blank, l1, blank, l2, ..., blank), padded with blanks,
  -- and where the skip from s - 2 is allowed (a label unlike the one before it)
  local L = 2 * S + 1
  local ext, skip = {}, {}
  for n = 1, N do
    ext[n], skip[n] = {}, {}
    for j = 1, L do
      local lab = j % 2 == 0 and labels[n][j // 2] or nil
      ext[n][j] = lab or blank
      skip[n][j] = lab ~= nil and j > 2 and labels[n][j // 2 - 1] ~= lab
    end
  end
  local io = { dtype = "int64", device = log_probs.device }
  local fo = { dtype = log_probs.dtype, device = log_probs.device }
  local ext_t = ember.tensor(ext, io)                           -- [N, L]
  local skip_t = ember.tensor(skip, { dtype = "bool", device = log_probs.device })
  local lp = log_probs:transpose(1, 2)                          -- [N, T, C]
  local emit = lp:gather(3, ext_t:view({ N, 1, L }):expand({ N, T, L })) -- [N, T, L]
  local neg = ember.full({ N, 1 }, NEG, fo)
  local neg2 = ember.full({ N, 2 }, NEG, fo)
  local start = ember.full({ N, L }, NEG, fo)
  local row = {}
  for j = 1, L do row[j] = j <= 2 end
  local first = ember.tensor({ row }, { dtype = "bool", device = log_probs.device }):expand({ N, L })
  local alpha = ember.where(first, emit:select(2, 1), start)
  local lens = ember.tensor(il, io):view({ N, 1 })
  for t = 2, T do
    local a1 = ember.cat({ neg, alpha:narrow(2, 1, L - 1) }, 2)
    local a2 = L > 2 and ember.cat({ neg2, alpha:narrow(2, 1, L - 2) }, 2) or ember.full({ N, L }, NEG, fo)
    a2 = ember.where(skip_t, a2, ember.full({ N, L }, NEG, fo))
    local nxt = ember.stack({ alpha, a1, a2 }, 3):logsumexp(3) + emit:select(2, t)
    alpha = ember.where(lens:ge(t), nxt, alpha)
  end
  -- the last label or the blank after it; an empty input has no path. An
  -- empty target ends at the first blank only (its second end is NEG: the
  -- same state counted twice would add log 2)
  local last, one_end = {}, {}
  for n = 1, N do last[n], one_end[n] = { 2 * tl[n] + 1, math.max(2 * tl[n], 1) }, { false, tl[n] == 0 } end
  local ends = alpha:gather(2, ember.tensor(last, io))
  ends = ember.where(ember.tensor(one_end, { dtype = "bool", device = log_probs.device }), ember.full({ N, 2 }, NEG, fo),
    ends)
  local ll = ends:logsumexp(2)
  local nll = -ll
  -- no path (ll is about NEG), or an empty input: its only path is the empty one
  local empty_in, empty_ok = {}, {}
  for n = 1, N do empty_in[n], empty_ok[n] = il[n] == 0, il[n] == 0 and tl[n] == 0 end
  local bo = { dtype = "bool", device = log_probs.device }
  empty_in, empty_ok = ember.tensor(empty_in, bo), ember.tensor(empty_ok, bo)
  nll = ember.where(empty_ok, ember.zeros_like(nll), nll)
  local impossible = ll:detach():lt(NEG / 2):logical_and(empty_ok:logical_not()):logical_or(
    empty_in:logical_and(empty_ok:logical_not()))
  if o.zero_infinity then
    nll = ember.where(impossible, ember.zeros_like(nll), nll)
  else
    nll = ember.where(impossible, ember.full_like(nll, math.huge), nll)
  end
  if reduction == "mean" then
    return (nll / ember.tensor(tl, fo):clamp_min(1)):mean()
  end
  return reduced(nll, reduction)
end

-- ---- in place -----------------------------------------------------------------

-- x itself, overwritten with fn(x, ...) (a copy_, recorded by autograd as
-- ember's in-place ops are; a leaf that requires grad is refused outside no_grad).
local function inplace(who, fn, x, ...)
  check_tensor(who, "input", x, true)
  return x:copy_(fn(x, ...))
end

function M.relu_(x) return inplace("nn.functional.relu_", ember.relu, x) end
function M.elu_(x, ...) return inplace("nn.functional.elu_", ember.elu, x, ...) end
function M.leaky_relu_(x, ...) return inplace("nn.functional.leaky_relu_", ember.leaky_relu, x, ...) end
function M.hardtanh_(x, ...) return inplace("nn.functional.hardtanh_", ember.hardtanh, x, ...) end
function M.selu_(x) return inplace("nn.functional.selu_", M.selu, x) end
function M.celu_(x, ...) return inplace("nn.functional.celu_", M.celu, x, ...) end
function M.threshold_(x, threshold, value) return inplace("nn.functional.threshold_", M.threshold, x, threshold, value) end
function M.rrelu_(x, ...) return inplace("nn.functional.rrelu_", M.rrelu, x, ...) end

return M
