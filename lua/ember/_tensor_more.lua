-- ember/_tensor_more.lua: more of torch's tensor ops, composed from ember's:
-- masked_scatter, nanmedian, quantile / nanquantile, mode, histc, histogram,
-- scatter_reduce (ember/_scatter_reduce.lua), isin, msort, cartesian_prod.
-- Each is a function (ember.mode(x)) and, where torch has one, a tensor
-- method (x:mode()). Indices are 1-based, as everywhere in ember. init.lua loads it.
local core = require "ember.core"
local helpers = require "ember._helpers"
local shape_str = require("ember._errors").shape_str
local check_opts = require("ember._functional").check_opts

local fail, check_tensor, set = helpers.fail, helpers.check_tensor, helpers.set
local dim_of = helpers.check_dim

local function long(t, device) return core.tensor(t, { dtype = "int64", device = device }) end

-- x's shape with dim d set to n (n = nil: removed).
local function shape_with(x, d, n)
  local s = {}
  for i = 1, x:dim() do
    if i ~= d then s[#s + 1] = x:size(i) elseif n then s[#s + 1] = n end
  end
  return s
end

-- ---- masked_scatter ----------------------------------------------------------------------

-- ember.masked_scatter(x, mask, source): x with the positions where the
-- bool mask (broadcast with x) is true filled, in row-major order, with
-- source's first elements (torch.masked_scatter). Differentiable in x and source.
set("masked_scatter", function(x, mask, source)
  local op = "masked_scatter"
  check_tensor(op, x)
  check_tensor(op, mask, "mask")
  check_tensor(op, source, "source")
  if mask.dtype ~= "bool" then fail(op, "mask must be a bool tensor, got %s", mask.dtype) end
  if source.dtype ~= x.dtype then fail(op, "source must have x's dtype %s, got %s", x.dtype, source.dtype) end
  local ok, shape = pcall(core.broadcast_shapes, x.shape, mask.shape)
  if not ok then fail(op, "mask %s does not broadcast with x %s", shape_str(mask), shape_str(x)) end
  local m = mask:expand(shape)
  if #shape ~= x:dim() or x:numel() ~= m:numel() then x = x:expand(shape) end
  local n = m:sum():item()
  if n > source:numel() then
    fail(op, "the mask selects %d elements but source %s has only %d", n, shape_str(source), source:numel())
  end
  if n == 0 then return x:clone() end
  local pos = m:reshape(-1):to("int64"):cumsum(1):clamp(1, n) -- the source element each position takes
  return core.where(m, source:reshape(-1):index_select(1, pos):reshape(shape), x)
end, true)

-- ---- nanmedian ---------------------------------------------------------------------------

-- ember.nanmedian(x [, dim [, keepdim]]): median ignoring NaNs
-- (torch.nanmedian): the lower median of the non-NaN values, NaN where all
-- are NaN; with dim also its 1-based index (the first NaN's for a row of NaNs).
set("nanmedian", function(x, dim, keepdim)
  local op = "nanmedian"
  check_tensor(op, x)
  if dim == nil then
    if x:numel() == 0 or not x:is_floating_point() then return core.median(x) end -- empty: NaN, as torch's
    local keep = x:isnan():logical_not()
    if not keep:any():item() then return core.median(x) end -- all NaN: NaN, as torch's
    return core.median(x:masked_select(keep))
  end
  local d = dim_of(op, x, dim)
  if x:dim() == 0 then return x:clone(), core.ones({}, { dtype = "int64", device = x.device }) end
  if x:size(d) == 0 then fail(op, "dim %d has size 0: no median", d) end
  local _, order = x:detach():sort(d) -- NaN sorts last
  local count = x:is_floating_point() and x:isnan():logical_not():sum(d, true) or
      core.full(shape_with(x, d, 1), x:size(d), { dtype = "int64", device = x.device })
  local k = (core.floor_divide(count - 1, 2) + 1):clamp(1, x:size(d)) -- lower median; a row of NaNs: its first
  local i = order:gather(d, k)
  local v = x:gather(d, i)
  if not keepdim then v, i = v:squeeze(d), i:squeeze(d) end
  return v, i
end, true)

-- ---- quantile / nanquantile -----------------------------------------------------------------

local MODES = { linear = true, lower = true, higher = true, midpoint = true, nearest = true }

-- torch's quantile_impl: sort along the dim (last here), rank q (n - 1),
-- rounded as interpolation says, then values gathered and interpolated.
local function quantile(op, ignore_nan, x, q, dim, keepdim, opts)
  check_tensor(op, x)
  if type(dim) == "table" and not core.is_tensor(dim) then dim, keepdim, opts = nil, nil, dim end
  if type(keepdim) == "table" then keepdim, opts = nil, keepdim end
  opts = check_opts(op, opts, { dim = true, keepdim = true, interpolation = true })
  if opts.dim ~= nil then
    if dim ~= nil then fail(op, "dim given twice") end
    dim = opts.dim
  end
  if opts.keepdim ~= nil then keepdim = opts.keepdim end
  if keepdim ~= nil and type(keepdim) ~= "boolean" then fail(op, "keepdim must be a boolean, got %s", type(keepdim)) end
  local mode = opts.interpolation or "linear"
  if not MODES[mode] then
    fail(op, "interpolation must be one of linear, lower, higher, midpoint, nearest; got %s", tostring(mode))
  end
  if x.dtype ~= "float32" and x.dtype ~= "float64" then fail(op, "x must be float32 or float64, got %s", x.dtype) end
  local qt, scalar_q
  if math.type(q) then
    if not (q >= 0 and q <= 1) then fail(op, "q must be in [0, 1], got %s", tostring(q)) end
    qt, scalar_q = core.tensor({ q }, { dtype = x.dtype, device = x.device }), true
  elseif core.is_tensor(q) then
    if q:dim() > 1 then fail(op, "q must be a number or a 0-d or 1-d tensor, got %s", shape_str(q)) end
    if q.dtype ~= x.dtype then fail(op, "q must have x's dtype %s, got %s", x.dtype, q.dtype) end
    qt, scalar_q = q:detach():reshape(-1), q:dim() == 0
    if qt:numel() > 0 and (qt:lt(0):any():item() or qt:gt(1):any():item() or qt:isnan():any():item()) then
      fail(op, "q values must be in [0, 1]")
    end
  else
    fail(op, "q must be a number or a tensor, got %s", type(q))
  end
  if x:numel() == 0 then fail(op, "x must not be empty") end
  local s, out_shape
  if dim == nil then
    s, out_shape = x:reshape(-1), {}
    if keepdim then for i = 1, x:dim() do out_shape[i] = 1 end end
  else
    local d = dim_of(op, x, dim)
    if x:dim() == 0 then s, out_shape = x:reshape(1), {}
    else s, out_shape = x:movedim(d, -1), shape_with(x, d, keepdim and 1 or nil) end
  end
  local n = s:size(-1)
  local _, order = s:detach():sort(-1)
  local sorted = s:gather(-1, order) -- (..., n), differentiable
  local nan = sorted:detach():isnan()
  local ranks -- (..., m)
  if ignore_nan then
    ranks = qt * (nan:logical_not():sum(-1, true):to(x.dtype) - 1)
    ranks = ranks:masked_fill(ranks:lt(0), 0)
  else
    local has = nan:any(-1, true)
    ranks = qt * (n - 1)
    local full = core.broadcast_shapes(ranks.shape, has.shape)
    ranks = ranks:expand(full):masked_fill(has:expand(full), n - 1)
  end
  if mode == "lower" then ranks = ranks:floor()
  elseif mode == "higher" then ranks = ranks:ceil()
  elseif mode == "nearest" then ranks = ranks:round() end
  local below = ranks:to("int64")
  local idx_shape = ranks.shape
  local function take(r) return sorted:gather(-1, r + 1) end -- sorted's values at the 0-based ranks r
  local r = take(below)
  if mode == "linear" or mode == "midpoint" then
    local w = mode == "midpoint" and core.full(idx_shape, 0.5, { dtype = x.dtype, device = x.device })
        or ranks - below:to(x.dtype)
    r = core.lerp(r, take(ranks:ceil():to("int64")), w)
  end
  -- r is (..., m): q's dim goes first, as torch's
  if scalar_q then return r:reshape(out_shape) end
  local shape = { qt:numel() }
  for i, v in ipairs(out_shape) do shape[i + 1] = v end
  return r:movedim(-1, 1):reshape(shape)
end

-- ember.quantile(x, q [, dim [, keepdim]] [, {interpolation = "linear"}]):
-- the q-th quantiles of x (flattened without dim) as torch.quantile; q is a
-- number or a 1-d tensor of x's dtype (its dim goes first in the result);
-- interpolation is linear, lower, higher, midpoint or nearest. A slice with
-- a NaN gives NaN. Differentiable in x.
set("quantile", function(x, q, dim, keepdim, opts) return quantile("quantile", false, x, q, dim, keepdim, opts) end, true)
-- ember.nanquantile(x, q, ...): quantile ignoring NaNs (NaN where a slice is all NaN).
set("nanquantile", function(x, q, dim, keepdim, opts) return quantile("nanquantile", true, x, q, dim, keepdim, opts) end, true)

-- ---- mode ------------------------------------------------------------------------------------

-- ember.mode(x [, dim = -1 [, keepdim]]): the most frequent value along dim
-- and its 1-based index (torch.mode): among equally frequent values the
-- smallest, at its last position. Each NaN counts as a value of its own
-- (torch's CPU order of NaNs is unspecified). Differentiable in x (the
-- gradient goes to the index).
set("mode", function(x, dim, keepdim)
  local op = "mode"
  check_tensor(op, x)
  if type(dim) == "table" and not core.is_tensor(dim) then
    local o = check_opts(op, dim, { dim = true, keepdim = true })
    dim, keepdim = o.dim, o.keepdim
  end
  local d = dim_of(op, x, dim or -1)
  if x:dim() == 0 then return x:clone(), core.ones({}, { dtype = "int64", device = x.device }) end
  local n = x:size(d)
  if n == 0 then fail(op, "dim %d has size 0: no mode", d) end
  local rows = x:numel() // n
  local idx
  if rows == 0 then
    idx = core.zeros(shape_with(x, d, 1), { dtype = "int64", device = x.device })
  else
    local v, o = x:detach():movedim(d, -1):reshape(rows, n):sort(2)
    local vals, pos, best = v:reshape(-1):totable(), o:reshape(-1):totable(), {}
    for r = 0, rows - 1 do
      local base, f, bf, bi = r * n, 0, 0, r * n + 1
      for j = 1, n do
        f = f + 1
        if j == n or vals[base + j] ~= vals[base + j + 1] then
          if f > bf then bf, bi = f, base + j end
          f = 0
        end
      end
      best[r + 1] = pos[bi]
    end
    local moved = shape_with(x, d)
    moved[#moved + 1] = 1
    idx = long(best, x.device):reshape(moved):movedim(-1, d)
  end
  local val = x:gather(d, idx)
  if not keepdim then val, idx = val:squeeze(d), idx:squeeze(d) end
  return val, idx
end, true)

-- ---- histc -----------------------------------------------------------------------------------

-- ember.histc(x [, bins = 100 [, min = 0 [, max = 0]]]) or histc(x, {bins =,
-- min =, max =}): counts of x's elements in bins equal-width bins over
-- [min, max] (torch.histc; min = max: x's own range), in x's dtype.
-- Elements outside the range and NaNs are not counted.
set("histc", function(x, bins, min, max)
  local op = "histc"
  check_tensor(op, x)
  if type(bins) == "table" then
    local o = check_opts(op, bins, { bins = true, min = true, max = true })
    bins, min, max = o.bins, o.min, o.max
  end
  bins, min, max = bins or 100, min or 0, max or 0
  if math.type(bins) ~= "integer" or bins < 1 then fail(op, "bins must be an integer > 0, got %s", tostring(bins)) end
  if type(min) ~= "number" or type(max) ~= "number" then fail(op, "min and max must be numbers") end
  if not x:is_floating_point() then fail(op, "x must be a floating-point tensor, got %s", x.dtype) end
  local lo, hi = min, max
  if lo == hi and x:numel() > 0 then lo, hi = x:min():item(), x:max():item() end
  if lo == hi then lo, hi = lo - 1, hi + 1 end
  if lo ~= lo or hi ~= hi or lo == math.huge or lo == -math.huge or hi == math.huge or hi == -math.huge then
    fail(op, "range of [%s, %s] is not finite", tostring(lo), tostring(hi))
  end
  if not (lo < hi) then fail(op, "max must be larger than min, got min = %s, max = %s", tostring(lo), tostring(hi)) end
  local flat = x:detach():reshape(-1)
  local opt = { dtype = x.dtype, device = x.device }
  local lot, hit = core.tensor(lo, opt), core.tensor(hi, opt) -- in x's precision, as torch's bin edges
  flat = flat:masked_select(flat:ge(lot):logical_and(flat:le(hit)))
  local hist = core.zeros(bins, opt)
  if flat:numel() == 0 then return hist end
  local pos = ((flat - lot) * bins / (hit - lot)):floor():to("int64"):clamp(0, bins - 1) + 1
  return hist:scatter_add(1, pos, core.ones(pos.shape, opt))
end, true)

-- ember.histogram(x [, bins = 100] [, {range = {lo, hi}, weight =, density = false}]):
-- the histogram of x's elements and the bin edges (torch.histogram): bins
-- equal-width bins over range (x's own range without one; a constant x
-- widens it by 0.5 each side, an empty one takes [0, 1]) or a 1-d tensor
-- of increasing edges. The last bin holds its right edge; elements outside
-- are not counted. weight (x's shape) sums weights instead of counting;
-- density divides by the total and the bin widths. float32/float64.
set("histogram", function(x, bins, opts)
  local op = "histogram"
  check_tensor(op, x)
  if type(bins) == "table" and not core.is_tensor(bins) then bins, opts = nil, bins end
  opts = check_opts(op, opts, { bins = true, range = true, weight = true, density = true })
  if bins ~= nil and opts.bins ~= nil then fail(op, "bins given twice") end
  bins = bins or opts.bins or 100
  if x.dtype ~= "float32" and x.dtype ~= "float64" then fail(op, "x must be float32 or float64, got %s", x.dtype) end
  local topt = { dtype = x.dtype, device = x.device }
  local edges
  if core.is_tensor(bins) then
    if bins:dim() ~= 1 or bins:numel() < 2 then fail(op, "bin edges must be a 1-d tensor of at least 2 edges, got %s", shape_str(bins)) end
    if bins.dtype ~= x.dtype then fail(op, "bin edges must have x's dtype %s, got %s", x.dtype, bins.dtype) end
    if opts.range ~= nil then fail(op, "range is for a number of bins, not bin edges") end
    edges = bins:detach()
    if core.diff(edges):lt(0):any():item() then fail(op, "bin edges must be increasing") end
  else
    if math.type(bins) ~= "integer" or bins < 1 then fail(op, "bins must be an integer > 0 or a tensor of edges, got %s", tostring(bins)) end
    local lo, hi
    if opts.range ~= nil then
      local r = opts.range
      if type(r) ~= "table" or type(r[1]) ~= "number" or type(r[2]) ~= "number" then fail(op, "range must be {lo, hi}") end
      lo, hi = r[1], r[2]
      if lo > hi then fail(op, "range's lo %s is above its hi %s", tostring(lo), tostring(hi)) end
    elseif x:numel() > 0 then lo, hi = x:min():item(), x:max():item()
    else lo, hi = 0, 1 end
    if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
    if lo ~= lo or hi ~= hi or lo == -math.huge or hi == math.huge then
      fail(op, "range of [%s, %s] is not finite", tostring(lo), tostring(hi))
    end
    edges = core.linspace(lo, hi, bins + 1, topt)
  end
  local n = edges:numel() - 1
  local flat, w = x:detach():reshape(-1), nil
  if opts.weight ~= nil then
    check_tensor(op, opts.weight, "weight")
    if opts.weight:numel() ~= x:numel() or opts.weight:dim() ~= x:dim() then
      fail(op, "weight must have x's shape %s, got %s", shape_str(x), shape_str(opts.weight))
    end
    w = opts.weight:detach():reshape(-1):to(x.dtype)
  end
  local keep = flat:ge(edges:narrow(1, 1, 1)):logical_and(flat:le(edges:narrow(1, n + 1, 1)))
  flat = flat:masked_select(keep)
  local hist = core.zeros(n, topt)
  if flat:numel() > 0 then
    local bin = (core.searchsorted(edges, flat, { right = true }) - 1):clamp(1, n)
    hist = hist:scatter_add(1, bin, w and w:masked_select(keep) or core.ones(bin.shape, topt))
  end
  if opts.density then hist = hist / (hist:sum() * core.diff(edges)) end
  return hist, edges
end)

-- ---- isin, msort, cartesian_prod --------------------------------------------------------------

-- ember.isin(elements, test_elements [, {invert = false, assume_unique}]):
-- whether each element of elements is among test_elements (torch.isin;
-- either may be a number). A NaN is in nothing. Sorted lookup: O((n + m) log).
set("isin", function(elements, test, opts)
  local op = "isin"
  opts = check_opts(op, opts, { invert = true, assume_unique = true })
  if not core.is_tensor(elements) and not core.is_tensor(test) then
    fail(op, "elements or test_elements must be a tensor, got %s and %s", type(elements), type(test))
  end
  local like = core.is_tensor(elements) and elements or test
  for _, t in ipairs { { elements, "elements" }, { test, "test_elements" } } do
    if not core.is_tensor(t[1]) and type(t[1]) ~= "number" then fail(op, "%s must be a tensor or a number, got %s", t[2], type(t[1])) end
  end
  if type(elements) == "number" then elements = core.full({}, elements, { dtype = like.dtype, device = like.device }) end
  if type(test) == "number" then test = core.full({}, test, { dtype = like.dtype, device = like.device }) end
  local found
  if test:numel() == 0 or elements:numel() == 0 then
    found = core.zeros(elements.shape, { dtype = "bool", device = elements.device })
  else
    local s = test:detach():reshape(-1):sort()
    local pos = core.searchsorted(s, elements:detach()):clamp(1, s:numel())
    found = s:gather(1, pos:reshape(-1)):reshape(elements.shape):eq(elements:detach())
  end
  if opts.invert then found = found:logical_not() end
  return found
end)

-- ember.msort(x): x sorted along its first dim (torch.msort).
set("msort", function(x)
  check_tensor("msort", x)
  return (x:sort(1))
end, true)

-- ember.cartesian_prod(a, b, ...): the rows of all combinations of the
-- elements of 1-d tensors, the last varying fastest ([n, k]; one tensor:
-- itself), as torch.cartesian_prod. Differentiable.
set("cartesian_prod", function(...)
  local op, ts = "cartesian_prod", table.pack(...)
  if ts.n == 0 then fail(op, "expected at least one tensor") end
  for i = 1, ts.n do
    check_tensor(op, ts[i], "tensor " .. i)
    if ts[i]:dim() ~= 1 then fail(op, "tensor %d must be 1-d, got %s", i, shape_str(ts[i])) end
    if ts[i].dtype ~= ts[1].dtype then fail(op, "tensor %d is %s, tensor 1 %s: give one dtype", i, ts[i].dtype, ts[1].dtype) end
  end
  if ts.n == 1 then return ts[1] end
  local grids = { core.meshgrid(table.unpack(ts, 1, ts.n)) }
  for i, g in ipairs(grids) do grids[i] = g:reshape(-1) end
  return core.stack(grids, 2)
end)

require "ember._scatter_reduce"
require "ember._tensor_extra" -- asinh, sinc, copysign, fmax, cov, block_diag, hsplit, ...
