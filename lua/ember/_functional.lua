-- ember/_functional.lua: what torch.nn.functional has and ember composes
-- from core ops (so autograd, every dtype and every backend come for
-- free): softplus, leaky_relu, binary_cross_entropy(_with_logits),
-- nll_loss, l1_loss, smooth_l1_loss, normalize, cosine_similarity and pad,
-- as functions (ember.softplus(x)) and, the one-tensor ones, as tensor
-- methods; and, as functions only (PyTorch has no such methods either),
-- hardtanh, relu6, hardswish, hardsigmoid, mish, glu, kl_div and huber_loss.
-- The nn modules (nn.Softplus, nn.LeakyReLU, the BCE, NLL, L1 and
-- SmoothL1 losses) call these: each formula is written here only.
-- init.lua loads it; it loads ember/_functional_more.lua (torch's tensor
-- functions: lerp, remainder, diag, unique, ...). Errors are raised at the
-- caller's line.
local core = require "ember.core"
local helpers = require "ember._helpers"
local shape_str = require("ember._errors").shape_str

local fail, check_tensor, set = helpers.fail, helpers.check_tensor, helpers.set
-- arguments past a function's own are an error naming it (torch's inplace too: ember.relu's rule)
local no_extra = require("ember._errors").no_extra

local function check_opts(op, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail(op, "options must be a table, got %s", type(opts)) end
  for k in pairs(opts) do
    if not known[k] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      fail(op, "unknown option '%s' (expected %s)", tostring(k), table.concat(names, ", "))
    end
  end
  return opts
end

-- log1p(e^z) where z <= threshold, z above it (the function is z to
-- within e^-threshold there). e^min(z, threshold) never overflows, so the
-- branch that where() drops has a finite gradient (a zero times an inf
-- would be NaN); at z = 0 the derivative is 1/2, as it should be; log1p
-- keeps e^z where it is far below 1 (log(1 + e^-50) would be 0).
local function softplus_of(z, threshold)
  return core.where(z:gt(threshold), z, z:clamp(-math.huge, threshold):exp():log1p())
end

-- ember.softplus(x [, {beta = 1, threshold = 20}]): log(1 + e^(beta x)) / beta,
-- x itself where beta x > threshold (torch.nn.functional.softplus; its
-- positional softplus(x, beta, threshold) too).
set("softplus", function(x, opts, threshold, ...)
  check_tensor("softplus", x)
  no_extra("ember.softplus", type(opts) == "table" and { "opts" } or { "beta", "threshold" }, 2, opts, threshold, ...)
  if type(opts) == "number" then opts = { beta = opts, threshold = threshold } end
  opts = check_opts("softplus", opts, { beta = true, threshold = true })
  local beta, threshold = opts.beta or 1, opts.threshold or 20
  if type(beta) ~= "number" or not (beta > 0) then fail("softplus", "beta must be a number > 0, got %s", tostring(beta)) end
  if type(threshold) ~= "number" then fail("softplus", "threshold must be a number, got %s", tostring(threshold)) end
  if beta == 1 then return softplus_of(x, threshold) end
  return softplus_of(x * beta, threshold) / beta
end, true)

-- ember.leaky_relu(x [, negative_slope = 0.01]): x where x > 0, slope * x
-- elsewhere (torch.nn.functional.leaky_relu; the derivative at 0 is the
-- slope); also by name, {negative_slope =}, as torch's keyword.
set("leaky_relu", function(x, slope, ...)
  check_tensor("leaky_relu", x)
  no_extra("ember.leaky_relu", { "negative_slope" }, 2, slope, ...)
  if type(slope) == "table" then slope = check_opts("leaky_relu", slope, { negative_slope = true }).negative_slope end
  slope = slope or 0.01
  if type(slope) ~= "number" then fail("leaky_relu", "negative_slope must be a number, got %s", type(slope)) end
  return core.where(x:gt(0), x, x * slope)
end, true)

-- A loss's reductions, and what each does to the per-element loss: the
-- one rule for every loss here and in nn (nn/_loss.lua passes both on).
local REDUCTIONS = { mean = true, sum = true, none = true }

local function reduce(loss, reduction)
  if reduction == "mean" then return loss:mean() end
  if reduction == "sum" then return loss:sum() end
  return loss
end

-- The options both binary losses take: weight (broadcast to the input),
-- reduction, and for the logits form pos_weight.
local function binary_opts(op, input, target, opts, known)
  check_tensor(op, input, "input")
  check_tensor(op, target, "target")
  opts = check_opts(op, opts, known)
  local red = opts.reduction or "mean"
  if not REDUCTIONS[red] then fail(op, "reduction must be \"mean\", \"sum\" or \"none\", got %s", tostring(red)) end
  local same = input:dim() == target:dim()
  for i = 1, input:dim() do same = same and input:size(i) == target:size(i) end
  if not same then
    fail(op, "target shape %s must equal input shape %s", shape_str(target), shape_str(input))
  end
  if opts.weight ~= nil then check_tensor(op, opts.weight, "weight") end
  if opts.pos_weight ~= nil then check_tensor(op, opts.pos_weight, "pos_weight") end
  return opts, red
end

-- ember.binary_cross_entropy_with_logits(input, target [, {weight =,
-- pos_weight =, reduction = "mean"}]): -[p y log s(x) + (1 - y) log(1 - s(x))]
-- with s the sigmoid and p the pos_weight (torch's), computed as
-- (1 - y) x + (1 + (p - 1) y) softplus(-x), which neither overflows nor
-- loses the gradient at x = 0.
set("binary_cross_entropy_with_logits", function(input, target, opts)
  local op = "binary_cross_entropy_with_logits"
  local o, red = binary_opts(op, input, target, opts, { weight = true, pos_weight = true, reduction = true })
  local target_f = target:to(input.dtype)
  local sp = softplus_of(-input, 20)
  local loss
  if o.pos_weight then
    loss = (1 - target_f) * input + (target_f * (o.pos_weight - 1) + 1) * sp
  else
    loss = (1 - target_f) * input + sp
  end
  if o.weight then loss = loss * o.weight end
  return reduce(loss, red)
end)

-- ember.binary_cross_entropy(input, target [, {weight =, reduction = "mean"}]):
-- -[y log p + (1 - y) log(1 - p)] for probabilities p, each log at least
-- -100 as PyTorch's (so p = 0 or 1 gives a finite loss). p is first
-- raised to float32's smallest subnormal, 2^-149 (log -103.3), so that the
-- log's gradient stays finite too (0 / 0 would be NaN); bfloat16 computes
-- in float32, which has that subnormal.
local TINY = 2.0 ^ -149
set("binary_cross_entropy", function(input, target, opts)
  local op = "binary_cross_entropy"
  local o, red = binary_opts(op, input, target, opts, { weight = true, reduction = true })
  -- probabilities outside [0, 1] give a meaningless (even negative) loss:
  -- refused, as PyTorch does (one reduction and a read of its result)
  if input:numel() > 0 and input:lt(0):logical_or(input:gt(1)):any():item() then
    fail(op, "input must hold probabilities in [0, 1] (apply sigmoid first, or use binary_cross_entropy_with_logits), "
      .. "got values from %g to %g", input:min():item(), input:max():item())
  end
  local p = input.dtype == "bfloat16" and input:float() or input
  local y = target:to(p.dtype)
  local log_p = p:clamp(TINY, math.huge):log():clamp(-100, math.huge)
  local log_1p = (1 - p):clamp(TINY, math.huge):log():clamp(-100, math.huge)
  local loss = -(y * log_p + (1 - y) * log_1p)
  if o.weight then loss = loss * o.weight end
  return reduce(loss, red)
end)

-- ember.normalize(x [, {p = 2, dim = -1, eps = 1e-12}]): x / max(||x||_p, eps)
-- along dim (torch.nn.functional.normalize).
set("normalize", function(x, opts)
  check_tensor("normalize", x)
  opts = check_opts("normalize", opts, { p = true, dim = true, eps = true })
  local p, dim, eps = opts.p or 2, opts.dim or -1, opts.eps or 1e-12
  if type(eps) ~= "number" or not (eps >= 0) then fail("normalize", "eps must be a number >= 0, got %s", tostring(eps)) end
  return x / x:norm(p, dim, true):clamp(eps, math.huge)
end, true)

-- ember.cosine_similarity(a, b [, {dim = -1, eps = 1e-8}]): the cosine of
-- the angle between a and b along dim (broadcasting), each normalised first
-- with its norm at least eps (torch.nn.functional.cosine_similarity).
set("cosine_similarity", function(a, b, opts)
  check_tensor("cosine_similarity", a, "argument 1")
  check_tensor("cosine_similarity", b, "argument 2")
  opts = check_opts("cosine_similarity", opts, { dim = true, eps = true })
  local dim, eps = opts.dim or -1, opts.eps or 1e-8
  if type(eps) ~= "number" or not (eps >= 0) then
    fail("cosine_similarity", "eps must be a number >= 0, got %s", tostring(eps))
  end
  -- broadcast first, as torch's: a size-1 dim of one input along `dim` is
  -- the other's length there, not a vector of one element
  if shape_str(a) ~= shape_str(b) then a, b = table.unpack(core.broadcast_tensors(a, b)) end
  local na = a:norm(2, dim, true):clamp(eps, math.huge)
  local nb = b:norm(2, dim, true):clamp(eps, math.huge)
  return ((a / na) * (b / nb)):sum(dim)
end)

-- ember.nll_loss(input, target [, {weight =, ignore_index =, reduction = "mean"}]):
-- the negative log-likelihood of log-probabilities input [N, C] at the
-- 1-based int64 class ids target [N] (torch.nn.functional.nll_loss; Torch7's
-- ClassNLLCriterion): -w[y] input[i, y], averaged with the weights w[y] of the
-- counted rows for "mean"; rows whose target is ignore_index (default -100,
-- PyTorch's) count nothing.
set("nll_loss", function(input, target, opts)
  local op = "nll_loss"
  check_tensor(op, input, "input")
  check_tensor(op, target, "target")
  opts = check_opts(op, opts, { weight = true, ignore_index = true, reduction = true })
  local red = opts.reduction or "mean"
  if not REDUCTIONS[red] then fail(op, "reduction must be \"mean\", \"sum\" or \"none\", got %s", tostring(red)) end
  -- PyTorch's other layouts: unbatched [C] with a 0-d target, and [N, C, d1, ...]
  -- with [N, d1, ...] (the classes in dim 2): as rows of [*, C], "none" shaped as target
  local nd, td = input:dim(), target:dim()
  local ok_shape = nd >= 1 and td == math.max(nd - 1, 0) and (nd == 1 or target:size(1) == input:size(1))
  for i = 3, nd do ok_shape = ok_shape and target:size(i - 1) == input:size(i) end
  if not ok_shape or nd == 0 then
    fail(op, "expected input [N, C] and target [N] (or [C] and a 0-d target, or [N, C, d1, ...] and [N, d1, ...]), "
      .. "got %s and %s", shape_str(input), shape_str(target))
  end
  if nd ~= 2 then
    local C = input:size(nd == 1 and 1 or 2)
    local rows = nd == 1 and input:view(1, C) or input:movedim(2, nd):reshape(-1, C)
    local loss = core.nll_loss(rows, target:reshape(-1), opts)
    if red == "none" then return loss:reshape(target.shape) end
    return loss
  end
  if target.dtype ~= "int64" then fail(op, "target must be int64 class ids (1-based), got %s", target.dtype) end
  local C = input:size(2)
  local keep = core.ones(target.shape, { dtype = input.dtype, device = input.device })
  local ids = target
  -- PyTorch's default ignore_index, -100 (Hugging Face's label padding), as
  -- ember.cross_entropy's: no 1-based class id is negative
  local ignore_index = opts.ignore_index == nil and -100 or opts.ignore_index
  if opts.ignore_index ~= nil or (target:numel() > 0 and target:min():item() == -100) then
    local ignored = target:eq(ignore_index)
    keep = keep:masked_fill(ignored, 0)
    ids = target:masked_fill(ignored, 1) -- any valid id: its term is multiplied by 0
  end
  if ids:numel() > 0 and (ids:min():item() < 1 or ids:max():item() > C) then
    fail(op, "target ids must be in 1..%d (1-based), got %d..%d", C, ids:min():item(), ids:max():item())
  end
  local w = keep
  if opts.weight ~= nil then
    check_tensor(op, opts.weight, "weight")
    w = w * opts.weight:to(input.dtype):index_select(1, ids)
  end
  local loss = -(input:gather(2, ids:view(-1, 1)):view(-1) * w)
  if red == "none" then return loss end
  if red == "sum" then return loss:sum() end
  return loss:sum() / w:sum()
end)

-- ember.l1_loss(input, target [, {reduction = "mean"}]): |input - target|
-- (torch.nn.functional.l1_loss).
set("l1_loss", function(input, target, opts)
  local _, red = binary_opts("l1_loss", input, target, opts, { reduction = true })
  return reduce((input - target):abs(), red)
end)

-- ember.smooth_l1_loss(input, target [, {beta = 1, reduction = "mean"}]): the
-- Huber-like loss 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere
-- (torch.nn.functional.smooth_l1_loss; beta = 0 is the L1 loss).
set("smooth_l1_loss", function(input, target, opts)
  local o, red = binary_opts("smooth_l1_loss", input, target, opts, { beta = true, reduction = true })
  local beta = o.beta or 1
  if type(beta) ~= "number" or not (beta >= 0) then fail("smooth_l1_loss", "beta must be a number >= 0, got %s", tostring(beta)) end
  local d = (input - target):abs()
  if beta == 0 then return reduce(d, red) end
  return reduce(core.where(d:lt(beta), d * d * (0.5 / beta), d - 0.5 * beta), red)
end)

local PAD_MODES = { constant = true, reflect = true, replicate = true, circular = true }

-- The source index (1-based) of padded position j (1 - left .. n + right)
-- of a dim of n elements, for the index modes.
local function pad_source(mode, j, n)
  if mode == "replicate" then return math.min(math.max(j, 1), n) end
  if mode == "circular" then return (j - 1) % n + 1 end
  -- reflect: mirrored about the edge elements, which are not repeated
  local period = 2 * (n - 1)
  local k = (j - 1) % period
  return (k < n and k or period - k) + 1
end

-- ember.pad(x, pad [, mode = "constant" [, value = 0]]) or (x, pad,
-- {mode =, value =}): torch.nn.functional.pad. pad lists (left, right)
-- amounts from the last dim backwards; negative amounts crop (every mode,
-- as PyTorch's). reflect, replicate and circular are an index_select per dim, so
-- the gradient sums what was copied; constant is a cat with filled blocks.
set("pad", function(x, pad, mode, value, ...)
  check_tensor("pad", x)
  no_extra("ember.pad", type(mode) == "table" and { "pad", "opts" } or { "pad", "mode", "value" }, 2, pad, mode, value, ...)
  if type(mode) == "table" then
    local o = check_opts("pad", mode, { mode = true, value = true })
    mode, value = o.mode, o.value
  end
  mode, value = mode or "constant", value or 0
  if not PAD_MODES[mode] then
    fail("pad", "mode must be \"constant\", \"reflect\", \"replicate\" or \"circular\", got %s", tostring(mode))
  end
  if type(value) ~= "number" then fail("pad", "value must be a number, got %s", type(value)) end
  if type(pad) ~= "table" or #pad % 2 ~= 0 or #pad // 2 > x:dim() then
    fail("pad", "pad must list (left, right) pairs for at most the %d dims of the input, got %s", x:dim(),
      type(pad) == "table" and (#pad .. " numbers") or type(pad))
  end
  for i = 1, #pad do
    if math.type(pad[i]) ~= "integer" then fail("pad", "pad amounts must be integers, got %s", tostring(pad[i])) end
  end
  local y = x
  for i = 1, #pad // 2 do
    local d = x:dim() - i + 1
    local left, right, n = pad[2 * i - 1], pad[2 * i], y:size(d)
    if mode == "constant" then
      if left < 0 or right < 0 then
        local lo, hi = math.max(-left, 0), math.max(-right, 0)
        if lo + hi > n then fail("pad", "cropping %d of dim %d's %d elements", lo + hi, d, n) end
        y = y:narrow(d, lo + 1, n - lo - hi)
      end
      local parts = {}
      local function block(k)
        local shape = y:size()
        shape[d] = k
        return core.full(shape, value, { dtype = y.dtype, device = y.device })
      end
      if left > 0 then parts[#parts + 1] = block(left) end
      parts[#parts + 1] = y
      if right > 0 then parts[#parts + 1] = block(right) end
      if #parts > 1 then y = core.cat(parts, d) end
    elseif left ~= 0 or right ~= 0 then -- a (0, 0) pair leaves the dim as it is, whatever its size
      -- negative amounts crop, as PyTorch's: reflect and replicate index the
      -- uncropped dim (a crop on one side leaves the other side's copies as
      -- they were); circular crops first and wraps what is left
      if -left - right > n then fail("pad", "cropping %d of dim %d's %d elements", -left - right, d, n) end
      if mode == "circular" and (left < 0 or right < 0) then
        local lo, hi = math.max(-left, 0), math.max(-right, 0)
        if lo + hi > n then fail("pad", "cropping %d of dim %d's %d elements", lo + hi, d, n) end
        y, n, left, right = y:narrow(d, lo + 1, n - lo - hi), n - lo - hi, math.max(left, 0), math.max(right, 0)
      end
      local limit = mode == "reflect" and n - 1 or mode == "circular" and n or math.huge
      if (n == 0 and (left > 0 or right > 0)) or left > limit or right > limit then
        fail("pad", "%s padding of (%d, %d) needs more elements in dim %d than its %d", mode, pad[2 * i - 1],
          pad[2 * i], d, n)
      end
      local idx = {}
      for j = 1 - left, n + right do idx[#idx + 1] = pad_source(mode, j, n) end
      if #idx == 0 then
        y = y:narrow(d, 1, 0)
      else
        y = y:index_select(d, core.tensor(idx, { dtype = "int64", device = y.device }))
      end
    end
  end
  if rawequal(y, x) then y = x:clone() end
  return y
end)

-- ---- more activations (torch.nn.functional's) ---------------------------------

-- A user's 1-based dim (negative from the end) as a positive one, with
-- _helpers' messages.
local check_dim = helpers.check_dim

local function check_number(op, v, what)
  if type(v) ~= "number" then fail(op, "%s must be a number, got %s", what, type(v)) end
  return v
end

-- x clamped into [lo, hi] with the gradient of hardtanh: 1 strictly
-- inside, 0 at and beyond the bounds (clamp's gradient is 1 at the bounds).
local function hard_clamp(x, lo, hi)
  return core.where(x:gt(lo):logical_and(x:lt(hi)), x, x:clamp(lo, hi):detach())
end

-- ember.hardtanh(x [, min_val = -1 [, max_val = 1]]) or (x, {min_val =, max_val =}):
-- x clamped into [min_val, max_val] (torch.nn.functional.hardtanh; the
-- gradient is 0 at the bounds, as PyTorch's).
set("hardtanh", function(x, lo, hi, ...)
  check_tensor("hardtanh", x)
  no_extra("ember.hardtanh", type(lo) == "table" and { "opts" } or { "min_val", "max_val" }, 2, lo, hi, ...)
  if type(lo) == "table" then
    local o = check_opts("hardtanh", lo, { min_val = true, max_val = true })
    lo, hi = o.min_val, o.max_val
  end
  lo, hi = check_number("hardtanh", lo or -1, "min_val"), check_number("hardtanh", hi or 1, "max_val")
  if not (lo <= hi) then fail("hardtanh", "min_val (%s) must not be above max_val (%s)", tostring(lo), tostring(hi)) end
  return hard_clamp(x, lo, hi)
end)

-- ember.relu6(x): min(max(x, 0), 6) (torch.nn.functional.relu6, hardtanh(x, 0, 6)).
set("relu6", function(x, ...)
  check_tensor("relu6", x)
  no_extra("ember.relu6", {}, 2, ...)
  return hard_clamp(x, 0, 6)
end)

-- ember.hardswish(x): x * relu6(x + 3) / 6 (torch.nn.functional.hardswish).
-- Its gradient is 0 below -3, x / 3 + 1/2 on [-3, 3), 1 from 3 up: what
-- PyTorch 1.13's vectorised CPU loop gives, which every tensor of more
-- than a few elements takes (its scalar loop, on the smallest tensors,
-- gives 1.5 at exactly 3).
set("hardswish", function(x, ...)
  check_tensor("hardswish", x)
  no_extra("ember.hardswish", {}, 2, ...)
  return core.where(x:lt(-3), core.zeros_like(x), core.where(x:ge(3), x, x * (x + 3) / 6))
end)

-- ember.hardsigmoid(x): relu6(x + 3) / 6 (torch.nn.functional.hardsigmoid).
set("hardsigmoid", function(x, ...)
  check_tensor("hardsigmoid", x)
  no_extra("ember.hardsigmoid", {}, 2, ...)
  return hard_clamp(x + 3, 0, 6) / 6
end)

-- ember.mish(x): x * tanh(softplus(x)) (torch.nn.functional.mish).
set("mish", function(x, ...)
  check_tensor("mish", x)
  no_extra("ember.mish", {}, 2, ...)
  return x * softplus_of(x, 20):tanh()
end)

-- ember.glu(x [, dim = -1]): a * sigmoid(b), a and b the two halves of x
-- along dim (torch.nn.functional.glu); also by name, {dim =}.
set("glu", function(x, dim, ...)
  check_tensor("glu", x)
  no_extra("ember.glu", { "dim" }, 2, dim, ...)
  if type(dim) == "table" then dim = check_opts("glu", dim, { dim = true }).dim end
  if x:dim() == 0 then fail("glu", "expected a tensor with at least 1 dim, got a 0-d tensor") end
  local d = check_dim("glu", x, dim or -1)
  local n = x:size(d)
  if n % 2 ~= 0 then fail("glu", "dim %d must have an even size to be halved, got %d", d, n) end
  return x:narrow(d, 1, n // 2) * x:narrow(d, n // 2 + 1, n // 2):sigmoid()
end)

-- ---- more losses ----------------------------------------------------------------

local KL_REDUCTIONS = { mean = true, sum = true, none = true, batchmean = true }

-- ember.kl_div(input, target [, {reduction = "mean", log_target = false}]):
-- the pointwise KL divergence target * (log target - input) of
-- log-probabilities input (torch.nn.functional.kl_div): xlogy(t, t) - t x,
-- 0 where t = 0 (where the target's gradient is NaN, as PyTorch's); with
-- log_target, e^t (t - x). "batchmean" divides the sum
-- by the size of dim 1 (the true KL divergence per sample); "mean" by the
-- number of elements, as PyTorch's.
set("kl_div", function(input, target, opts)
  local op = "kl_div"
  check_tensor(op, input, "input")
  check_tensor(op, target, "target")
  opts = check_opts(op, opts, { reduction = true, log_target = true })
  local red = opts.reduction or "mean"
  if not KL_REDUCTIONS[red] then
    fail(op, "reduction must be \"mean\", \"batchmean\", \"sum\" or \"none\", got %s", tostring(red))
  end
  if opts.log_target ~= nil and type(opts.log_target) ~= "boolean" then
    fail(op, "log_target must be a boolean, got %s", type(opts.log_target))
  end
  local same = input:dim() == target:dim()
  for i = 1, input:dim() do same = same and input:size(i) == target:size(i) end
  if not same then fail(op, "target shape %s must equal input shape %s", shape_str(target), shape_str(input)) end
  local loss
  if opts.log_target then
    loss = target:exp() * (target - input)
  else
    loss = core.xlogy(target, target) - target * input
  end
  if red == "batchmean" then
    if input:dim() == 0 then return loss:sum() end
    return loss:sum() / input:size(1)
  end
  return reduce(loss, red)
end)

-- ember.huber_loss(input, target [, {delta = 1, reduction = "mean"}]):
-- 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere, d = input
-- - target (torch.nn.functional.huber_loss; smooth_l1_loss times delta).
set("huber_loss", function(input, target, opts)
  local o, red = binary_opts("huber_loss", input, target, opts, { delta = true, reduction = true })
  local delta = o.delta or 1
  if type(delta) ~= "number" or not (delta > 0) then
    fail("huber_loss", "delta must be a number > 0, got %s", tostring(delta))
  end
  local d = (input - target):abs()
  return reduce(core.where(d:lt(delta), d * d * 0.5, (d - 0.5 * delta) * delta), red)
end)

-- The shape that the given shapes broadcast to (as torch.broadcast_shapes),
-- an error naming op otherwise; names[k] names shape k in it ("tensor1"),
-- "shape k" without. ember.broadcast_shapes and broadcast_tensors
-- (_everyday.lua) and the ternary ops (addcmul, lerp, clamp: _functional_more.lua)
-- check their operands with it.
local function broadcast_shapes(op, shapes, names)
  local n = 0
  for _, s in ipairs(shapes) do n = math.max(n, #s) end
  local out = {}
  for i = 1, n do out[i] = 1 end
  for k, s in ipairs(shapes) do
    for i = 1, #s do
      local j, v = n - #s + i, s[i]
      if out[j] == 1 then out[j] = v
      elseif v ~= 1 and v ~= out[j] then
        fail(op, "%s [%s] does not broadcast to the others (size %d vs %d)", names and names[k] or ("shape " .. k),
          table.concat(s, ", "), v, out[j])
      end
    end
  end
  return core.Size(out)
end

local M = { check_opts = check_opts, check_dim = check_dim, check_number = check_number, reduce = reduce,
  REDUCTIONS = REDUCTIONS, broadcast_shapes = broadcast_shapes }
package.loaded["ember._functional"] = M -- for _functional_more, which this file loads
require "ember._functional_more"
return M
