-- ember/_everyday.lua: more of the tensor functions a PyTorch 1.13 or
-- Torch7 user reaches for at the prompt, composed from core ops (autograd,
-- every dtype and backend for free), each a function (ember.nansum(x)) and
-- a tensor method (x:nansum()):
--   diagonal, take, take_along_dim, fliplr, flipud, nansum, nanmean,
--   logaddexp, hypot, frac, deg2rad, rad2deg, sgn, true_divide,
--   is_floating_point (as a function too); ember.cat skipping 1-d empty
--   tensors beside others, as torch.cat; ember.normal in torch's argument orders;
--   cummax/cummin, unfold (sliding windows), rot90; tensordot, inner, kron,
--   cdist, tril_indices/triu_indices (1-based), broadcast_shapes,
--   broadcast_tensors, diag_embed, ravel, var_mean/std_mean, aminmax;
--   softmax / log_softmax with torch's dtype=;
--   Torch7's names: nDimension/ndimension, nElement, isContiguous, fill and
--   zero (in place, as Torch7's), isSameSizeAs/is_same_size; index, viewAs,
--   maskedSelect, ger; in place as Torch7's: indexCopy, indexFill, indexAdd,
--   maskedFill, maskedCopy, cmul, cdiv, copy, uniform, normal, apply, map,
--   map2; resize/resizeAs (resize_/resize_as_: x itself reshaped), expandAs;
--   the constructor ember.Tensor(2, 3); storage/storageOffset/set refused, saying why.
-- Dims and indices are 1-based, as everywhere in the Lua API; errors name
-- the function and are raised at the caller's line. init.lua loads it.
local core = require "ember.core"
local helpers = require "ember._helpers"
local shape_str = require("ember._errors").shape_str

local T = core.Tensor
local fail, check_tensor, set = helpers.fail, helpers.check_tensor, helpers.set

-- A user's dim (1-based, negative from the end) as a positive one.
local dim_of = require("ember._functional").check_dim

local function int64_index(op, index, what)
  if not core.is_tensor(index) or index.dtype ~= "int64" then
    fail(op, "%s must be an int64 tensor of 1-based positions, got %s", what or "index",
      core.is_tensor(index) and index.dtype or type(index))
  end
  return index
end

-- ---- views and indexing ---------------------------------------------------------

-- x:diagonal([offset = 0 [, dim1 = 1 [, dim2 = 2]]]): the diagonal of the
-- dim1 x dim2 matrices, as a last dim (torch.diagonal; offset > 0 above the
-- main diagonal). A copy, not a view (differentiable).
set("diagonal", function(x, offset, dim1, dim2)
  local op = "diagonal"
  check_tensor(op, x)
  offset = offset or 0
  if math.type(offset) ~= "integer" then fail(op, "offset must be an integer, got %s", tostring(offset)) end
  if x:dim() < 2 then fail(op, "expected a tensor with at least 2 dims, got %s", shape_str(x)) end
  local d1, d2 = dim_of(op, x, dim1 or 1), dim_of(op, x, dim2 or 2)
  if d1 == d2 then fail(op, "dim1 and dim2 must differ, both are %d", d1) end
  -- dim1 and dim2 last, then the positions (i, i + offset) of the flattened [n * k]
  local perm, shape = {}, {}
  for i = 1, x:dim() do
    if i ~= d1 and i ~= d2 then
      perm[#perm + 1] = i
      shape[#shape + 1] = x:size(i)
    end
  end
  perm[#perm + 1], perm[#perm + 2] = d1, d2
  local n, k = x:size(d1), x:size(d2)
  local r0, c0 = math.max(0, -offset), math.max(0, offset)
  local len = math.max(0, math.min(n - r0, k - c0))
  if len == 0 then
    shape[#shape + 1] = 0
    return core.zeros(shape, { dtype = x.dtype, device = x.device })
  end
  shape[#shape + 1] = n * k
  local flat = x:permute(perm):reshape(shape)
  local idx = core.arange(0, len, { dtype = "int64", device = x.device }) * (k + 1) + (r0 * k + c0 + 1)
  return flat:index_select(flat:dim(), idx)
end, true)

-- x:take(index): the elements of x flattened at the 1-based positions index
-- (any shape; the result has index's shape; -1 the last), as torch.take.
set("take", function(x, index)
  check_tensor("take", x)
  int64_index("take", index)
  local flat = helpers.positions("take", index:reshape(-1), x:numel(), x:numel() .. " elements")
  if flat:numel() > 0 and flat:max():item() > x:numel() then
    fail("take", "index %d is out of range for %d elements (1-based: 1..%d or -%d..-1)", flat:max():item(),
      x:numel(), x:numel(), x:numel())
  end
  return x:reshape(-1):index_select(1, flat):view(index.shape)
end, true)

-- x:take_along_dim(index, dim): gather along dim with index broadcast to x
-- (but along dim), as torch.take_along_dim; without dim, take of x flattened.
set("take_along_dim", function(x, index, dim)
  local op = "take_along_dim"
  check_tensor(op, x)
  int64_index(op, index)
  if dim == nil then return x:reshape(-1):index_select(1, index:reshape(-1)) end
  local d = dim_of(op, x, dim)
  if index:dim() ~= x:dim() then
    fail(op, "index must have as many dims as x: %s vs %s", shape_str(index), shape_str(x))
  end
  local xs, is = {}, {}
  for i = 1, x:dim() do
    local a, b = x:size(i), index:size(i)
    if i ~= d and a ~= b and a ~= 1 and b ~= 1 then
      fail(op, "index %s and x %s cannot be broadcast at dim %d", shape_str(index), shape_str(x), i)
    end
    xs[i] = i == d and a or math.max(a, b)
    is[i] = i == d and b or math.max(a, b)
  end
  return x:expand(xs):gather(d, index:expand(is))
end, true)

-- x:gather(dim, index): as the C op, and as PyTorch's gather an index
-- smaller than x in the dims other than dim reads x's leading part there.
local c_gather = T.gather
set("gather", function(x, dim, index, ...)
  if select("#", ...) > 0 then core._noextra("gather", "dim, index", 3, x, dim, index, ...) end
  local ok, y = pcall(c_gather, x, dim, index) -- the common case costs one call
  if ok then return y end
  if core.is_tensor(x) and core.is_tensor(index) and x:dim() == 0 and index:dim() == 0 and (dim == 1 or dim == -1) then
    return c_gather(x:reshape(1), 1, index:reshape(1)):reshape({}) -- a scalar: as torch's dim 0 of it
  end
  if core.is_tensor(x) and core.is_tensor(index) and index:dim() == x:dim() and math.type(dim) == "integer" and
      dim ~= 0 and dim >= -x:dim() and dim <= x:dim() then
    local d, part = dim < 0 and x:dim() + 1 + dim or dim, x
    for i = 1, x:dim() do
      if i ~= d and index:size(i) > x:size(i) then error(y, 0) end
      if i ~= d and index:size(i) < x:size(i) then part = part:narrow(i, 1, index:size(i)) end
    end
    if part ~= x then return c_gather(part, dim, index) end
  end
  error(y, 0)
end, true)

-- x:fliplr() / x:flipud(): x reversed along dim 2 / dim 1 (torch's).
set("fliplr", function(x)
  check_tensor("fliplr", x)
  if x:dim() < 2 then fail("fliplr", "expected a tensor with at least 2 dims, got %s", shape_str(x)) end
  return x:flip(2)
end, true)
set("flipud", function(x)
  check_tensor("flipud", x)
  if x:dim() < 1 then fail("flipud", "expected a tensor with at least 1 dim, got a 0-d tensor") end
  return x:flip(1)
end, true)

-- ember.cat(tensors [, dim]) skips 1-d empty tensors beside others (their
-- dtype still counts), as torch.cat does: `acc = ember.cat({acc, x})` from
-- `acc = ember.tensor{}` is a common loop.
local c_cat = core.cat
set("cat", function(tensors, dim, ...)
  local ok, y = pcall(c_cat, tensors, dim, ...) -- the common case costs one call (its checks see every argument)
  if ok then return y end
  if type(tensors) ~= "table" then error(y, 0) end
  local kept, skipped = {}, nil
  for i = 1, #tensors do
    local t = tensors[i]
    if not core.is_tensor(t) then error(y, 0) end -- its error, numbered as given
    if t:dim() == 1 and t:size(1) == 0 then
      skipped = skipped or t
    else
      kept[#kept + 1] = t
    end
  end
  if not skipped or #kept == 0 then error(y, 0) end
  y = c_cat(kept, dim)
  local dt = (core.zeros({}, { dtype = skipped.dtype }) + core.zeros({}, { dtype = y.dtype })).dtype
  return dt == y.dtype and y or y:to(dt)
end)

-- ember.normal also in torch's argument orders: normal(mean, std, size [, opts])
-- with numbers, and normal(mean, std) with tensors (broadcast; one sample each,
-- not differentiable); ember's own is normal(shape, mean, std [, opts]).
local c_normal = core.normal
set("normal", function(a, b, c, d)
  if core.is_tensor(a) or core.is_tensor(b) then
    for _, v in ipairs { a, b } do
      if not core.is_tensor(v) and type(v) ~= "number" then
        fail("normal", "mean and std must be tensors or numbers, got %s", type(v))
      end
    end
    if c ~= nil then fail("normal", "normal(mean, std) with tensors takes no size (the result has their shape)") end
    local like = core.is_tensor(a) and a or b
    local zero = like:detach() * 0
    local base = (core.is_tensor(a) and a:detach() or zero + a) + (core.is_tensor(b) and b:detach() * 0 or zero)
    local std = core.is_tensor(b) and b:detach() or b
    local dt = base:is_floating_point() and base.dtype or core.get_default_dtype()
    return base:to(dt) + core.randn(base.shape, { dtype = dt, device = base.device }) * std
  end
  if type(a) == "number" and type(c) == "table" then return c_normal(c, a, b, d) end -- torch's order
  return c_normal(a, b, c, d)
end)

-- ---- running extrema, sliding windows, rotation -----------------------------------

-- The 1-based index of the running maximum (minimum) along dim d, ties and
-- NaN resolved as PyTorch's cummax: the latest of equal values, and a NaN
-- once met. A doubling scan: log2(n) steps, each comparing every position
-- with the best of the segment just before it.
local function running_index(x, d, is_max)
  local n = x:size(d)
  local view = {}
  for i = 1, x:dim() do view[i] = i == d and n or 1 end
  local idx = core.arange(1, n + 1, { dtype = "int64", device = x.device }):view(view):expand(x.shape):contiguous()
  local val = x
  local s = 1
  while s < n do
    -- the segment before each position; the first s positions face themselves
    local pv = core.cat({ val:narrow(d, 1, s), val:narrow(d, 1, n - s) }, d)
    local pi = core.cat({ idx:narrow(d, 1, s), idx:narrow(d, 1, n - s) }, d)
    local better = is_max and pv:gt(val) or pv:lt(val)
    if x:is_floating_point() then better = better:logical_or(pv:isnan():logical_and(val:isnan():logical_not())) end
    val, idx = core.where(better, pv, val), core.where(better, pi, idx)
    s = s * 2
  end
  return idx
end

local function cumulative(op, is_max)
  return function(x, dim)
    check_tensor(op, x)
    if dim == nil then fail(op, "dim is required (1-based; -1 is the last)") end
    if x:dim() == 0 then return x:clone(), core.ones({}, { dtype = "int64", device = x.device }) end
    local d = dim_of(op, x, dim)
    if x:size(d) == 0 then return x:clone(), core.zeros(x.shape, { dtype = "int64", device = x.device }) end
    local idx = running_index(x:detach(), d, is_max)
    return x:gather(d, idx), idx
  end
end

-- x:cummax(dim) -> values, indices: the running maximum along dim and the
-- 1-based index where it was taken (torch.cummax: ties give the latest
-- index). Differentiable (the gradient goes to those indices).
set("cummax", cumulative("cummax", true), true)
-- x:cummin(dim) -> values, indices: the running minimum (torch.cummin).
set("cummin", cumulative("cummin", false), true)

-- x:unfold(dim, size, step): the windows of size elements every step along
-- dim, as a new last dim (torch.Tensor.unfold: dim becomes the window count
-- (n - size) // step + 1). A copy, not a view (differentiable).
set("unfold", function(x, dim, size, step)
  local op = "unfold"
  check_tensor(op, x)
  local d = x:dim() == 0 and 1 or dim_of(op, x, dim)
  local n = x:dim() == 0 and 1 or x:size(d)
  if math.type(size) ~= "integer" or size < 0 or size > n then
    fail(op, "size must be an integer in 0..%d (the size of dim %d), got %s", n, d, tostring(size))
  end
  if math.type(step) ~= "integer" or step < 1 then fail(op, "step must be an integer >= 1, got %s", tostring(step)) end
  if x:dim() == 0 then return x:view(1) end
  local count = (n - size) // step + 1
  local pieces = {}
  for o = 1, size do pieces[o] = x:slice(d, o, o + (count - 1) * step, step) end
  if size == 0 then
    local shape = {}
    for i = 1, x:dim() do shape[i] = i == d and count or x:size(i) end
    shape[#shape + 1] = 0
    return core.zeros(shape, { dtype = x.dtype, device = x.device })
  end
  return core.stack(pieces, -1)
end, true)

-- x:rot90([k = 1 [, dims = {1, 2}]]): rotated by 90 degrees k times, from
-- the first dim towards the second (torch.rot90).
set("rot90", function(x, k, dims)
  local op = "rot90"
  check_tensor(op, x)
  k = k or 1
  dims = dims or { 1, 2 }
  if math.type(k) ~= "integer" then fail(op, "k must be an integer, got %s", tostring(k)) end
  if type(dims) ~= "table" or #dims ~= 2 then fail(op, "dims must be a list of 2 dims, got %s", tostring(dims)) end
  if x:dim() < 2 then fail(op, "expected a tensor with at least 2 dims, got %s", shape_str(x)) end
  local a, b = dim_of(op, x, dims[1]), dim_of(op, x, dims[2])
  if a == b then fail(op, "the two dims must differ, both are %d", a) end
  k = k % 4
  if k == 1 then return x:flip(b):transpose(a, b) end
  if k == 2 then return x:flip({ a, b }) end
  if k == 3 then return x:flip(a):transpose(a, b) end
  return x:clone()
end, true)

-- ---- products, distances, index lists, broadcasting ------------------------------

-- A list of 1-based dims of x (negative from the end), or a count.
local function dims_list(op, x, dims, what)
  if type(dims) ~= "table" then fail(op, "%s must be a list of dims, got %s", what, type(dims)) end
  local out, seen = {}, {}
  for i, d in ipairs(dims) do
    out[i] = dim_of(op, x, d)
    if seen[out[i]] then fail(op, "%s: dim %d repeated", what, out[i]) end
    seen[out[i]] = true
  end
  return out
end

-- ember.tensordot(a, b [, dims = 2]): the sum over the last dims of a and
-- the first of b (dims a count), or over the dims given as {{a dims}, {b
-- dims}} (1-based), as torch.tensordot. Differentiable.
set("tensordot", function(a, b, dims)
  local op = "tensordot"
  check_tensor(op, a)
  check_tensor(op, b, "argument 2")
  dims = dims == nil and 2 or dims
  local da, db
  if math.type(dims) == "integer" then
    if dims < 0 or dims > a:dim() or dims > b:dim() then fail(op, "dims %d is more than the operands have", dims) end
    da, db = {}, {}
    for i = 1, dims do
      da[i] = a:dim() - dims + i
      db[i] = i
    end
  elseif type(dims) == "table" and #dims == 2 then
    da, db = dims_list(op, a, dims[1], "a's dims"), dims_list(op, b, dims[2], "b's dims")
    if #da ~= #db then fail(op, "as many dims of a as of b, got %d and %d", #da, #db) end
  else
    fail(op, "dims must be a count or {{a dims}, {b dims}}, got %s", tostring(dims))
  end
  local ca, cb, k = {}, {}, 1
  for i, d in ipairs(da) do
    if a:size(d) ~= b:size(db[i]) then
      fail(op, "contracted sizes differ: dim %d of a is %d, dim %d of b is %d", d, a:size(d), db[i], b:size(db[i]))
    end
    ca[d], cb[db[i]], k = true, true, k * a:size(d)
  end
  local pa, pb, shape, m, n = {}, {}, {}, 1, 1
  for i = 1, a:dim() do if not ca[i] then pa[#pa + 1], shape[#shape + 1], m = i, a:size(i), m * a:size(i) end end
  for _, d in ipairs(da) do pa[#pa + 1] = d end
  for _, d in ipairs(db) do pb[#pb + 1] = d end
  for i = 1, b:dim() do if not cb[i] then pb[#pb + 1], shape[#shape + 1], n = i, b:size(i), n * b:size(i) end end
  local y = a:permute(pa):reshape(m, k):matmul(b:permute(pb):reshape(k, n))
  return y:reshape(shape)
end)

-- a:inner(b): the sum over the last dims of a and b (torch.inner).
set("inner", function(a, b)
  check_tensor("inner", a)
  check_tensor("inner", b, "argument 2")
  if a:dim() == 0 or b:dim() == 0 then return a * b end
  return core.tensordot(a, b, { { -1 }, { -1 } })
end, true)

-- ember.kron(a, b): the Kronecker product (torch.kron). Differentiable.
set("kron", function(a, b, ...)
  if select("#", ...) > 0 then core._noextra("kron", "other", 2, a, b, ...) end
  local op = "kron"
  check_tensor(op, a)
  check_tensor(op, b, "argument 2")
  local nd = math.max(a:dim(), b:dim())
  local va, vb, out = {}, {}, {}
  for i = 1, nd do
    local sa = i > nd - a:dim() and a:size(i - (nd - a:dim())) or 1
    local sb = i > nd - b:dim() and b:size(i - (nd - b:dim())) or 1
    va[#va + 1], va[#va + 2] = sa, 1
    vb[#vb + 1], vb[#vb + 2] = 1, sb
    out[i] = sa * sb
  end
  return (a:reshape(va) * b:reshape(vb)):reshape(out)
end, true)

-- ember.cdist(x1, x2 [, p = 2]): the p-norm distances between the rows of
-- x1 [..., P, M] and x2 [..., R, M], [..., P, R] (torch.cdist; a zero
-- distance has a zero gradient). Differentiable.
set("cdist", function(x1, x2, p)
  local op = "cdist"
  check_tensor(op, x1)
  check_tensor(op, x2, "argument 2")
  if x1:dim() < 2 or x2:dim() < 2 or x1:size(-1) ~= x2:size(-1) then
    fail(op, "expected [..., P, M] and [..., R, M], got %s and %s", shape_str(x1), shape_str(x2))
  end
  return (x1:unsqueeze(-2) - x2:unsqueeze(-3)):norm(p or 2, -1)
end)

-- ember.tril_indices(rows, cols [, offset = 0 [, opts]]): the 1-based (row,
-- col) positions of the lower triangle, as a [2, n] int64 tensor in
-- row-major order (torch.tril_indices; +1); triu_indices the upper one.
local function tri_indices(op, lower)
  return function(rows, cols, offset, opts)
    if type(offset) == "table" or type(offset) == "string" then offset, opts = nil, offset end
    offset = offset or 0
    for _, v in ipairs { rows, cols, offset } do
      if math.type(v) ~= "integer" then fail(op, "rows, cols and offset must be integers, got %s", tostring(v)) end
    end
    if rows < 0 or cols < 0 then fail(op, "rows and cols must be >= 0, got %d and %d", rows, cols) end
    opts = helpers.creation_opts(op, opts)
    -- tensor ops, not a Lua loop over rows * cols (which hung on 2^40 rows):
    -- a size too large to allocate is the core's error, named here
    local ok, out = pcall(function()
      local i = core.arange(1, rows + 1, { dtype = "int64", device = opts.device }):view(rows, 1)
      local j = core.arange(1, cols + 1, { dtype = "int64", device = opts.device }):view(1, cols)
      local d = j - i
      local keep = lower and d:le(offset) or d:ge(offset)
      return core.stack({ i:expand(rows, cols):masked_select(keep), j:expand(rows, cols):masked_select(keep) })
    end)
    if not ok then fail(op, "%s", require("ember._errors").strip_library_position(tostring(out))) end
    return out:to(opts.dtype or "int64")
  end
end
set("tril_indices", tri_indices("tril_indices", true))
set("triu_indices", tri_indices("triu_indices", false))

-- ember.broadcast_shapes(s1, s2, ...): the shape the given ones broadcast to
-- (tables or ember.Size), as torch.broadcast_shapes.
local broadcast_shapes = require("ember._functional").broadcast_shapes
set("broadcast_shapes", function(...)
  local shapes = { ... }
  for i, s in ipairs(shapes) do
    if type(s) ~= "table" and type(s) ~= "userdata" then fail("broadcast_shapes", "argument %d must be a shape, got %s", i, type(s)) end
  end
  return broadcast_shapes("broadcast_shapes", shapes)
end)

-- ember.broadcast_tensors(a, b, ...): the tensors expanded (views) to their
-- common shape, as a list (torch.broadcast_tensors).
set("broadcast_tensors", function(...)
  local ts, shapes = { ... }, {}
  if #ts == 1 and type(ts[1]) == "table" and not core.is_tensor(ts[1]) then ts = ts[1] end
  for i, t in ipairs(ts) do shapes[i] = check_tensor("broadcast_tensors", t, "argument " .. i).shape end
  local shape = broadcast_shapes("broadcast_tensors", shapes)
  local out = {}
  for i, t in ipairs(ts) do out[i] = t:expand(shape) end
  return out
end)

-- x:diag_embed([offset = 0]): the last dim of x on the diagonals of new
-- last two dims (torch.diag_embed with dim1 = -2, dim2 = -1).
set("diag_embed", function(x, offset, dim1, dim2)
  local op = "diag_embed"
  check_tensor(op, x)
  offset = offset or 0
  if math.type(offset) ~= "integer" then fail(op, "offset must be an integer, got %s", tostring(offset)) end
  if (dim1 ~= nil and dim1 ~= -2) or (dim2 ~= nil and dim2 ~= -1) then
    fail(op, "only the last two dims (dim1 = -2, dim2 = -1) are supported")
  end
  if x:dim() == 0 then fail(op, "expected a tensor with at least 1 dim, got a 0-d tensor") end
  local n = x:size(-1)
  local y = x:unsqueeze(-1) * core.eye(n, { dtype = x.dtype, device = x.device })
  if offset > 0 then return core.pad(y, { offset, 0, 0, offset }) end
  if offset < 0 then return core.pad(y, { 0, -offset, -offset, 0 }) end
  return y
end, true)

-- x:ravel(): x flattened (torch.ravel: a view when x is contiguous).
set("ravel", function(x) return check_tensor("ravel", x):reshape(-1) end, true)

-- (dim, keepdim) of var's arguments, for var_mean and std_mean.
local function var_dim_keep(a, b, c)
  if type(a) == "table" and a[1] == nil then return a.dim, a.keepdim == true end
  if type(a) == "boolean" then return nil, false end
  if type(b) == "table" then return a, b.keepdim == true end
  return a, c == true
end

-- x:var_mean(...) / x:std_mean(...): var (std) and mean over the same dims,
-- with var's arguments (torch.var_mean, torch.std_mean).
set("var_mean", function(x, ...)
  check_tensor("var_mean", x)
  local dim, keep = var_dim_keep(...)
  return x:var(...), x:mean({ dim = dim, keepdim = keep })
end, true)
set("std_mean", function(x, ...)
  check_tensor("std_mean", x)
  local dim, keep = var_dim_keep(...)
  return x:std(...), x:mean({ dim = dim, keepdim = keep })
end, true)

-- x:aminmax([dim [, keepdim]]) or x:aminmax({dim =, keepdim =}) -> min, max
-- (torch.aminmax).
set("aminmax", function(x, dim, keepdim)
  check_tensor("aminmax", x)
  if type(dim) == "table" and dim[1] == nil then dim, keepdim = dim.dim, dim.keepdim end
  if dim == nil and x:numel() == 0 then fail("aminmax", "the tensor is empty (%s): give a dim to reduce", shape_str(x)) end
  return x:amin(dim, keepdim), x:amax(dim, keepdim)
end, true)

-- x:softmax(dim [, {dtype =}]), x:softmax{dim =, dtype =} and log_softmax:
-- torch's dim= and dtype= (a dtype converts x first); the C ops otherwise.
local function with_dtype(op, c_op)
  return function(x, dim, opts, ...)
    require("ember._errors").no_extra("ember." .. op, { "dim", "options" }, 2, dim, opts, ...)
    x, dim = helpers.dim_and_dtype(op, x, dim, opts)
    return c_op(x, dim)
  end
end
set("softmax", with_dtype("softmax", T.softmax), true)
set("log_softmax", with_dtype("log_softmax", T.log_softmax), true)

-- ---- reductions ignoring NaN ---------------------------------------------------------

local function zero_nan(x)
  if not x:is_floating_point() then return x end
  return core.where(x:isnan(), core.zeros({}, { dtype = x.dtype, device = x.device }), x)
end

-- x:nansum([dim [, keepdim]]): sum with NaN counted as 0 (torch.nansum).
set("nansum", function(x, dim, keepdim)
  check_tensor("nansum", x)
  helpers.check_dims("nansum", x, dim)
  return zero_nan(x):sum(dim, keepdim)
end, true)

-- x:nanmean([dim [, keepdim]]): the mean of the elements that are not NaN
-- (torch.nanmean; NaN where all are).
set("nanmean", function(x, dim, keepdim)
  check_tensor("nanmean", x)
  helpers.check_dims("nanmean", x, dim)
  if not x:is_floating_point() then fail("nanmean", "expected a float tensor, got %s", x.dtype) end
  local n = x:isnan():logical_not():to(x.dtype):sum(dim, keepdim)
  return zero_nan(x):sum(dim, keepdim) / n
end, true)

-- ---- elementwise -------------------------------------------------------------------

local function floating(op, x)
  check_tensor(op, x)
  if x:is_floating_point() then return x end
  return x:to(core.get_default_dtype())
end

-- a:logaddexp(b): log(exp(a) + exp(b)) without overflow (torch.logaddexp).
set("logaddexp", function(a, b)
  local op = "logaddexp"
  a = floating(op, a)
  if type(b) == "number" then b = core.full({}, b, { dtype = a.dtype, device = a.device }) end
  b = floating(op, b)
  local m = a:maximum(b):detach()
  m = core.where(m:isfinite(), m, core.zeros({}, { dtype = m.dtype, device = m.device }))
  return ((a - m):exp() + (b - m):exp()):log() + m
end, true)

-- a:hypot(b): sqrt(a^2 + b^2), scaled against overflow (torch.hypot).
set("hypot", function(a, b)
  local op = "hypot"
  a = floating(op, a)
  if type(b) == "number" then b = core.full({}, b, { dtype = a.dtype, device = a.device }) end
  b = floating(op, b)
  local s = a:abs():maximum(b:abs()):detach()
  s = core.where(s:eq(0), core.ones({}, { dtype = s.dtype, device = s.device }), s)
  return s * ((a / s):square() + (b / s):square()):sqrt()
end, true)

-- x:frac(): x - trunc(x), the sign of x (torch.frac).
set("frac", function(x)
  x = floating("frac", x)
  return x - x:trunc()
end, true)

-- x:deg2rad() / x:rad2deg(): degrees to radians and back.
set("deg2rad", function(x) return floating("deg2rad", x) * (math.pi / 180) end, true)
set("rad2deg", function(x) return floating("rad2deg", x) * (180 / math.pi) end, true)

-- x:sgn(): sign(x) (torch.sgn, which is sign on real tensors).
set("sgn", function(x) return check_tensor("sgn", x):sign() end, true)

-- a:true_divide(b): a / b (torch.true_divide, div without rounding).
set("true_divide", function(a, b) return core.div(a, b) end, true)

-- ember.is_floating_point(x): x:is_floating_point() (torch.is_floating_point).
set("is_floating_point", function(x) return check_tensor("is_floating_point", x):is_floating_point() end)

-- logical_and / or / xor / not of tensors of any dtype, as torch's: a
-- nonzero element (NaN too) is true; the core's ops take bool tensors, so
-- the others are compared with 0 first. The result is bool.
local function truth_of(x) return (core.is_tensor(x) and x.dtype ~= "bool") and x:ne(0) or x end
for _, name in ipairs { "logical_and", "logical_or", "logical_xor" } do
  local f = core[name]
  set(name, function(a, b) return f(truth_of(a), truth_of(b)) end, true)
end
local logical_not = core.logical_not
set("logical_not", function(x) return logical_not(truth_of(x)) end, true)

-- ---- Torch7's names ---------------------------------------------------------------

-- x:nDimension() / x:ndimension(): x:dim().
T.nDimension = helpers.guard(function(x) return check_tensor("nDimension", x):dim() end)
T.ndimension = helpers.guard(function(x) return check_tensor("ndimension", x):dim() end)
-- x:nElement(): x:numel().
T.nElement = helpers.guard(function(x) return check_tensor("nElement", x):numel() end)
-- x:isContiguous(): x:is_contiguous().
T.isContiguous = helpers.guard(function(x) return check_tensor("isContiguous", x):is_contiguous() end)
-- x:fill(v) / x:zero(): in place, as Torch7's (x:fill_(v), x:zero_()).
T.fill = helpers.guard(function(x, v) return check_tensor("fill", x):fill_(v) end)
T.zero = helpers.guard(function(x) return check_tensor("zero", x):zero_() end)

-- x:is_same_size(y) / x:isSameSizeAs(y): have x and y the same shape?
local function same_size(op, x, y)
  check_tensor(op, x)
  check_tensor(op, y, "argument 2")
  return helpers.same_shape(x, y)
end
T.is_same_size = helpers.guard(function(x, y) return same_size("is_same_size", x, y) end)
T.isSameSizeAs = helpers.guard(function(x, y) return same_size("isSameSizeAs", x, y) end)

-- Torch7's name as an alias of ember's op `target` (looked up at the call:
-- the in-place twins come later, from _inplace.lua): at most n arguments
-- (the tensor included; `what` names them), and the op's errors under name.
-- With fn, fn runs instead, target's errors (in fn) still renamed.
local raise = require("ember._errors").raise
local function alias(name, target, n, what, fn)
  local pat = "ember%." .. target .. "%f[^%w_]"
  local function run(...)
    if select("#", ...) > n then core._noextra(name, what, n, ...) end
    return (fn or T[target])(...)
  end
  return function(...)
    local r = table.pack(pcall(run, ...))
    if r[1] then return table.unpack(r, 2, r.n) end
    raise("%s", (tostring(r[2]):gsub("^[^\n]-:%d+: ", ""):gsub(pat, "ember." .. name)))
  end
end
-- x:index(dim, idx): x:index_select(dim, idx), a new tensor, as Torch7's.
T.index = alias("index", "index_select", 3, "dim, index")
-- In place, returning x, as Torch7's: indexCopy, indexFill, indexAdd,
-- maskedFill, maskedCopy (index_copy_, index_fill_, index_add_,
-- masked_fill_, masked_scatter_), cmul, cdiv (mul_, div_), uniform, normal
-- (uniform_, normal_: autograd off, for initialising parameters).
T.indexCopy = alias("indexCopy", "index_copy_", 4, "dim, index, source")
T.indexFill = alias("indexFill", "index_fill_", 4, "dim, index, value")
T.indexAdd = alias("indexAdd", "index_add_", 4, "dim, index, source")
T.maskedFill = alias("maskedFill", "masked_fill_", 3, "mask, value")
T.maskedCopy = alias("maskedCopy", "masked_scatter_", 3, "mask, source")
T.cmul = alias("cmul", "mul_", 2, "other")
T.cdiv = alias("cdiv", "div_", 2, "other")
T.uniform = alias("uniform", "uniform_", 3, "a, b")
T.normal = alias("normal", "normal_", 3, "mean, std")
-- x:maskedSelect(mask), x:viewAs(y): masked_select, view_as (new tensors).
T.maskedSelect = alias("maskedSelect", "masked_select", 2, "mask")
T.viewAs = alias("viewAs", "view_as", 2, "other")
-- ember.ger(a, b) / a:ger(b): the outer product (torch.ger, Torch7's
-- torch.ger); Torch7's result-first res:ger(a, b) is refused (a third argument).
set("ger", alias("ger", "outer", 2, "vec2"), true)

-- x:resize(sizes...) / x:resizeAs(y) (Torch7's; PyTorch's resize_ / resize_as_):
-- x itself gets the new shape, in place (the same tensor object), as
-- Torch7's: its first elements in row-major order stay; with fewer
-- elements x views the start of its memory (x must be contiguous), with
-- more it gets new memory, zeros past its old elements. Sizes as numbers,
-- a list or an ember.Size. Refused for a tensor that requires grad or has
-- a grad_fn (as torch's: x = x:reshape(...) or a new ember.zeros makes one).
local function resize(op, x, ...)
  check_tensor(op, x)
  local a = ...
  local sizes = (select("#", ...) == 1 and type(a) ~= "number") and a or { ... }
  if type(sizes) ~= "table" and type(sizes) ~= "userdata" then
    fail(op, "expected sizes (numbers, a list or an ember.Size), got %s", type(sizes))
  end
  local shape, n = {}, 1
  for i = 1, #sizes do
    local s = sizes[i]
    if math.type(s) ~= "integer" or s < 0 then fail(op, "size %d must be an integer >= 0, got %s", i, tostring(s)) end
    shape[i], n = s, n * s
  end
  if x.requires_grad or not x.is_leaf then
    fail(op, "cannot resize a tensor that requires grad or has a grad_fn (x = x:reshape(...) or a new ember.zeros(...))")
  end
  local m, new = x:numel(), nil
  if n <= m then
    if not x:is_contiguous() then
      fail(op, "x is not contiguous: resize keeps x's memory (x = x:contiguous() first, or x = x:reshape(...))")
    end
    new = x:detach():reshape(-1):narrow(1, 1, n):view(shape)
  else
    new = core.zeros(shape, { dtype = x.dtype, device = x.device })
    if m > 0 then core.no_grad(function() new:view(-1):narrow(1, 1, m):copy_(x:detach():reshape(-1)) end) end
  end
  return x:_assign(new)
end
T.resize = helpers.guard(function(x, ...) return resize("resize", x, ...) end)
T.resize_ = helpers.guard(function(x, ...) return resize("resize_", x, ...) end)
T.resizeAs = helpers.guard(function(x, y)
  check_tensor("resizeAs", y, "argument 2")
  return resize("resizeAs", x, y.shape)
end)
T.resize_as_ = helpers.guard(function(x, y)
  check_tensor("resize_as_", y, "argument 2")
  return resize("resize_as_", x, y.shape)
end)
-- x:expandAs(y): x:expand_as(y), a view (Torch7's expandAs).
T.expandAs = alias("expandAs", "expand_as", 2, "other")
-- Torch7's storage calls: ember's tensors hand out no storage object.
for name, instead in pairs {
  storage = "views share memory: x:view(...), x:narrow(...), x:detach() (x.data); x:clone() copies",
  storageOffset = "a view's start is not exposed; x:narrow(dim, start, n) makes one",
  set = "a tensor cannot be re-pointed at another's memory: y = x:view(...) or x:narrow(...) shares it; "
    .. "x[{i, j}] = v writes an element",
} do
  T[name] = helpers.guard(function() fail(name, "Torch7's %s is not an ember method; %s", name, instead) end)
end

-- x:copy(y): y's elements written into x in place, returning x (Torch7's):
-- in row-major order where x and y have as many elements (any shapes), else
-- y broadcast to x's shape (copy_'s).
T.copy = alias("copy", "copy_", 2, "source", function(x, y)
  check_tensor("copy", x)
  check_tensor("copy", y, "argument 2")
  if x:numel() == y:numel() and not helpers.same_shape(x, y) then y = y:reshape(x.shape) end
  return x:copy_(y)
end)

-- x:apply(f), x:map(y, f), x:map2(y, z, f): f called in Lua on each element
-- (x's, and y's and z's at the same row-major position: as many elements as
-- x), its result (a number, or a boolean for bool; nil keeps the element)
-- written into x in place; returns x. One Lua call per element: for small
-- tensors (and not differentiable: copy_'s rules, refused on a leaf that
-- requires grad).
local function per_element(op, x, others, f)
  check_tensor(op, x)
  if type(f) ~= "function" then
    fail(op, "argument %d must be a function, got %s", #others + 2, type(f))
  end
  local n = x:numel()
  local xs, ys = x:reshape(-1):tolist(), {}
  for i, o in ipairs(others) do
    check_tensor(op, o, "argument " .. (i + 1))
    if o:numel() ~= n then fail(op, "argument %d has %d elements, the tensor %d", i + 1, o:numel(), n) end
    ys[i] = o:reshape(-1):tolist()
  end
  local y1, y2 = ys[1] or {}, ys[2] or {}
  local want = x.dtype == "bool" and "boolean" or "number"
  for i = 1, n do
    local v = f(xs[i], y1[i], y2[i])
    if v ~= nil then
      if type(v) ~= want then
        fail(op, "the function returned a %s for element %d (expected a %s or nil)", type(v), i, want)
      end
      xs[i] = v
    end
  end
  if n > 0 then x:copy_(core.tensor(xs, { dtype = x.dtype, device = x.device }):view(x.shape)) end
  return x
end
T.apply = alias("apply", "copy_", 2, "function", function(x, f) return per_element("apply", x, {}, f) end)
T.map = alias("map", "copy_", 3, "other, function", function(x, y, f) return per_element("map", x, { y }, f) end)
T.map2 = alias("map2", "copy_", 4, "other, other2, function",
  function(x, y, z, f) return per_element("map2", x, { y, z }, f) end)

-- ember.Tensor(2, 3): a float32 tensor of zeros of that shape (Torch7's and
-- torch.Tensor's constructor, its memory uninitialised there);
-- ember.Tensor{{1, 2}, {3, 4}} is ember.tensor's; ember.Tensor() is empty.
-- ember.Tensor stays the methods table (a __call on its metatable).
local size_mt = getmetatable(core.Size { 1 })
local Tmt = getmetatable(T) or {}
Tmt.__call = helpers.guard(function(_, a, ...)
  if a == nil then
    if select("#", ...) > 0 then fail("Tensor", "expected sizes or a table of values first, got nil") end
    return core.zeros(0)
  end
  if core.is_tensor(a) then
    fail("Tensor", "ember.Tensor(t) is not a constructor here: t:clone() copies t, t:view(t.shape) shares its memory")
  end
  if type(a) == "number" or getmetatable(a) == size_mt then return core.zeros(a, ...) end
  if type(a) == "table" then return core.tensor(a, ...) end
  fail("Tensor", "expected sizes (numbers or an ember.Size) or a table of values, got %s", type(a))
end)
setmetatable(T, Tmt)

return {}
