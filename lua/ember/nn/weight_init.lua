--- nn.init: weight initialisers, as torch.nn.init (`require "ember.nn".init`).
--
-- Each fills a tensor **in place** with autograd off (so a parameter can be
-- filled) and returns it; the random ones draw from ember's seeded
-- generator (`ember.manual_seed`), so a seeded run is reproducible.
-- Formulas and defaults are PyTorch's:
--
--  * fans of a tensor [out, in, k1, k2, ...]: fan_in = in * k1 * k2 * ...,
--    fan_out = out * k1 * k2 * ... (a Linear weight [out, in] has
--    fan_in = in); at least 2 dims.
--  * xavier_uniform_(t, gain=1): U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
--  * xavier_normal_(t, gain=1): N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
--  * kaiming_uniform_(t, a=0, mode="fan_in", nonlinearity="leaky_relu"):
--    U(-b, b), b = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a),
--    fan = fan_in or fan_out as mode says.
--  * kaiming_normal_(t, a=0, mode="fan_in", nonlinearity="leaky_relu"):
--    N(0, std^2), std = gain / sqrt(fan).
--  * trunc_normal_(t, mean=0, std=1, a=-2, b=2): N(mean, std^2) restricted to
--    [a, b] (a and b are values, not multiples of std, as PyTorch; drawn by
--    the inverse CDF, as PyTorch, so an interval in a tail works too).
--  * uniform_(t, a=0, b=1), normal_(t, mean=0, std=1), constant_(t, v),
--    zeros_(t), ones_(t), eye_(t) (a 2-d identity).
--  * orthogonal_(t, gain=1): a (semi-)orthogonal matrix from the QR
--    decomposition of a normal one (rows or columns orthonormal, R's
--    diagonal made positive), t seen as [rows, the rest], times gain.
--  * dirac_(t, groups=1): a convolution weight that passes its input
--    through; sparse_(t, sparsity, std=0.01): N(0, std^2) with
--    ceil(sparsity * rows) zeros in each column.
--
-- Options come positionally, as PyTorch's, or as a table of PyTorch's
-- keyword names: `kaiming_normal_(w, {mode = "fan_out", nonlinearity = "relu"})`,
-- `trunc_normal_(w, {std = 0.02})`, `xavier_uniform_(w, {gain = 2})`,
-- `normal_(w, {mean = 0, std = 0.02})`, `constant_(w, {val = 0.5})`.
-- The random ones take PyTorch 2.2's `generator` too, last by position or
-- by name (`normal_(w, 0, 0.02, g)`, `kaiming_uniform_(w, {a = 0, generator = g})`):
-- they draw from that ember.Generator, leaving the global one as it is.
-- Arguments past a function's own are an error (they were dropped).
-- Errors name the function (`nn.init.xavier_uniform_: ...`) at the caller's line.
-- @usage local init = require("ember.nn").init
-- local lin = nn.Linear(256, 128)
-- init.xavier_uniform_(lin.weight)
-- init.zeros_(lin.bias)
-- local conv_w, pos_embedding = ember.zeros(64, 3, 3, 3), ember.zeros(1, 50, 64)
-- init.kaiming_normal_(conv_w, {mode = "fan_out", nonlinearity = "relu"})
-- init.trunc_normal_(pos_embedding, 0, 0.02)   -- ViT's
-- @module nn.init
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"

local M = {}

local function fail(fn, fmt, ...)
  error(("nn.init.%s: " .. fmt):format(fn, ...))
end

local function check_float(fn, t)
  if not ember.is_tensor(t) then fail(fn, "expected a tensor, got %s", type(t)) end
  local info = ember.dtype_info(t.dtype)
  if not (info and info.floating) then fail(fn, "needs a floating-point tensor, got %s", t.dtype) end
end

local function check_number(fn, what, v)
  if type(v) ~= "number" or v ~= v then fail(fn, "%s must be a number, got %s", what, tostring(v)) end
end

-- PyTorch's keyword arguments: `first` may be a table of the options
-- `names` (in their positional order); returns the values in that order,
-- else the positional ones as given.
local function options(fn, names, first, ...)
  if type(first) ~= "table" or ember.is_tensor(first) then return first, ... end
  local pos = {}
  for i, n in ipairs(names) do pos[n] = i end
  local out = {}
  for k, v in pairs(first) do
    if not pos[k] then fail(fn, "unknown option '%s' (%s)", tostring(k), table.concat(names, ", ")) end
    out[pos[k]] = v
  end
  return table.unpack(out, 1, #names)
end

--- The gain PyTorch recommends for a nonlinearity (torch.nn.init.calculate_gain):
-- 1 for linear, conv1d/2d/3d, conv_transpose1d/2d/3d and sigmoid; 5/3 for
-- tanh; sqrt(2) for relu; sqrt(2 / (1 + slope^2)) for leaky_relu (slope =
-- param, default 0.01); 3/4 for selu.
-- @string nonlinearity
-- @number[opt] param leaky_relu's negative slope
-- @treturn number
function M.calculate_gain(nonlinearity, param)
  local linear = { linear = true, conv1d = true, conv2d = true, conv3d = true, conv_transpose1d = true,
    conv_transpose2d = true, conv_transpose3d = true, sigmoid = true }
  if linear[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "selu" then return 3 / 4 end
  if nonlinearity == "leaky_relu" then
    local slope = 0.01
    if param ~= nil then
      if type(param) ~= "number" or param ~= param then
        fail("calculate_gain", "negative_slope %s is not a valid number", tostring(param))
      end
      slope = param
    end
    return math.sqrt(2 / (1 + slope * slope))
  end
  fail("calculate_gain", "unsupported nonlinearity %s (linear, conv1d, conv2d, conv3d, conv_transpose1d, "
    .. "conv_transpose2d, conv_transpose3d, sigmoid, tanh, relu, leaky_relu, selu)", tostring(nonlinearity))
end

local function fans(fn, t)
  if not ember.is_tensor(t) then fail(fn, "expected a tensor, got %s", type(t)) end
  if t.ndim < 2 then
    fail(fn, "fan in and fan out need a tensor of at least 2 dims, got shape [%s]", table.concat(t.shape, ", "))
  end
  local rf = 1
  for i = 3, t.ndim do rf = rf * t.shape[i] end
  return t.shape[2] * rf, t.shape[1] * rf
end

--- fan_in and fan_out of a weight [out, in, k...]: in * prod(k) and out * prod(k).
-- @tparam Tensor t at least 2 dims
-- @treturn integer fan_in
-- @treturn integer fan_out
function M.calculate_fans(t) return fans("calculate_fans", t) end
--- torch.nn.init._calculate_fan_in_and_fan_out: calculate_fans by PyTorch's
-- name (user code that sizes a bias's bound from its weight calls it).
-- @param t a tensor of at least 2 dims
-- @treturn integer fan_in
-- @treturn integer fan_out
function M._calculate_fan_in_and_fan_out(t) return fans("_calculate_fan_in_and_fan_out", t) end

--- Fills t with U(a, b) (default U(0, 1)).
-- @tparam Tensor t
-- @number[opt=0] a
-- @number[opt=1] b
-- @treturn Tensor t
function M.uniform_(t, a, b)
  check_float("uniform_", t)
  a, b = options("uniform_", { "a", "b" }, a, b)
  a, b = a or 0, b or 1
  check_number("uniform_", "a", a)
  check_number("uniform_", "b", b)
  if a > b then fail("uniform_", "a must be <= b, got a=%g, b=%g", a, b) end
  return t:uniform_(a, b)
end

--- Fills t with N(mean, std^2) (default N(0, 1)).
-- @tparam Tensor t
-- @number[opt=0] mean
-- @number[opt=1] std
-- @treturn Tensor t
function M.normal_(t, mean, std)
  check_float("normal_", t)
  mean, std = options("normal_", { "mean", "std" }, mean, std)
  mean, std = mean or 0, std or 1
  check_number("normal_", "mean", mean)
  check_number("normal_", "std", std)
  if std < 0 then fail("normal_", "std must be >= 0, got %g", std) end
  return t:normal_(mean, std)
end

--- Fills t with the value v.
-- @tparam Tensor t
-- @number v
-- @treturn Tensor t
function M.constant_(t, v)
  if not ember.is_tensor(t) then fail("constant_", "expected a tensor, got %s", type(t)) end
  v = options("constant_", { "val" }, v)
  check_number("constant_", "val", v)
  ember.no_grad(function() t:fill_(v) end)
  return t
end

--- Fills t with zeros.
-- @tparam Tensor t
-- @treturn Tensor t
function M.zeros_(t)
  if not ember.is_tensor(t) then fail("zeros_", "expected a tensor, got %s", type(t)) end
  ember.no_grad(function() t:fill_(0) end)
  return t
end

--- Fills t with ones.
-- @tparam Tensor t
-- @treturn Tensor t
function M.ones_(t)
  if not ember.is_tensor(t) then fail("ones_", "expected a tensor, got %s", type(t)) end
  ember.no_grad(function() t:fill_(1) end)
  return t
end

--- Fills a 2-d t with the identity (ones on the diagonal), as torch.nn.init.eye_.
-- @tparam Tensor t 2-d
-- @treturn Tensor t
function M.eye_(t)
  if not ember.is_tensor(t) then fail("eye_", "expected a tensor, got %s", type(t)) end
  if t:dim() ~= 2 then fail("eye_", "needs a 2-d tensor, got %d dims", t:dim()) end
  ember.no_grad(function() t:copy_(ember.eye(t:size(1), t:size(2), { dtype = t.dtype, device = t.device })) end)
  return t
end

--- The Dirac delta of a convolution weight [out, in, k...] (3, 4 or 5
-- dims), as torch.nn.init.dirac_: zeros, and a one at the kernel's centre
-- (index k // 2 + 1 of each kernel dim) of in-channel d for out-channel d
-- (in each of `groups` groups of out-channels), so the convolution passes
-- its first min(out / groups, in) channels through unchanged.
-- @tparam Tensor t [out, in, k...]
-- @int[opt=1] groups
-- @treturn Tensor t
-- @usage local w = nn.init.dirac_(ember.empty(4, 4, 3, 3))
-- local x = ember.randn(1, 4, 5, 5)
-- print(ember.allclose(ember.nn.functional.conv2d(x, w, nil, 1, 1), x))   --> true
function M.dirac_(t, groups)
  check_float("dirac_", t)
  groups = options("dirac_", { "groups" }, groups)
  groups = groups == nil and 1 or groups
  if t.ndim < 3 or t.ndim > 5 then
    fail("dirac_", "needs a convolution weight of 3, 4 or 5 dims [out, in, k...], got shape [%s]",
      table.concat(t.shape, ", "))
  end
  if math.type(groups) ~= "integer" or groups < 1 or t.shape[1] % groups ~= 0 then
    fail("dirac_", "groups must be a positive integer dividing dim 1 (%d), got %s", t.shape[1], tostring(groups))
  end
  local per_group = t.shape[1] // groups
  ember.no_grad(function()
    t:zero_()
    for g = 0, groups - 1 do
      for d = 1, math.min(per_group, t.shape[2]) do
        local one = t:narrow(1, g * per_group + d, 1):narrow(2, d, 1)
        for i = 3, t.ndim do one = one:narrow(i, t.shape[i] // 2 + 1, 1) end
        one:fill_(1)
      end
    end
  end)
  return t
end

--- A sparse 2-d matrix, as torch.nn.init.sparse_: N(0, std^2), then in
-- each column ceil(sparsity * rows) entries, at rows drawn without
-- replacement, set to zero.
-- @tparam Tensor t 2-d [rows, cols]
-- @number sparsity the fraction of each column set to zero, in [0, 1]
-- @number[opt=0.01] std
-- @treturn Tensor t
function M.sparse_(t, sparsity, std)
  check_float("sparse_", t)
  sparsity, std = options("sparse_", { "sparsity", "std" }, sparsity, std)
  std = std == nil and 0.01 or std
  if t.ndim ~= 2 then fail("sparse_", "needs a 2-d tensor, got %d dims", t.ndim) end
  check_number("sparse_", "sparsity", sparsity)
  check_number("sparse_", "std", std)
  if sparsity < 0 or sparsity > 1 then fail("sparse_", "sparsity must be in [0, 1], got %g", sparsity) end
  if std < 0 then fail("sparse_", "std must be >= 0, got %g", std) end
  local rows, cols = t.shape[1], t.shape[2]
  local zeros = math.ceil(sparsity * rows)
  ember.no_grad(function()
    t:normal_(0, std)
    if zeros > 0 and cols > 0 then
      -- each column's rows in a random order (the ranks of uniform draws): its first `zeros` are zeroed
      local rank = ember.rand(rows, cols, { device = t.device }):argsort(1):argsort(1)
      t:masked_fill_(rank:le(zeros), 0)
    end
  end)
  return t
end

local function gain_of(fn, gain)
  gain = options(fn, { "gain" }, gain)
  gain = gain == nil and 1 or gain
  check_number(fn, "gain", gain)
  return gain
end

--- A (semi-)orthogonal matrix, as torch.nn.init.orthogonal_: t seen as
-- [rows, cols] (cols the product of the other dims) is Q of the QR
-- decomposition of a standard normal matrix (transposed first when rows <
-- cols), with R's diagonal made positive, times gain: its rows (or its
-- columns, whichever are fewer) are orthonormal. The QR is Gram-Schmidt
-- twice over, in float64.
-- @tparam Tensor t at least 2 dims
-- @number[opt=1] gain
-- @treturn Tensor t
-- @usage local w = nn.init.orthogonal_(ember.empty(3, 5))
-- print(ember.allclose(w:matmul(w:t()), ember.eye(3), 1e-5, 1e-5))   --> true
function M.orthogonal_(t, gain)
  check_float("orthogonal_", t)
  gain = gain_of("orthogonal_", gain)
  if t:dim() < 2 then fail("orthogonal_", "needs at least 2 dims, got %d", t:dim()) end
  local rows = t:size(1)
  local cols = t:numel() // math.max(rows, 1)
  if rows == 0 or cols == 0 then return t end
  ember.no_grad(function()
    local a = ember.randn(rows, cols, { dtype = "float64", device = t.device })
    if rows < cols then a = a:t():contiguous() end
    local n, k = a:size(1), a:size(2) -- n >= k: orthonormalise the k columns
    local q = ember.zeros(n, k, { dtype = "float64", device = t.device })
    for j = 1, k do
      local v = a:narrow(2, j, 1)
      if j > 1 then
        local done = q:narrow(2, 1, j - 1)
        for _ = 1, 2 do v = v - done:matmul(done:t():matmul(v)) end -- Gram-Schmidt, twice for accuracy
      end
      q:narrow(2, j, 1):copy_(v / v:norm())
    end
    if rows < cols then q = q:t() end
    t:copy_((q * gain):reshape(t.shape):to(t.dtype))
  end)
  return t
end

--- Xavier/Glorot uniform: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
-- @tparam Tensor t at least 2 dims
-- @number[opt=1] gain
-- @treturn Tensor t
function M.xavier_uniform_(t, gain)
  check_float("xavier_uniform_", t)
  local fan_in, fan_out = fans("xavier_uniform_", t)
  local b = gain_of("xavier_uniform_", gain) * math.sqrt(6 / (fan_in + fan_out))
  return t:uniform_(-b, b)
end

--- Xavier/Glorot normal: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
-- @tparam Tensor t at least 2 dims
-- @number[opt=1] gain
-- @treturn Tensor t
function M.xavier_normal_(t, gain)
  check_float("xavier_normal_", t)
  local fan_in, fan_out = fans("xavier_normal_", t)
  return t:normal_(0, gain_of("xavier_normal_", gain) * math.sqrt(2 / (fan_in + fan_out)))
end

-- gain / sqrt(fan) of the kaiming functions, from positional or table options.
local function kaiming_std(fn, t, a, mode, nonlinearity)
  check_float(fn, t)
  if type(a) == "table" then
    local o = a
    for k in pairs(o) do
      if k ~= "a" and k ~= "mode" and k ~= "nonlinearity" then
        fail(fn, "unknown option '%s' (a, mode, nonlinearity)", tostring(k))
      end
    end
    a, mode, nonlinearity = o.a, o.mode, o.nonlinearity
  end
  a, mode, nonlinearity = a or 0, mode or "fan_in", nonlinearity or "leaky_relu"
  check_number(fn, "a", a)
  if mode ~= "fan_in" and mode ~= "fan_out" then
    fail(fn, "mode must be \"fan_in\" or \"fan_out\", got %s", tostring(mode))
  end
  local fan_in, fan_out = fans(fn, t)
  local fan = mode == "fan_in" and fan_in or fan_out
  if fan == 0 then fail(fn, "the %s of a tensor of shape [%s] is 0", mode, table.concat(t.shape, ", ")) end
  local ok, gain = pcall(M.calculate_gain, nonlinearity, a)
  if not ok then fail(fn, "unsupported nonlinearity %s", tostring(nonlinearity)) end
  return gain / math.sqrt(fan)
end

--- Kaiming/He uniform: U(-b, b), b = gain * sqrt(3 / fan).
-- @tparam Tensor t at least 2 dims
-- @param[opt=0] a leaky_relu's negative slope, or a table {a=, mode=, nonlinearity=}
-- @string[opt="fan_in"] mode "fan_in" (keeps the forward's variance) or "fan_out" (the backward's)
-- @string[opt="leaky_relu"] nonlinearity as calculate_gain
-- @treturn Tensor t
function M.kaiming_uniform_(t, a, mode, nonlinearity)
  if ember.is_tensor(t) and t:numel() == 0 then return t end -- as PyTorch: a no-op (its fan may be 0)
  local b = math.sqrt(3) * kaiming_std("kaiming_uniform_", t, a, mode, nonlinearity)
  return t:uniform_(-b, b)
end

--- Kaiming/He normal: N(0, std^2), std = gain / sqrt(fan).
-- @tparam Tensor t at least 2 dims
-- @param[opt=0] a leaky_relu's negative slope, or a table {a=, mode=, nonlinearity=}
-- @string[opt="fan_in"] mode "fan_in" or "fan_out"
-- @string[opt="leaky_relu"] nonlinearity as calculate_gain
-- @treturn Tensor t
function M.kaiming_normal_(t, a, mode, nonlinearity)
  if ember.is_tensor(t) and t:numel() == 0 then return t end -- as PyTorch: a no-op (its fan may be 0)
  return t:normal_(0, kaiming_std("kaiming_normal_", t, a, mode, nonlinearity))
end

--- N(mean, std^2) truncated to [a, b], as torch.nn.init.trunc_normal_: a
-- and b are values (not multiples of std). Drawn as PyTorch draws it, by
-- the inverse of the normal CDF (uniform between CDF(a) and CDF(b), then
-- erfinv), in float64 (so an interval in a tail, [3, 4] or [6, 7] of
-- N(0, 1), is drawn as well as one around the mean), then clamped to
-- [a, b] and rounded to t's dtype. An interval holding less than about 1e-13 of the distribution is
-- an error (float64 cannot tell its CDF values apart; PyTorch returns the
-- bounds there).
-- @tparam Tensor t
-- @number[opt=0] mean
-- @number[opt=1] std
-- @number[opt=-2] a
-- @number[opt=2] b
-- @treturn Tensor t
-- @usage local pos = nn.init.trunc_normal_(ember.empty(1, 50, 64), 0, 0.02)   -- ViT's, in [-2, 2]
-- local w = nn.init.trunc_normal_(ember.empty(4, 4), {std = 0.02, a = -0.04, b = 0.04})   -- PyTorch's keywords
function M.trunc_normal_(t, mean, std, a, b)
  check_float("trunc_normal_", t)
  mean, std, a, b = options("trunc_normal_", { "mean", "std", "a", "b" }, mean, std, a, b)
  mean, std, a, b = mean or 0, std or 1, a or -2, b or 2
  for _, v in ipairs { { "mean", mean }, { "std", std }, { "a", a }, { "b", b } } do
    check_number("trunc_normal_", v[1], v[2])
  end
  if std < 0 then fail("trunc_normal_", "std must be >= 0, got %g", std) end
  if not (a < b) then fail("trunc_normal_", "a must be < b, got a=%g, b=%g", a, b) end
  ember.no_grad(function()
    local f64 = { dtype = "float64", device = t.device }
    if std == 0 or t:numel() == 0 then
      t:fill_(math.min(math.max(mean, a), b))
      return
    end
    local function cdf(z) return (1 + ember.erf(ember.tensor(z / math.sqrt(2), f64)):item()) / 2 end
    local lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    if not (hi - lo > 1e-13) then
      fail("trunc_normal_", "[a, b] = [%g, %g] holds too little of N(%g, %g^2) to draw from (its CDF values are "
        .. "equal in float64)", a, b, mean, std)
    end
    local z = ember.uniform(t.shape, 2 * lo - 1, 2 * hi - 1, f64):erfinv() * math.sqrt(2)
    t:copy_((z * std + mean):clamp(a, b):to(t.dtype))
  end)
  return t
end

-- PyTorch's argument count of each function after the tensor, and whether
-- its last (one past them) may be a generator (PyTorch 2.2's nn.init).
local ARITY = {
  uniform_ = { 2, true }, normal_ = { 2, true }, trunc_normal_ = { 4, true }, xavier_uniform_ = { 1, true },
  xavier_normal_ = { 1, true }, kaiming_uniform_ = { 3, true }, kaiming_normal_ = { 3, true },
  orthogonal_ = { 1, true }, sparse_ = { 2, true }, constant_ = { 1 }, zeros_ = { 0 }, ones_ = { 0 }, eye_ = { 0 },
  dirac_ = { 1 },
}

-- Each function with its arguments checked: none past its own (a table of
-- options counts as the rest), and the random ones' generator taken out of
-- the arguments (the last by position, or the options' `generator`) and
-- drawn from.
for name, spec in pairs(ARITY) do
  local fn, n, takes_gen = M[name], spec[1], spec[2]
  M[name] = function(t, ...)
    local args, count = { ... }, select("#", ...)
    local g
    local opts_at
    for i = 1, count do
      local v = args[i]
      if type(v) == "table" and not ember.is_tensor(v) and getmetatable(v) == nil then opts_at = i break end
    end
    if opts_at then
      if opts_at ~= count then
        fail(name, "the options table must be the last argument (argument %d of %d after the tensor)", opts_at, count)
      end
      if takes_gen and args[opts_at].generator ~= nil then
        local rest = {}
        for k, v in pairs(args[opts_at]) do if k ~= "generator" then rest[k] = v end end
        g, args[opts_at] = args[opts_at].generator, rest
      end
    else
      local most = n + (takes_gen and 1 or 0)
      if count > most then
        fail(name, "takes at most %d argument%s after the tensor%s, got %d", most, most == 1 and "" or "s",
          takes_gen and " (the last a generator)" or "", count)
      end
      if takes_gen and count == n + 1 then g, args[n + 1], count = args[n + 1], nil, n end
    end
    if g == nil then return fn(t, table.unpack(args, 1, count)) end
    local gen = require "ember._generator"
    if not gen.is_generator(g) then
      fail(name, "generator must be an ember.Generator (ember.Generator():manual_seed(n)), got %s",
        ember.is_tensor(g) and "a tensor" or type(g))
    end
    return gen.under(g, fn, t, table.unpack(args, 1, count))
  end
end

return M
