-- ember/_searching.lua: searching and counting as PyTorch has them
-- (not differentiable; indices 1-based): nonzero / argwhere, unique (with
-- return_inverse / return_counts / dim), unique_consecutive, bincount,
-- searchsorted (with sorter) and bucketize. Split from
-- _functional_more.lua, which loads it. Errors are raised at the caller's
-- line, naming the function.
local core = require "ember.core"
local helpers = require "ember._helpers"
local F = require "ember._functional"
local shape_str = require("ember._errors").shape_str

local fail, check_tensor, set = helpers.fail, helpers.check_tensor, helpers.set
local check_opts, check_dim = F.check_opts, F.check_dim

local FLOATS = { float32 = true, float64 = true, bfloat16 = true }

local function long(t, device) return core.tensor(t, { dtype = "int64", device = device }) end

local same_shape = helpers.same_shape


-- x:nonzero([{as_tuple = false}]): the 1-based indices of the non-zero
-- elements, an int64 [n, x:dim()] tensor in row-major order
-- (torch.nonzero, plus one); with as_tuple, a list of x:dim() int64 [n]
-- tensors, one per dim. The positions come from ember._nonzero_flat and
-- are unravelled in float64 (exact below 2^52 elements).
local function nonzero(op, x, opts)
  check_tensor(op, x)
  opts = check_opts(op, opts, { as_tuple = true })
  local nz = x.dtype == "bool" and x or x:ne(0)
  local pos = core._nonzero_flat(nz:reshape(-1)):double() - 1
  local cols, stride = {}, 1
  for d = x:dim(), 1, -1 do
    local s = x:size(d)
    local q = (pos / stride):floor()
    cols[d] = (q - (q / s):floor() * s):long() + 1
    stride = stride * s
  end
  if opts.as_tuple then
    if x:dim() == 0 then return { pos:long() + 1 } end
    return cols
  end
  if x:dim() == 0 then return core.zeros({ pos:size(1), 0 }, { dtype = "int64", device = x.device }) end
  return core.stack(cols, 2)
end
set("nonzero", function(x, opts) return nonzero("nonzero", x, opts) end, true)

-- x:argwhere(): nonzero(x) as one [n, x:dim()] tensor (torch.argwhere).
set("argwhere", function(x) return nonzero("argwhere", x) end, true)

-- The groups of equal neighbours of the 1-d vals (x's elements, in the
-- order of the flat positions `order`, nil for x's own order): the first
-- of each, inverse and counts on request, as unique and unique_consecutive return them.
local function groups(x, vals, order, opts)
  local n = vals:numel()
  local v = n > 0 and vals:totable() or {}
  local firsts, counts, group = {}, {}, {}
  for i = 1, n do
    if i == 1 or v[i] ~= v[i - 1] then firsts[#firsts + 1] = i; counts[#firsts] = 0 end
    counts[#firsts] = counts[#firsts] + 1
    group[i] = #firsts
  end
  local out
  if #firsts == 0 then
    out = core.zeros({ 0 }, { dtype = x.dtype, device = x.device })
  else
    out = vals:index_select(1, long(firsts, x.device))
  end
  local results = { out }
  if opts.return_inverse then
    local inv = group
    if order then
      inv = {}
      local o = n > 0 and order:totable() or {}
      for i = 1, n do inv[o[i]] = group[i] end
    end
    local t = n > 0 and long(inv, x.device) or core.zeros({ 0 }, { dtype = "int64", device = x.device })
    results[#results + 1] = t:reshape(x.shape)
  end
  if opts.return_counts then
    results[#results + 1] = #counts > 0 and long(counts, x.device) or core.zeros({ 0 }, { dtype = "int64", device = x.device })
  end
  return table.unpack(results)
end

-- x:unique([{sorted = true, return_inverse = false, return_counts = false, dim = nil}]):
-- the distinct values of x (flattened), sorted, as torch.unique; then, if
-- asked, the inverse (int64, x's shape: the 1-based position in the values
-- of each element) and the counts (int64). Results come back in that
-- order as separate values. The sort runs on x's device, the grouping in
-- Lua on the sorted values read back; NaNs are each distinct (PyTorch
-- groups them oddly). The values are always sorted (PyTorch's CPU and CUDA
-- also sort where sorted = false is allowed to).
-- unique with dim: the distinct slices along dim d, sorted lexicographically
-- (their elements in row-major order), as torch.unique(x, dim=); the
-- inverse has one entry per slice. The slices are compared in Lua.
local function unique_dim(x, d, opts)
  local moved = x:detach():movedim(d, 1)
  local n = moved:size(1)
  local rows = moved:reshape(n, -1)
  if rows.dtype == "bool" then rows = rows:long() end
  local m = rows:size(2)
  local vals = (n > 0 and m > 0) and rows:totable() or {}
  local function row(i) return vals[i] or {} end
  local order = {}
  for i = 1, n do order[i] = i end
  table.sort(order, function(i, j)
    local a, b = row(i), row(j)
    for k = 1, m do if a[k] ~= b[k] then return a[k] < b[k] end end
    return i < j
  end)
  local function same(i, j)
    local a, b = row(i), row(j)
    for k = 1, m do if a[k] ~= b[k] then return false end end
    return true
  end
  local firsts, counts, inv = {}, {}, {}
  for r = 1, n do
    local i = order[r]
    if r == 1 or not same(i, order[r - 1]) then firsts[#firsts + 1] = i; counts[#firsts] = 0 end
    counts[#firsts] = counts[#firsts] + 1
    inv[i] = #firsts
  end
  local empty = core.zeros({ 0 }, { dtype = "int64", device = x.device })
  local out = moved:index_select(1, #firsts > 0 and long(firsts, x.device) or empty):movedim(1, d)
  local results = { out }
  if opts.return_inverse then results[#results + 1] = n > 0 and long(inv, x.device) or empty end
  if opts.return_counts then results[#results + 1] = #counts > 0 and long(counts, x.device) or empty end
  return table.unpack(results)
end

set("unique", function(x, opts)
  check_tensor("unique", x)
  opts = check_opts("unique", opts, { sorted = true, return_inverse = true, return_counts = true, dim = true })
  if opts.dim ~= nil then return unique_dim(x, check_dim("unique", x, opts.dim), opts) end
  local vals, idx = x:detach():reshape(-1):sort()
  return groups(x, vals, idx, opts)
end, true)

-- ember.unique_consecutive(x [, {return_inverse = false, return_counts = false}]):
-- the first of each run of equal neighbours in flat x (torch.unique_consecutive
-- without dim), the inverse as 1-based positions among them.
set("unique_consecutive", function(x, opts)
  check_tensor("unique_consecutive", x)
  opts = check_opts("unique_consecutive", opts, { return_inverse = true, return_counts = true })
  return groups(x, x:detach():reshape(-1), nil, opts)
end, true)

-- x:bincount([{weights =, minlength = 0}]): how often each value 0, 1, 2,
-- ... occurs in the 1-d int64 x of values >= 0 (torch.bincount: these are
-- values, not indices, so element 1 counts the zeros); with weights (a
-- float tensor like x), their sums instead. The length is max(x) + 1, at
-- least minlength.
set("bincount", function(x, opts)
  check_tensor("bincount", x)
  opts = check_opts("bincount", opts, { weights = true, minlength = true })
  if x.dtype ~= "int64" or x:dim() ~= 1 then
    fail("bincount", "expected a 1-d int64 tensor, got a %d-d %s tensor", x:dim(), x.dtype)
  end
  local minlength = opts.minlength or 0
  if math.type(minlength) ~= "integer" or minlength < 0 then
    fail("bincount", "minlength must be an integer >= 0, got %s", tostring(minlength))
  end
  local w = opts.weights
  if w ~= nil then
    check_tensor("bincount", w, "weights")
    if not same_shape(w, x) then fail("bincount", "weights shape %s must equal input shape %s", shape_str(w), shape_str(x)) end
  end
  local n = x:numel()
  if n > 0 and x:min():item() < 0 then fail("bincount", "values must be >= 0, got %d", x:min():item()) end
  local len = math.max(n > 0 and x:max():item() + 1 or 0, minlength)
  local dt = w and (FLOATS[w.dtype] and w.dtype or "float64") or "int64"
  local out = core.zeros({ len }, { dtype = dt, device = x.device })
  if n == 0 then return out end
  local src = w and w:detach():to(dt) or core.ones({ n }, { dtype = "int64", device = x.device })
  return out:scatter_add(1, x + 1, src)
end, true)

-- The 1-based insertion positions of values in seq (sorted along its last
-- dim): 1 + the number of elements below (left) or not above (right) each
-- value. seq and the values are merged by one stable sort along the last
-- dim, the values first (left: before equal elements) or last (right), so
-- a NaN value goes last, as PyTorch's; the count is a running sum of the
-- sequence's elements in the merged order. O((n + m) log) time and memory
-- (an [..., m, n] comparison took 10 GB for bucketize of 1e6 values into
-- 1000 bins).
local function insertion(op, seq, values, right, sorter)
  local v = values
  if type(v) == "number" then v = core.full({}, v, { dtype = seq.dtype, device = seq.device }) end
  check_tensor(op, v, "values")
  if seq:dim() == 0 then fail(op, "the sorted sequence must have at least 1 dim, got a 0-d tensor") end
  if seq:dim() > 1 then
    local ok = v:dim() == seq:dim()
    for i = 1, seq:dim() - 1 do ok = ok and v:size(i) == seq:size(i) end
    if not ok then
      fail(op, "values %s must have the leading dims of the sorted sequence %s", shape_str(v), shape_str(seq))
    end
  end
  if sorter ~= nil then
    if not core.is_tensor(sorter) or sorter.dtype ~= "int64" or not same_shape(sorter, seq) then
      fail(op, "sorter must be an int64 tensor of 1-based positions shaped like the sequence %s", shape_str(seq))
    end
    seq = seq:gather(-1, sorter)
  end
  seq, v = seq:detach(), v:detach()
  if v.dtype ~= seq.dtype then -- compared as PyTorch promotes
    if FLOATS[seq.dtype] and not FLOATS[v.dtype] then v = v:to(seq.dtype)
    elseif FLOATS[v.dtype] and not FLOATS[seq.dtype] then seq = seq:to(v.dtype)
    else v = v:to(seq.dtype) end
  end
  local shape = v.shape
  local vals = seq:dim() == 1 and v:reshape(-1) or v
  local n, m = seq:size(-1), vals:size(-1)
  if vals:numel() == 0 then return core.zeros(shape, { dtype = "int64", device = seq.device }) end
  if n == 0 then return core.ones(shape, { dtype = "int64", device = seq.device }) end
  local _, order = core.cat(right and { seq, vals } or { vals, seq }, -1):sort(-1)
  local is_seq = right and order:le(n) or order:gt(m)
  local below = is_seq:to("int64"):cumsum(-1) -- sequence elements at or before each merged position
  local is_val = is_seq:logical_not()
  local lead = vals.shape -- each row holds m values: masked_select keeps the rows
  local at = order:masked_select(is_val):reshape(lead)
  if right then at = at - n end
  local pos = core.zeros(lead, { dtype = "int64", device = seq.device })
  pos = pos:scatter_add(-1, at, below:masked_select(is_val):reshape(lead) + 1)
  -- a NaN value goes after everything, as PyTorch's. (Where the sequence
  -- holds NaNs, PyTorch's answer depends on its binary search's path; the
  -- NaNs here count as above every number.)
  if FLOATS[vals.dtype] then pos = pos:masked_fill(vals:isnan(), n + 1) end
  return pos:reshape(shape)
end

local function side_of(op, opts)
  opts = check_opts(op, opts, { right = true, side = true })
  local right = opts.right
  if right ~= nil and type(right) ~= "boolean" then fail(op, "right must be a boolean, got %s", type(right)) end
  if opts.side ~= nil then
    if opts.side ~= "left" and opts.side ~= "right" then
      fail(op, "side must be \"left\" or \"right\", got %s", tostring(opts.side))
    end
    if right == true and opts.side == "left" then fail(op, "right = true contradicts side = \"left\"") end
    right = opts.side == "right"
  end
  return right == true
end

-- ember.searchsorted(sorted_sequence, values [, {right = false, side =}]):
-- where each value would be inserted to keep the sequence (1-d, or sorted
-- along its last dim with the leading dims of values) sorted, as 1-based
-- int64 positions 1..n+1 (torch.searchsorted plus one); right (side =
-- "right") puts a value after equal elements; sorter (1-based, as
-- argsort gives) sorts an unsorted sequence. values may be a number.
set("searchsorted", function(seq, values, opts)
  check_tensor("searchsorted", seq, "sorted_sequence")
  local sorter = type(opts) == "table" and opts.sorter or nil
  if sorter ~= nil then -- side_of checks the rest
    local rest = {}
    for k, v in pairs(opts) do if k ~= "sorter" then rest[k] = v end end
    opts = rest
  end
  return insertion("searchsorted", seq, values, side_of("searchsorted", opts), sorter)
end)

-- ember.bucketize(input, boundaries [, {right = false}]): the 1-based
-- bucket of each element among the sorted 1-d boundaries, 1..n+1
-- (torch.bucketize plus one: searchsorted(boundaries, input)).
set("bucketize", function(input, boundaries, opts)
  check_tensor("bucketize", boundaries, "boundaries")
  if boundaries:dim() ~= 1 then fail("bucketize", "boundaries must be 1-d, got shape %s", shape_str(boundaries)) end
  opts = check_opts("bucketize", opts, { right = true })
  if opts.right ~= nil and type(opts.right) ~= "boolean" then
    fail("bucketize", "right must be a boolean, got %s", type(opts.right))
  end
  return insertion("bucketize", boundaries, input, opts.right == true)
end)

return {}
