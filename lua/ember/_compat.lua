-- ember/_compat.lua: more of what a PyTorch user types, composed from ember's
-- ops: sampling (multinomial, bernoulli), median / kthvalue, meshgrid,
-- logspace, the new_* and *_like constructors, addmm / baddbmm, cross,
-- index_add / index_fill / scatter, PyTorch's keyword forms of a few
-- methods and the // % & | ~ operators. Aliases: tolist (totable), clip
-- (clamp). init.lua loads it; the autograd entry points are _grad_modes.lua.
local core = require "ember.core"
local helpers = require "ember._helpers"
local shape_str = require("ember._errors").shape_str

local fail, check_tensor, set = helpers.fail, helpers.check_tensor, helpers.set
local T = core.Tensor

local check_opts = require("ember._functional").check_opts

local function check_int(op, v, what, lo)
  if math.type(v) ~= "integer" or v < (lo or 0) then
    fail(op, "%s must be an integer >= %d, got %s", what, lo or 0, tostring(v))
  end
  return v
end

-- A user's dim (1-based, negative from the end) as a positive one.
local dim_of = helpers.check_dim

-- ---- aliases ---------------------------------------------------------------

T.tolist = T.totable -- torch's name (nested Lua tables)
set("clip", function(x, ...) return check_tensor("clip", x):clamp(...) end, true)

-- x:multiply(y), divide, subtract, negative, absolute, fix: torch's alias
-- names of mul, div, sub, neg, abs and trunc (the same functions, same options).
for alias, name in pairs { multiply = "mul", divide = "div", subtract = "sub", negative = "neg", absolute = "abs",
  fix = "trunc" } do
  T[alias], core[alias] = T[name], core[name] or T[name]
end

-- ---- sampling -------------------------------------------------------------------

-- ember.multinomial(probs, n [, {replacement = false}]), or torch's
-- positional multinomial(probs, n, replacement [, opts]): n class ids (1-based)
-- per row of probs [C] or [B, C] (non-negative weights, not necessarily
-- normalised), as torch.multinomial, from ember's seeded generator. With
-- replacement each draw inverts the row's CDF; without, the n largest of
-- log p - log(-log u) (Gumbel top-k: the order of sequential draws without
-- replacement), so a zero weight is never drawn.
set("multinomial", function(probs, n, opts, more)
  local op = "multinomial"
  check_tensor(op, probs, "probs")
  if type(opts) == "boolean" then
    local o = check_opts(op, more, {})
    o.replacement = opts
    opts = o
  end
  opts = check_opts(op, opts, { replacement = true })
  if probs:dim() ~= 1 and probs:dim() ~= 2 then fail(op, "probs must be [C] or [B, C], got %s", shape_str(probs)) end
  check_int(op, n, "num_samples", 1)
  local p = probs:dim() == 1 and probs:view(1, -1) or probs
  p = p:double()
  local B, C = p:size(1), p:size(2)
  local bad = p:lt(0):logical_or(p:isnan()):any():item() or p:isinf():any():item()
  if bad then fail(op, "probs must be finite and >= 0") end
  local total = p:sum(2, true)
  if total:eq(0):any():item() then fail(op, "each row of probs needs a positive weight") end
  local out
  if opts.replacement then
    local cdf = (p / total):cumsum(2)
    local u = core.rand(B, n, { dtype = "float64", device = p.device })
    local rows = {}
    for b = 1, B do rows[b] = core.searchsorted(cdf[b], u[b], { right = true }) end
    out = core.stack(rows, 1)
    out = out:masked_fill(out:gt(C), C) -- u < 1; only the last CDF value's rounding could pass C
  else
    local nz = p:gt(0):long():sum(2):min():item()
    if n > nz then
      fail(op, "cannot draw %d samples without replacement from a row with %d non-zero weights", n, nz)
    end
    local u = core.rand(B, C, { dtype = "float64", device = p.device }):clamp(1e-300, 1)
    local keys = p:log() - (-u:log()):log()
    local _, idx = keys:topk(n, 2)
    out = idx
  end
  return probs:dim() == 1 and out:view(-1) or out
end, true)

-- ember.bernoulli(p [, {generator =}]): 1 with probability p, elementwise
-- (torch.bernoulli), in p's dtype; p in [0, 1]. ember.bernoulli(x, q [, opts])
-- / x:bernoulli(q), q a number: draws of probability q shaped like x, in
-- x's dtype (torch's).
set("bernoulli", function(p, q, opts, ...)
  if type(q) == "table" and not core.is_tensor(q) then q, opts = nil, q end -- bernoulli(p, {generator = g})
  if select("#", ...) > 0 then core._noextra("bernoulli", "p, options", 3, p, q, opts, ...) end
  check_tensor("bernoulli", p)
  if opts ~= nil and type(opts) ~= "table" then fail("bernoulli", "options must be a table, got %s", type(opts)) end
  for k in pairs(opts or {}) do
    if k ~= "generator" then fail("bernoulli", "unknown option '%s' (it takes generator)", tostring(k)) end
  end
  local float = p:is_floating_point() and p.dtype ~= "bfloat16" and p.dtype or "float32"
  local ro = { dtype = float, device = p.device, generator = opts and opts.generator }
  if q ~= nil then
    if type(q) ~= "number" or not (q >= 0 and q <= 1) then fail("bernoulli", "p must be a number in [0, 1], got %s", tostring(q)) end
    return core.rand(p.shape, ro):lt(q):to(p.dtype)
  end
  if p:lt(0):logical_or(p:gt(1)):any():item() then fail("bernoulli", "p must be in [0, 1]") end
  return core.rand(p.shape, ro):lt(p):to(p.dtype)
end, true)
-- x:bernoulli_([p = 0.5]): x filled in place with draws of probability p (a
-- number, or a tensor broadcast to x), returning x (torch's; copy_'s rules).
T.bernoulli_ = helpers.guard(function(x, p, ...)
  if select("#", ...) > 0 then core._noextra("bernoulli_", "p", 2, x, p, ...) end
  check_tensor("bernoulli_", x)
  if p == nil then p = 0.5 end
  local draws = core.is_tensor(p) and core.bernoulli(p) or core.bernoulli(x, p)
  return x:copy_(draws)
end)

-- ---- order statistics --------------------------------------------------------------

-- ember.kthvalue(x, k [, dim = -1 [, keepdim]]): the k-th smallest value
-- along dim and its 1-based index (torch.kthvalue).
set("kthvalue", function(x, k, dim, keepdim, ...)
  if select("#", ...) > 0 then core._noextra("kthvalue", "k, dim, keepdim", 4, x, k, dim, keepdim, ...) end
  check_tensor("kthvalue", x)
  local d = dim_of("kthvalue", x, dim or -1)
  local n = x:dim() == 0 and 1 or x:size(d)
  if math.type(k) ~= "integer" or k < 1 or k > n then fail("kthvalue", "k must be in 1..%d, got %s", n, tostring(k)) end
  if x:dim() == 0 then -- a scalar is its own k-th value, at index 1 (torch's 0)
    return x:clone(), core.ones({}, { dtype = "int64", device = x.device })
  end
  local v, i = x:sort(d)
  v, i = v:narrow(d, k, 1), i:narrow(d, k, 1)
  if not keepdim then v, i = v:squeeze(d), i:squeeze(d) end
  return v, i
end, true)

-- The lower median of all elements, the gradient shared by the elements
-- equal to it (torch.median()'s; median(dim)'s goes to the index it returns).
local MEDIAN_ALL = core.Function {
  name = "median",
  forward = function(ctx, x)
    local flat = x:reshape(-1)
    local y = (flat:sort())[(flat:size(1) + 1) // 2]
    if x:is_floating_point() and flat:isnan():any():item() then y = flat[flat:isnan():argmax():item()] end -- NaN propagates, as torch's
    ctx:save_for_backward(x, y)
    return y
  end,
  backward = function(ctx, g)
    local x, y = table.unpack(ctx.saved)
    local mask = (y:isnan():item() and x:isnan() or x:eq(y)):to(x.dtype) -- a NaN median's gradient: shared by the NaNs
    return mask * (g / mask:sum())
  end,
}

-- ember.median(x [, dim [, keepdim]]): without dim the lower median of all
-- elements (a 0-d tensor); with dim the lower median along it and its
-- 1-based index (torch.median: the smaller of the two middle values).
set("median", function(x, dim, keepdim)
  check_tensor("median", x)
  if dim == nil then
    if x:numel() == 0 and not x:is_floating_point() then fail("median", "the tensor is empty") end
    if x:numel() == 0 then return core.full({}, 0 / 0, { dtype = x.dtype, device = x.device }) end -- NaN, as torch's
    return MEDIAN_ALL(x)
  end
  local d = dim_of("median", x, dim)
  if x:dim() == 0 then return core.kthvalue(x, 1, d, keepdim) end
  local v, i = core.kthvalue(x, (x:size(d) + 1) // 2, d, true)
  if x:is_floating_point() then -- a row with a NaN has median NaN at its first NaN, as torch's
    local nan = x:isnan()
    local has = nan:any(d, true)
    if has:any():item() then
      local first = nan:argmax(d, true)
      v, i = core.where(has, x:gather(d, first), v), core.where(has, first, i)
    end
  end
  if not keepdim then v, i = v:squeeze(d), i:squeeze(d) end
  return v, i
end, true)

-- ---- constructors ---------------------------------------------------------------------

-- ember.logspace(start, stop, steps [, base = 10 [, opts]]): base^linspace(start, stop, steps).
set("logspace", function(start, stop, steps, base, opts)
  if type(base) == "table" or type(base) == "string" then base, opts = nil, base end
  if type(opts) == "table" and opts.base ~= nil then -- torch's keyword: logspace(0, 2, 3, {base = 2})
    if base ~= nil then fail("logspace", "base given twice (argument and option)") end
    local rest = {}
    for k, v in pairs(opts) do if k ~= "base" then rest[k] = v end end
    base, opts = opts.base, rest
  end
  base = base or 10
  if type(base) ~= "number" or not (base > 0) then fail("logspace", "base must be a number > 0, got %s", tostring(base)) end
  opts = helpers.creation_opts("logspace", opts)
  local e = core.linspace(start, stop, steps, { dtype = "float64" })
  local out = (e * math.log(base)):exp()
  return out:to(opts.dtype or core.get_default_dtype()):to(opts.device or "cpu")
end)

-- ember.meshgrid(a, b, ... [, {indexing = "ij"}]) or ember.meshgrid({a, b, ...}):
-- the coordinate grids of 1-d tensors (torch.meshgrid; "xy" swaps the first two
-- output dims, as numpy). Returns the grids as values.
set("meshgrid", function(...)
  local args = { ... }
  if #args == 1 and type(args[1]) == "table" and not core.is_tensor(args[1]) then args = args[1] end
  local opts = {}
  if type(args[#args]) == "table" and not core.is_tensor(args[#args]) then opts = table.remove(args) end
  opts = check_opts("meshgrid", opts, { indexing = true })
  local ix = opts.indexing or "ij"
  if ix ~= "ij" and ix ~= "xy" then fail("meshgrid", "indexing must be \"ij\" or \"xy\", got %s", tostring(ix)) end
  if #args == 0 then fail("meshgrid", "expected 1-d tensors") end
  local sizes = {}
  for i, t in ipairs(args) do
    check_tensor("meshgrid", t, "argument " .. i)
    if t:dim() ~= 1 then fail("meshgrid", "argument %d must be 1-d, got %s", i, shape_str(t)) end
    sizes[i] = t:size(1)
  end
  local order = {}
  for i = 1, #args do order[i] = i end
  if ix == "xy" and #args >= 2 then order[1], order[2] = 2, 1 end
  local shape = {}
  for j, i in ipairs(order) do shape[j] = sizes[i] end
  local out = {}
  for i, t in ipairs(args) do
    local view = {}
    for j, o in ipairs(order) do view[j] = o == i and sizes[i] or 1 end
    out[i] = t:view(table.unpack(view)):expand(shape)
  end
  return table.unpack(out)
end)

local function like_opts(x, opts)
  opts = helpers.creation_opts("new_tensor", opts)
  return { dtype = opts.dtype or x.dtype, device = opts.device or x.device, requires_grad = opts.requires_grad }
end

-- ember.empty_like(x [, opts]): as zeros_like (ember's empty memory is not
-- promised to be anything, so zeros it is).
set("empty_like", function(x, opts) return core.zeros(check_tensor("empty_like", x).shape, like_opts(x, opts)) end)

-- x:new_zeros(shape...), new_ones, new_full(shape, value), new_tensor(data):
-- x's dtype and device, as PyTorch's methods.
local function shape_args(op, ...)
  local a = { ... }
  local opts
  if (type(a[#a]) == "table" and #a > 1) or type(a[#a]) == "string" then opts = table.remove(a) end
  if #a == 1 and type(a[1]) == "table" then a = a[1] end
  for i, s in ipairs(a) do check_int(op, s, "size " .. i) end
  return a, opts
end
T.new_zeros = helpers.guard(function(x, ...)
  local s, o = shape_args("new_zeros", ...)
  return core.zeros(s, like_opts(x, o))
end)
T.new_ones = helpers.guard(function(x, ...)
  local s, o = shape_args("new_ones", ...)
  return core.ones(s, like_opts(x, o))
end)
T.new_full = helpers.guard(function(x, shape, value, opts)
  if type(shape) ~= "table" then fail("new_full", "shape must be a table of sizes, got %s", type(shape)) end
  return core.full(shape, value, like_opts(x, opts))
end)
T.new_tensor = helpers.guard(function(x, data, opts) return core.tensor(data, like_opts(x, opts)) end)
-- x:new_empty(shape...): as new_zeros (ember's empty memory is not promised to be anything)
T.new_empty = T.new_zeros

-- x:reshape_as(other), x:where(cond, y) (torch.where(cond, x, y)),
-- x:element_size() (bytes per element), x:type() (the dtype's name;
-- x:type(dtype) converts, as Torch7's and PyTorch's type).
T.reshape_as = helpers.guard(function(x, other)
  check_tensor("reshape_as", x)
  check_tensor("reshape_as", other, "other")
  return x:reshape(other.shape)
end)
T.where = helpers.guard(function(x, cond, y) return core.where(cond, check_tensor("where", x), y) end)
T.element_size = function(x) return core.dtype_info(check_tensor("element_size", x).dtype).size end
T.type = helpers.guard(function(x, dtype)
  check_tensor("type", x)
  if dtype == nil then return x.dtype end
  if type(dtype) ~= "string" then fail("type", "expected a dtype name such as \"float64\", got %s", type(dtype)) end
  return x:to(dtype)
end)

-- ---- products ------------------------------------------------------------------------

-- ember.addmm(input, m1, m2 [, {beta = 1, alpha = 1}]): beta input + alpha m1 @ m2
-- (torch.addmm); baddbmm the same for batches [B, n, m] @ [B, m, p], addbmm
-- with the batch summed, addmv for a matrix @ a vector, addr for the outer
-- product of two vectors (torch.baddbmm, addbmm, addmv, addr). input
-- broadcasts to the product's shape (a larger one is refused, as torch's);
-- beta = 0 ignores it (its NaN and inf do not reach the result; its
-- gradient is zeros); under ember.autocast a float32 input joins the
-- bfloat16 product in bfloat16, as torch.autocast's addmm and baddbmm.
local PRODUCTS = { -- the operands' names and dims, and the product
  addmm = { "mat1", "mat2", 2, 2, function(a, b) return a:matmul(b) end },
  baddbmm = { "batch1", "batch2", 3, 3, function(a, b) return a:matmul(b) end },
  addbmm = { "batch1", "batch2", 3, 3, function(a, b) return a:matmul(b):sum(1) end },
  addmv = { "mat", "vec", 2, 1, function(a, b) return a:matmul(b) end },
  addr = { "vec1", "vec2", 1, 1, function(a, b) return core.outer(a, b) end },
}
local function add_product(op, input, a, b, opts)
  local k = PRODUCTS[op]
  local names = { k[1], k[2] }
  check_tensor(op, input, "input")
  check_tensor(op, a, names[1])
  check_tensor(op, b, names[2])
  opts = check_opts(op, opts, { beta = true, alpha = true })
  if a:dim() ~= k[3] or b:dim() ~= k[4] then
    fail(op, "expected %d-d and %d-d operands, got %s and %s", k[3], k[4], shape_str(a), shape_str(b))
  end
  local beta, alpha = opts.beta or 1, opts.alpha or 1
  local prod = k[5](a, b)
  local ps, is = prod.shape, input.shape
  local fits = #is <= #ps
  for i = 1, #is do
    local d, p = is[#is - i + 1], ps[#ps - i + 1]
    if p and d ~= 1 and d ~= p then fits = false end
  end
  if not fits then
    fail(op, "input %s does not broadcast to the product's shape %s", shape_str(input), shape_str(prod))
  end
  if prod.dtype == "bfloat16" and input.dtype == "float32" then input = require("ember.autocast").cast(input) end
  if alpha ~= 1 then prod = prod * alpha end
  if beta == 0 then return prod + (input * 0):nan_to_num() end -- input's gradient: zeros
  return (beta == 1 and input or input * beta) + prod
end
for op in pairs(PRODUCTS) do
  set(op, function(input, a, b, opts) return add_product(op, input, a, b, opts) end, true)
end

-- ember.cross(a, b [, dim]): the cross product of 3-vectors along dim (the
-- first dim of size 3 by default, as torch.cross / torch.linalg.cross -1).
set("cross", function(a, b, dim)
  check_tensor("cross", a)
  check_tensor("cross", b, "argument 2")
  local d = dim
  if d == nil then
    for i = 1, a:dim() do if a:size(i) == 3 then d = i; break end end
    if d == nil then fail("cross", "no dim of size 3 in %s", shape_str(a)) end
  end
  d = dim_of("cross", a, d)
  if a:size(d) ~= 3 or b:dim() ~= a:dim() or b:size(d) ~= 3 then
    fail("cross", "dim %d must have size 3 in both, got %s and %s", d, shape_str(a), shape_str(b))
  end
  local function c(t, i) return t:narrow(d, i, 1) end
  return core.cat({ c(a, 2) * c(b, 3) - c(a, 3) * c(b, 2), c(a, 3) * c(b, 1) - c(a, 1) * c(b, 3),
                    c(a, 1) * c(b, 2) - c(a, 2) * c(b, 1) }, d)
end, true)

-- ---- unflatten ---------------------------------------------------------------------------

-- x:unflatten(dim, sizes): dim split into the dims sizes (one may be -1),
-- as torch.Tensor.unflatten (a view where reshape gives one).
set("unflatten", function(x, dim, sizes)
  local op = "unflatten"
  check_tensor(op, x)
  local n = x:dim()
  if math.type(dim) ~= "integer" or dim == 0 or dim < -n or dim > n then
    fail(op, "dim %s is out of range for a %d-d tensor (dims are 1-based: 1..%d or -%d..-1)", tostring(dim), n, n, n)
  end
  local d = dim < 0 and n + 1 + dim or dim
  local ok, known, free = type(sizes) == "table" and #sizes >= 1, 1, 0
  for _, s in ipairs(ok and sizes or {}) do
    if math.type(s) ~= "integer" or (s < 0 and s ~= -1) then ok = false end
    if s == -1 then free = free + 1 else known = known * s end
  end
  if not ok or free > 1 then fail(op, "sizes must be a list of integers >= 0 (one may be -1), got %s", tostring(sizes)) end
  local size = x:size(d)
  if (free == 0 and known ~= size) or (free == 1 and (known == 0 or size % known ~= 0)) then
    fail(op, "sizes {%s} do not multiply to the size %d of dim %d of shape %s", table.concat(sizes, ", "), size, d,
      shape_str(x))
  end
  local shape = {}
  for i = 1, d - 1 do shape[#shape + 1] = x:size(i) end
  for _, s in ipairs(sizes) do shape[#shape + 1] = s end
  for i = d + 1, n do shape[#shape + 1] = x:size(i) end
  return x:reshape(shape)
end, true)

-- ---- writing by index (out of place) ------------------------------------------------------

-- The 1-based int64 index [n] spread over x's shape with n along dim (for scatter_add).
local function spread(op, x, d, index, n_src_shape)
  if not core.is_tensor(index) or index.dtype ~= "int64" or index:dim() ~= 1 then
    fail(op, "index must be a 1-d int64 tensor of 1-based positions, got %s",
      core.is_tensor(index) and (index.dtype .. " " .. shape_str(index)) or type(index))
  end
  local view = {}
  for i = 1, x:dim() do view[i] = i == d and index:size(1) or 1 end
  return index:view(table.unpack(view)):expand(n_src_shape)
end

-- x:scatter_add(...) for op (index_add, index_fill, scatter): its errors name op.
local c_scatter_add = T.scatter_add -- the C op
local function scatter_add_as(op, x, d, index, src)
  local ok, r = pcall(c_scatter_add, x, d, index, src)
  if not ok then fail(op, "%s", (tostring(r):gsub("^.-ember%.scatter_add: ", ""))) end
  return r
end

-- fn(...)'s results; its error, raised again as op's (the part after "ember.f: ").
local function as_op(op, fn, ...)
  local r = table.pack(pcall(fn, ...))
  if not r[1] then fail(op, "%s", (tostring(r[2]):gsub("^.-ember%.[%w_]+: ", ""))) end
  return table.unpack(r, 2, r.n)
end

-- source's shape for index_add / index_copy: x's, with dim d the index's length.
local function check_source(op, x, d, index, source)
  local ok = source:dim() == x:dim() and core.is_tensor(index) and index:dim() == 1 and source:size(d) == index:size(1)
  for i = 1, x:dim() do ok = ok and (i == d or source:size(i) == x:size(i)) end
  if not ok then
    fail(op, "source must be x's shape %s with dim %d the index's length, got %s", shape_str(x), d, shape_str(source))
  end
end

-- ember.index_add(x, dim, index, source [, {alpha = 1}]): x with alpha *
-- source's slices added at the 1-based positions index along dim
-- (torch.index_add; repeated positions add up). Differentiable.
set("index_add", function(x, dim, index, source, opts)
  local op = "index_add"
  check_tensor(op, x)
  check_tensor(op, source, "source")
  opts = check_opts(op, opts, { alpha = true })
  local d = dim_of(op, x, dim)
  check_source(op, x, d, index, source)
  local src = (opts.alpha or 1) ~= 1 and source * opts.alpha or source
  return scatter_add_as(op, x, d, spread(op, x, d, index, source.shape), src)
end, true)

-- ember.index_copy(x, dim, index, source): x with the slices at the 1-based
-- positions index along dim replaced by source's (torch.index_copy; give
-- distinct positions: repeated ones add up). Differentiable in x and source.
set("index_copy", function(x, dim, index, source)
  local op = "index_copy"
  check_tensor(op, x)
  check_tensor(op, source, "source")
  local d = dim_of(op, x, dim)
  check_source(op, x, d, index, source)
  local spread_index = spread(op, x, d, index, source.shape)
  return scatter_add_as(op, as_op(op, x.index_fill, x, d, index, 0), d, spread_index, source:to(x.dtype))
end, true)

-- ember.index_fill(x, dim, index, value): x with the slices at the 1-based
-- positions index along dim set to value (torch.index_fill).
set("index_fill", function(x, dim, index, value)
  local op = "index_fill"
  check_tensor(op, x)
  local d = dim_of(op, x, dim)
  if type(value) ~= "number" and not core.is_tensor(value) then fail(op, "value must be a number, got %s", type(value)) end
  if x:dim() == 0 then return core.index_fill(x:reshape(1), 1, index, value):reshape({}) end -- as a 1-element vector
  local hit = core.zeros(x:size(d), { dtype = "float32", device = x.device })
  hit = scatter_add_as(op, hit, 1, index, core.ones(index.shape, { dtype = "float32", device = x.device })):gt(0)
  local view = {}
  for i = 1, x:dim() do view[i] = i == d and x:size(d) or 1 end
  return x:masked_fill(hit:view(table.unpack(view)):expand(x.shape), value)
end, true)

local function scatter_same(op, x, d, index, src)
  local ones = core.ones(index.shape, { dtype = x.dtype, device = x.device })
  local hit = scatter_add_as(op, core.zeros(x.shape, { dtype = x.dtype, device = x.device }), d, index, ones):gt(0)
  -- a number is written once wherever it lands, repeated indices too (as PyTorch)
  if not core.is_tensor(src) then return x:masked_fill(hit, src) end
  return scatter_add_as(op, x:masked_fill(hit, 0), d, index, src:to(x.dtype))
end

-- PyTorch's scatter takes an index smaller than x in the dims other than
-- dim, and a src larger than the index: the op then works on x's leading
-- part of those dims (src cut to the index's shape), the rest of x kept.
-- fn(x_part, index, src) is the op on matching shapes.
local function on_index_part(x, d, index, src, fn)
  if index:dim() ~= x:dim() then return fn(x, index, src) end -- its own error
  if core.is_tensor(src) and src:dim() == index:dim() then
    local cut, fits = src, true
    for i = 1, src:dim() do
      if src:size(i) < index:size(i) then fits = false end
      if fits and src:size(i) > index:size(i) then cut = cut:narrow(i, 1, index:size(i)) end
    end
    if fits then src = cut end
  end
  local smaller = false
  for i = 1, x:dim() do
    if i ~= d then
      if index:size(i) > x:size(i) then return fn(x, index, src) end -- its own error
      smaller = smaller or index:size(i) < x:size(i)
    end
  end
  if not smaller then return fn(x, index, src) end
  local function part(t, upto)
    -- t with the dims after upto (but dim d) cut to the index's sizes
    for i = upto + 1, t:dim() do
      if i ~= d and index:size(i) < t:size(i) then t = t:narrow(i, 1, index:size(i)) end
    end
    return t
  end
  local cur = fn(part(x, 0), index, src)
  for i = 1, x:dim() do
    local k, n = index:size(i), x:size(i)
    if i ~= d and k < n then cur = core.cat({ cur, part(x, i):narrow(i, k + 1, n - k) }, i) end
  end
  return cur
end

-- ember.scatter(x, dim, index, src): x with src's values written at the
-- 1-based positions index along dim (torch.scatter; src may be a number).
-- As PyTorch's, index may be smaller than x in the other dims and src
-- larger than index. Where an index repeats, src's values are summed
-- (PyTorch leaves which one wins unspecified; give distinct indices); a
-- number src is written once. A last {reduce = "add"} (torch's reduce=)
-- adds src's values instead, as scatter_add; "multiply" is refused.
-- A bool x (Hugging Face's top-p filter scatters a bool mask back to
-- vocabulary order) is written as int64 0/1 and read back as bool; src
-- may then be a boolean.
local function scatter(x, dim, index, src, opts)
  local op = "scatter"
  check_tensor(op, x)
  local d = dim_of(op, x, dim)
  if not core.is_tensor(index) or index.dtype ~= "int64" then fail(op, "index must be an int64 tensor (1-based)") end
  if x.dtype == "bool" then
    if type(src) == "boolean" then src = src and 1 or 0
    elseif core.is_tensor(src) then src = src:to("int64") end
    return scatter(x:to("int64"), dim, index, src, opts):ne(0)
  end
  if x:dim() == 0 and index:dim() == 0 and (not core.is_tensor(src) or src:dim() == 0) then -- a scalar: as a vector
    return core.scatter(x:reshape(1), 1, index:reshape(1), core.is_tensor(src) and src:reshape(1) or src, opts):reshape({})
  end
  if opts ~= nil then
    if type(opts) == "string" then opts = { reduce = opts } end
    if type(opts) ~= "table" then fail(op, "expected an options table {reduce=} after src, got %s", type(opts)) end
    for k in pairs(opts) do
      if k ~= "reduce" then fail(op, "unknown option '%s' (expected reduce)", tostring(k)) end
    end
    if opts.reduce == "add" then
      if not core.is_tensor(src) then src = core.full(index.shape, src, { dtype = x.dtype, device = x.device }) end
      return core.scatter_add(x, dim, index, src)
    elseif opts.reduce ~= nil then
      fail(op, "reduce must be nil or \"add\", got %s (\"multiply\" is not supported)", tostring(opts.reduce))
    end
  end
  return on_index_part(x, d, index, src, function(xp, i, s) return scatter_same(op, xp, d, i, s) end)
end
set("scatter", scatter, true)

-- x:scatter_add(dim, index, src): as the C op, and as PyTorch's with an
-- index smaller than x in the other dims and a src larger than the index.
set("scatter_add", function(x, dim, index, src)
  local ok, y = pcall(c_scatter_add, x, dim, index, src) -- the common case costs one call
  if ok then return y end
  if core.is_tensor(x) and x:dim() == 0 and core.is_tensor(index) and index:dim() == 0 and core.is_tensor(src) and
      src:dim() == 0 and (dim == 1 or dim == -1) then -- a scalar: as torch's dim 0 of it
    return c_scatter_add(x:reshape(1), 1, index:reshape(1), src:reshape(1)):reshape({})
  end
  if core.is_tensor(x) and core.is_tensor(index) and core.is_tensor(src) and math.type(dim) == "integer" and
      dim ~= 0 and dim >= -x:dim() and dim <= x:dim() then
    local d = dim < 0 and x:dim() + 1 + dim or dim
    return on_index_part(x, d, index, src, function(xp, i, s) return c_scatter_add(xp, dim, i, s) end)
  end
  error(y, 0)
end, true)

-- ---- PyTorch's keyword forms of a few methods ---------------------------------------------

-- x:sort{dim =, descending =}, x:argsort{...}, x:topk(k, {dim =, largest =,
-- sorted =}): an options table where the positional arguments go.
-- The plain call is a tail call of the original (its errors keep the
-- caller's line, and it pays no pcall); only the options form is guarded.
local function keyword(name, known, order, nlead)
  local f = T[name]
  local with_opts = helpers.guard(function(x, args, opts)
    opts = check_opts(name, opts, known)
    for i, k in ipairs(order) do args[nlead + i] = opts[k] end
    return f(x, table.unpack(args, 1, nlead + #order))
  end)
  local w = function(x, ...)
    local opts = select(nlead + 1, ...)
    if select("#", ...) == nlead + 1 and type(opts) == "table" and not core.is_tensor(opts) then
      return with_opts(x, { ... }, opts)
    end
    return f(x, ...)
  end
  T[name] = w
  core[name] = w
end
-- x:sum{dim = 2, keepdim = true} and x:sum(2, {keepdim = true}): PyTorch's
-- keywords for the reductions over (dim, keepdim), as std and var take them;
-- a plain list of dims (x:sum({1, 2})) stays a list. The C methods raise at
-- their caller, which a Lua wrapper would be: the plain call is guarded too.
local function dim_keyword(name)
  local f = T[name]
  local plain = helpers.guard(f)
  local DTYPE = { sum = true, mean = true, prod = true } -- torch's dtype= (x converted first)
  local with_opts = helpers.guard(function(x, dim, opts, keepdim)
    check_tensor(name, x)
    opts = check_opts(name, opts, { dim = true, keepdim = true, dtype = DTYPE[name] })
    if opts.dtype ~= nil then x = x:to(opts.dtype) end
    if keepdim ~= nil then
      if opts.keepdim ~= nil then fail(name, "keepdim given twice") end
      opts = { dim = opts.dim, keepdim = keepdim }
    end
    if dim ~= nil and opts.dim ~= nil then fail(name, "dim given twice (%s and dim = %s)", tostring(dim), tostring(opts.dim)) end
    local d = dim
    if d == nil then d = opts.dim end
    if opts.keepdim ~= nil and type(opts.keepdim) ~= "boolean" then
      fail(name, "keepdim must be a boolean, got %s", type(opts.keepdim))
    end
    if d == nil then
      if not opts.keepdim or x:dim() == 0 then return f(x) end
      -- max/min refuse keepdim without a dim, argmax/argmin keep every dim (torch)
      if name == "max" or name == "min" or name == "argmax" or name == "argmin" then return f(x, nil, true) end
      d = {}
      for i = 1, x:dim() do d[i] = i end -- every dim, kept: PyTorch's x.sum(keepdim=True)
    end
    return f(x, d, opts.keepdim == true)
  end)
  local w = function(x, a, b, c, ...)
    if b == nil and type(a) == "table" and getmetatable(a) == nil and a[1] == nil then return with_opts(x, nil, a) end
    if type(b) == "table" and getmetatable(b) == nil then return with_opts(x, a, b) end
    -- x:sum(dim, keepdim, {dtype =})
    if type(c) == "table" and getmetatable(c) == nil then return with_opts(x, a, c, b) end
    return plain(x, a, b, c, ...)
  end
  T[name] = w
  core[name] = w
end
for _, name in ipairs { "sum", "mean", "max", "min", "argmax", "argmin", "amax", "amin", "logsumexp", "all", "any", "prod", "median" } do
  if T[name] then dim_keyword(name) end
end

keyword("sort", { dim = true, descending = true, stable = true }, { "dim", "descending" }, 0)
keyword("argsort", { dim = true, descending = true, stable = true }, { "dim", "descending" }, 0)
keyword("topk", { dim = true, largest = true, sorted = true }, { "dim", "largest", "sorted" }, 1)

-- x:split({2, 3, 5} [, dim]): pieces of the given sizes (torch.split with a
-- list); a number keeps the equal-pieces form.
do
  local split = T.split
  local sizes = helpers.guard(function(x, size, dim, ...)
    if select("#", ...) > 0 then core._noextra("split", "split_size, dim", 3, x, size, dim, ...) end
    check_tensor("split", x)
    local d = dim_of("split", x, dim or 1)
    local total, at, out = 0, 1, {}
    for i, s in ipairs(size) do total = total + check_int("split", s, "size " .. i) end
    if total ~= x:size(d) then
      fail("split", "sizes sum to %d, but dim %d has size %d", total, d, x:size(d))
    end
    for i, s in ipairs(size) do
      out[i] = x:narrow(d, at, s)
      at = at + s
    end
    return setmetatable(out, getmetatable(split(x, x:size(d), d)))
  end)
  T.split = function(x, size, dim, ...)
    if type(size) == "table" then return sizes(x, size, dim, ...) end
    return split(x, size, dim, ...) -- the C op refuses more arguments
  end
  core.split = T.split
end

-- x:squeeze({1, 3}): several size-1 dims at once (PyTorch 2's dim tuple).
do
  local squeeze = T.squeeze
  local several = helpers.guard(function(x, dim)
    check_tensor("squeeze", x)
    if dim[1] == nil and next(dim) ~= nil then -- x:squeeze({dim = 2}), the keyword form
      dim = check_opts("squeeze", dim, { dim = true }).dim
      if dim == nil then return x:squeeze() end
      if type(dim) ~= "table" then return squeeze(x, dim) end
    end
    local dims = {}
    for i, d in ipairs(dim) do dims[i] = dim_of("squeeze", x, d) end
    table.sort(dims, function(a, b) return a > b end)
    for _, d in ipairs(dims) do x = squeeze(x, d) end
    return x
  end)
  -- the C method raises at its caller, which a Lua wrapper would be: guarded
  local one = helpers.guard(squeeze)
  T.squeeze = function(x, dim)
    if type(dim) == "table" then return several(x, dim) end
    return one(x, dim)
  end
  core.squeeze = T.squeeze
end

-- ---- operators: a // b, a % b, and & | ~ on bool tensors -------------------------------------

-- As Python's on torch tensors: // is floor_divide, % is remainder (the
-- divisor's sign), and on bool tensors & | ~ (xor) and unary ~ are the
-- logical ops. Integer bitwise operations are not ember's: an error says so.
do
  local mt = debug.getregistry()["ember.Tensor"]
  local function bool_op(sym, fn)
    return function(a, b)
      for _, t in ipairs { a, b } do
        if core.is_tensor(t) and t.dtype ~= "bool" then
          fail("operator " .. sym, "%s on a %s tensor: only bool tensors (logical) take it; integer bitwise "
            .. "operations are not supported", sym, t.dtype)
        end
      end
      return fn(a, b)
    end
  end
  mt.__idiv = helpers.guard(function(a, b) return core.floor_divide(a, b) end)
  mt.__mod = helpers.guard(function(a, b) return core.remainder(a, b) end)
  mt.__band = helpers.guard(bool_op("&", function(a, b) return core.logical_and(a, b) end))
  mt.__bor = helpers.guard(bool_op("|", function(a, b) return core.logical_or(a, b) end))
  mt.__bxor = helpers.guard(bool_op("~", function(a, b) return core.logical_xor(a, b) end))
  mt.__bnot = helpers.guard(bool_op("~", function(a) return core.logical_not(a) end))
end

-- ember.Generator and the {generator = g} option of the random functions
require "ember._generator"
