-- ember/_indexing.lua: tables as tensor indices, the Torch7 way and the
-- PyTorch way: t[{i, {a, b}, {a}, {}}] (numbers select, inclusive 1-based
-- ranges narrow, {} keeps a dim), one int64 tensor in the table picking
-- positions along its dim (t[{{}, idx}], PyTorch's t[:, idx]), and several
-- int64 tensors leading the table picking pointwise, broadcast (t[{rows,
-- cols}], PyTorch's t[rows, cols]); all readable and assignable; an index
-- tensor's negative entries count from the end (-1 the last, as t[-1] and
-- torch's; helpers.positions). The C
-- __index/__newindex (core/lua/l_tensor.c) call the metatable's
-- __table_index / __table_newindex, set here. index_put / index_put_ (as
-- torch's) write through the same rules. init.lua loads it.
local core = require "ember.core"
local helpers = require "ember._helpers"
local shape_str = require("ember._errors").shape_str

local T = core.Tensor
local fail, guard, check_tensor, set = helpers.fail, helpers.guard, helpers.check_tensor, helpers.set

-- ---- Torch7 table indexing, one int64 tensor at most ----------------------------------

-- t[{i, {a, b}, {a}, {}, idx}]: a number selects (the dim goes away), {a, b}
-- is the inclusive range a..b, {a} the range a..a (the dim stays), {} all of
-- the dim; negative numbers count from the end; one int64 tensor idx
-- picks the 1-based positions along its dim (as x[:, idx]; its dims take
-- that dim's place; 1-d to assign). Dims not named
-- stay whole. A view, but for idx: then the view with {} in its place, the
-- dim and idx come back too (for assignments; the read is an index_select).
local function table_view(t, key, for_write)
  local n = #key
  for k in pairs(key) do
    if math.type(k) ~= "integer" or k < 1 or k > n then
      fail("index", "a table index is a list like {i, {a, b}, {}}; got key %s", tostring(k))
    end
  end
  if n > t:dim() then fail("index", "%d indices for a tensor with %d dims", n, t:dim()) end
  local v, d = t, 1
  local picked, pick_dim
  for i = 1, n do
    local k = key[i]
    if type(k) == "number" then
      v = v:select(d, k)
    elseif core.is_tensor(k) then
      if picked then fail("index", "one int64 tensor per table index (index %d is the second)", i) end
      if k.dtype ~= "int64" or (for_write and k:dim() ~= 1) then
        fail("index", "index %d: a tensor in a table index must be %s int64 tensor of 1-based positions, got %s %s",
          i, for_write and "(to assign) a 1-d" or "an", k.dtype, shape_str(k))
      end
      picked, pick_dim = helpers.positions(for_write and "setindex" or "index", k, v:size(d)), d
      d = d + 1
    elseif type(k) == "table" then
      local size = v:size(d)
      local a, b = k[1], k[2]
      if #k > 2 or (a ~= nil and math.type(a) ~= "integer") or (b ~= nil and math.type(b) ~= "integer") then
        fail("index", "index %d: a range is {}, {a} or {a, b} with integers, got a table of %d", i, #k)
      end
      if a ~= nil then
        b = b or a
        local a0, b0 = a, b
        if a < 0 then a = size + 1 + a end
        if b < 0 then b = size + 1 + b end
        if a < 1 or a > size or b < a - 1 or b > size then
          fail("index", "index %d: range {%d, %d} is out of range for dim %d of size %d", i, a0, b0, d, size)
        end
        v = v:narrow(d, a, b - a + 1)
      end
      d = d + 1
    else
      fail("index", "index %d must be a number, a range table or an int64 tensor, got %s", i, type(k))
    end
  end
  if picked and not for_write then
    if picked:dim() == 1 then return v:index_select(pick_dim, picked) end
    -- an index of any shape: its dims take pick_dim's place, as PyTorch's x[:, idx]
    local shape = {}
    for j = 1, pick_dim - 1 do shape[#shape + 1] = v:size(j) end
    for j = 1, picked:dim() do shape[#shape + 1] = picked:size(j) end
    for j = pick_dim + 1, v:dim() do shape[#shape + 1] = v:size(j) end
    return v:index_select(pick_dim, picked:reshape(-1)):view(shape)
  end
  return v, pick_dim, picked
end

-- With grad mode on, a write into a tensor of a graph (not a leaf that
-- requires grad) or of a value that requires grad is made out of place and
-- copied in whole, which autograd records (copy_); a view's write would not be.
local function records(t, value)
  return core.is_grad_enabled() and not (t.requires_grad and t.is_leaf)
    and (t.requires_grad or (core.is_tensor(value) and value.requires_grad))
end

-- t[key] = value through the positions key picks in t (1-based, flat):
-- index_copy / index_fill of the flattened t, then t:copy_ of the whole.
local function recorded_assign(t, key, value)
  local pos = core.arange(1, t:numel() + 1, { dtype = "int64", device = t.device }):view(t.shape)
  local pv, pd, pidx = table_view(pos, key, true)
  if pidx then pv = pv:index_select(pd, pidx) end
  local new
  if core.is_tensor(value) then
    local src = helpers.index_value("setindex", value, t.dtype, { table.unpack(pv.shape) })
    new = t:reshape(-1):index_copy(1, pv:reshape(-1), src:reshape(-1))
  elseif type(value) == "number" or type(value) == "boolean" then
    new = t:reshape(-1):index_fill(1, pv:reshape(-1), type(value) == "boolean" and (value and 1 or 0) or value)
  else
    fail("setindex", "value must be a number or a tensor, got %s", type(value))
  end
  -- (t's flat view is no longer reachable: copy_ finds t unshared)
  local ok, err = pcall(T.copy_, t, new:view(t.shape))
  if not ok then error((tostring(err):gsub("^[^\n]-:%d+: ", ""):gsub("ember%.copy_", "ember.setindex")), 0) end
end

-- t[key] = value for a key with at most one tensor
local function table_assign(t, key, value)
  if records(t, value) then return recorded_assign(t, key, value) end
  local v, d, idx = table_view(t, key, true)
  if idx then
    -- the positions idx along dim d of the view v
    if core.is_tensor(value) then
      local shape = {}
      for i = 1, v:dim() do shape[i] = i == d and idx:size(1) or v:size(i) end
      v:copy_(v:index_copy(d, idx, helpers.index_value("setindex", value, v.dtype, shape)))
    elseif type(value) == "number" or type(value) == "boolean" then
      v:copy_(v:index_fill(d, idx, type(value) == "boolean" and (value and 1 or 0) or value))
    else
      fail("setindex", "value must be a number or a tensor, got %s", type(value))
    end
    return
  end
  if core.is_tensor(value) then
    v:copy_(helpers.index_value("setindex", value, v.dtype, { table.unpack(v.shape) }))
  elseif type(value) == "number" or type(value) == "boolean" then
    v:fill_(type(value) == "boolean" and (value and 1 or 0) or value)
  else
    fail("setindex", "value must be a number or a tensor, got %s", type(value))
  end
end

-- ---- x[{rows, cols}]: several int64 tensors index pointwise ------------------------

-- x[{i1, i2, ..., rest...}] with int64 tensors i1..ik leading the key picks
-- the elements (x[i1[j], i2[j], ...]) pointwise, the tensors broadcast, as
-- PyTorch's x[rows, cols] (logits[{ember.arange(1, B + 1), labels}]); the
-- entries after them index the remaining dims. Assignable when the tensors
-- are the whole key. One tensor keeps the table index's own rule.

-- The leading int64 tensors of key (nil when fewer than 2), checked, and
-- the 1-based positions they name in t viewed as [n1 * ... * nk, rest...].
local function pointwise(op, t, key)
  local k = 0
  while core.is_tensor(key[k + 1]) do k = k + 1 end
  if k < 2 then
    for i = k + 1, #key do
      if core.is_tensor(key[i]) and k >= 1 then
        fail(op, "int64 tensors in a table index must lead it (x[{rows, cols, ...}]); index %d is one", i)
      end
    end
    return nil
  end
  for i = k + 1, #key do
    if core.is_tensor(key[i]) then
      fail(op, "int64 tensors in a table index must lead it (x[{rows, cols, ...}]); index %d is one", i)
    end
  end
  if k > t:dim() then fail(op, "%d indices for a tensor with %d dims", k, t:dim()) end
  local zero
  for i = 1, k do
    local idx = key[i]
    if idx.dtype ~= "int64" then fail(op, "index %d: an index tensor must be int64 (1-based), got %s", i, idx.dtype) end
    zero = zero and (zero + idx * 0) or idx * 0
  end
  local lin, stride = zero, 1
  for i = k, 1, -1 do
    local n = t:size(i)
    local idx = helpers.positions(op, key[i], n)
    if idx:numel() > 0 and (idx:lt(1):any():item() or idx:gt(n):any():item()) then
      fail(op, "index %d: positions must be in 1..%d (1-based) for dim %d of size %d", i, n, i, n)
    end
    lin = lin + (idx - 1) * stride
    stride = stride * n
  end
  local shape = { stride }
  for i = k + 1, t:dim() do shape[#shape + 1] = t:size(i) end
  return k, lin + 1, shape
end

-- the tensor metatable, from the registry (luaL_newmetatable's name): making a
-- tensor here would need a backend, and ember must load without one
local mt = debug.getregistry()["ember.Tensor"]
mt.__table_index = guard(function(t, key)
  local k, lin, shape = pointwise("index", t, key)
  if not k then return table_view(t, key) end
  local out = { table.unpack(lin.shape) }
  for i = k + 1, t:dim() do out[#out + 1] = t:size(i) end
  local y = t:reshape(shape):index_select(1, lin:reshape(-1)):view(out)
  if #key == k then return y end
  local rest = {}
  for _ = 1, lin:dim() do rest[#rest + 1] = {} end
  for i = k + 1, #key do rest[#rest + 1] = key[i] end
  return table_view(y, rest)
end)

mt.__table_newindex = guard(function(t, key, value)
  local k, lin, shape = pointwise("setindex", t, key)
  if not k then return table_assign(t, key, value) end
  if #key ~= k then fail("setindex", "x[{rows, cols, ...}] = v takes int64 tensors only, without ranges after them") end
  local pos = lin:reshape(-1)
  local new -- (t's reshaped view is not kept: copy_ records the write where t is unshared)
  if core.is_tensor(value) then
    local vs, full = { pos:numel() }, { table.unpack(lin.shape) }
    for i = 2, #shape do
      vs[i] = shape[i]
      full[#full + 1] = shape[i]
    end
    local src = helpers.index_value("setindex", value, t.dtype, full):reshape(vs)
    new = t:reshape(shape):index_copy(1, pos, src)
  elseif type(value) == "number" or type(value) == "boolean" then
    new = t:reshape(shape):index_fill(1, pos, type(value) == "boolean" and (value and 1 or 0) or value)
  else
    fail("setindex", "value must be a number or a tensor, got %s", type(value))
  end
  t:copy_(new:view(t.shape))
end)

-- x:index_put(indices, values [, accumulate = false]): x with the elements
-- at the 1-based int64 index tensors of indices (one per leading dim,
-- broadcast; a bool mask is its true positions) set to values, or values added there (accumulate; repeated
-- positions add up), as torch.index_put; index_put_ writes x in place.
local function index_put(op, x, indices, values, accumulate)
  check_tensor(op, x)
  if type(indices) ~= "table" or #indices == 0 then
    fail(op, "indices must be a list of int64 tensors, got %s", type(indices))
  end
  -- a bool mask stands for its true positions, one int64 tensor per dim it covers (as torch)
  local key = {}
  for i, t in ipairs(indices) do
    if core.is_tensor(t) and t.dtype == "bool" then
      local nz = t:nonzero()
      for j = 1, t:dim() do key[#key + 1] = nz:select(2, j) end
    elseif not core.is_tensor(t) or t.dtype ~= "int64" then
      fail(op, "indices[%d] must be an int64 tensor (1-based) or a bool mask, got %s", i,
        core.is_tensor(t) and t.dtype or type(t))
    else
      key[#key + 1] = t
    end
  end
  local y = x:clone()
  if not accumulate then
    if #key == 1 then y[key[1]] = values else y[key] = values end
    return y
  end
  -- accumulate: the positions as rows of y viewed as [n, rest...], added
  local k, lin, shape
  if #key == 1 then
    k, lin, shape = 1, helpers.positions(op, key[1], x:size(1)), { x:size(1) }
    for i = 2, x:dim() do shape[i] = x:size(i) end
  else
    k, lin, shape = pointwise(op, x, key)
  end
  local pos = lin:reshape(-1)
  local full, rows = { table.unpack(lin.shape) }, { pos:numel() }
  for i = k + 1, x:dim() do
    full[#full + 1] = x:size(i)
    rows[#rows + 1] = x:size(i)
  end
  local src = core.is_tensor(values) and values:to(x.dtype) or core.full({}, values, { dtype = x.dtype, device = x.device })
  return x:reshape(shape):index_add(1, pos, src:expand(full):reshape(rows)):view(x.shape)
end
set("index_put", function(x, indices, values, accumulate)
  return index_put("index_put", x, indices, values, accumulate)
end, true)
T.index_put_ = guard(function(x, indices, values, accumulate)
  return x:copy_(index_put("index_put_", x, indices, values, accumulate))
end)

return {}
