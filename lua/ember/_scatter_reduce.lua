-- ember/_scatter_reduce.lua: ember.scatter_reduce and ember.index_reduce
-- (torch.scatter_reduce / torch.index_reduce, reduce = sum, prod, mean,
-- amax, amin, with include_self). sum and mean are scatter_add's
-- (differentiable as it is); prod, amax and amin reduce in Lua over the
-- values read back, in an ember.Function whose backward is torch's rule.
-- ember/_tensor_more.lua loads it.
local core = require "ember.core"
local helpers = require "ember._helpers"
local shape_str = require("ember._errors").shape_str
local check_opts = require("ember._functional").check_opts

local fail, check_tensor, set = helpers.fail, helpers.check_tensor, helpers.set
local dim_of = helpers.check_dim

local REDUCES = { sum = true, prod = true, mean = true, amax = true, amin = true }

-- 0-based positions, in x's row-major order, that index's elements write to.
local function targets(x, d, index)
  local n, stride, acc = x:dim(), {}, 1
  for i = n, 1, -1 do
    stride[i] = acc
    acc = acc * x:size(i)
  end
  local t = (index - 1) * stride[d]
  for i = 1, n do
    if i ~= d and index:size(i) > 1 then
      local view = {}
      for j = 1, n do view[j] = j == i and index:size(i) or 1 end
      t = t + (core.arange(0, index:size(i), { dtype = "int64", device = x.device }) * stride[i]):view(view)
    end
  end
  return t:expand(index.shape):reshape(-1)
end

-- x with src's values reduced in at index (prod, amax, amin), no autograd.
local function segment(x, d, index, src, reduce, include_self)
  if x:numel() == 0 or index:numel() == 0 then return x:detach():clone() end
  local out = x:detach():contiguous():reshape(-1):totable()
  local tt = targets(x, d, index):totable()
  local sv = src:detach():contiguous():reshape(-1):totable()
  local first = {}
  for j = 1, #tt do
    local p, v = tt[j] + 1, sv[j]
    if not include_self and not first[p] then
      first[p] = true
      out[p] = v
    else
      local o = out[p]
      if reduce == "prod" then out[p] = o * v
      elseif reduce == "amax" then if v ~= v or v > o then out[p] = v end -- NaN propagates, as torch's
      elseif v ~= v or v < o then out[p] = v end
    end
  end
  return core.tensor(out, { dtype = x.dtype, device = x.device }):reshape(x.shape)
end

-- Where index writes in x's shape (bool).
local function written(x, d, index)
  local z = core.zeros(x.shape, { dtype = "float32", device = x.device })
  return core.scatter_add(z, d, index, core.ones(index.shape, { dtype = "float32", device = x.device })):gt(0)
end

local SEGMENT = core.Function {
  name = "scatter_reduce",
  forward = function(ctx, x, src, d, index, reduce, include_self)
    local y = segment(x, d, index, src, reduce, include_self)
    ctx:save_for_backward(x, src, y)
    ctx.d, ctx.index, ctx.reduce, ctx.include_self = d, index, reduce, include_self
    return y
  end,
  -- torch's scatter_reduce_backward; amax/amin's gradient is shared by the
  -- members equal to the result (x's own element only where it took part)
  backward = function(ctx, g)
    local x, src, y = table.unpack(ctx.saved)
    local d, index, inc = ctx.d, ctx.index, ctx.include_self
    local dt = x.dtype
    local hit = written(x, d, index)
    local gx, gsrc
    if ctx.reduce == "prod" then
      local masked_self = x:masked_fill(x:eq(0), 1)
      gx = g * segment(masked_self, d, index, src, "prod", inc) / masked_self
      local src_zero = src:eq(0)
      local zeros = core.scatter_add(core.zeros(x.shape, { dtype = dt, device = x.device }), d, index, src_zero:to(dt))
      local single = src_zero:logical_and(zeros:gather(d, index):eq(1))
      local others = segment(x, d, index, src:masked_fill(single, 1), "prod", inc)
      gsrc = core.where(single, (g * others):gather(d, index), (g * y):gather(d, index) / src:masked_fill(src_zero, 1))
    else
      local self_is = x:eq(y)
      if not inc then self_is = self_is:logical_and(hit:logical_not()) end
      local src_is = src:eq(y:gather(d, index))
      local share = g / core.scatter_add(self_is:to(dt), d, index, src_is:to(dt))
      gx = share * self_is:to(dt)
      gsrc = share:gather(d, index) * src_is:to(dt)
    end
    if not inc then gx = gx:masked_fill(hit, 0) end
    return gx, gsrc
  end,
}

-- The checked call; src cut to index's shape.
local function scatter_reduce(op, x, dim, index, src, reduce, opts)
  check_tensor(op, x)
  check_tensor(op, src, "src")
  opts = check_opts(op, opts, { include_self = true })
  local inc = opts.include_self
  if inc == nil then inc = true end
  if type(inc) ~= "boolean" then fail(op, "include_self must be a boolean, got %s", type(inc)) end
  if not REDUCES[reduce] then
    fail(op, "reduce must be one of sum, prod, mean, amax, amin; got %s", tostring(reduce))
  end
  local d = dim_of(op, x, dim)
  if not core.is_tensor(index) or index.dtype ~= "int64" then
    fail(op, "index must be an int64 tensor of 1-based positions, got %s",
      core.is_tensor(index) and index.dtype or type(index))
  end
  if src.dtype ~= x.dtype then fail(op, "src must have x's dtype %s, got %s", x.dtype, src.dtype) end
  if x:dim() == 0 then -- a scalar: as a 1-element vector
    if index:dim() ~= 0 or src:dim() ~= 0 then
      fail(op, "x is 0-d: index and src must be 0-d, got %s and %s", shape_str(index), shape_str(src))
    end
    return scatter_reduce(op, x:reshape(1), 1, index:reshape(1), src:reshape(1), reduce, opts):reshape({})
  end
  if index:dim() ~= x:dim() or src:dim() ~= x:dim() then
    fail(op, "x %s, index %s and src %s must have the same number of dims", shape_str(x), shape_str(index), shape_str(src))
  end
  for i = 1, x:dim() do
    if index:size(i) > src:size(i) or (i ~= d and index:size(i) > x:size(i)) then
      fail(op, "index %s must be no larger than src %s, nor than x %s in the dims other than %d",
        shape_str(index), shape_str(src), shape_str(x), d)
    end
  end
  if index:numel() > 0 then
    local lo, hi = index:min():item(), index:max():item()
    if lo < 1 or hi > x:size(d) then
      fail(op, "index values must be in 1..%d (dim %d of x %s), got %d..%d", x:size(d), d, shape_str(x), lo, hi)
    end
  end
  for i = 1, src:dim() do
    if src:size(i) > index:size(i) then src = src:narrow(i, 1, index:size(i)) end
  end
  if reduce == "sum" or reduce == "mean" then
    local hit = written(x, d, index)
    local s = core.scatter_add(inc and x or x:masked_fill(hit, 0), d, index, src)
    if reduce == "sum" then return s end
    local opt = { dtype = x.dtype, device = x.device }
    local count = core.scatter_add(core.full(x.shape, inc and 1 or 0, opt), d, index, core.ones(index.shape, opt))
    count = count:masked_fill(count:eq(0), 1) -- positions not written keep x (s = x there)
    if x:is_floating_point() then return s / count end
    return core.floor_divide(s, count) -- torch's integer mean rounds down
  end
  return SEGMENT(x, src, d, index, reduce, inc)
end

-- ember.scatter_reduce(x, dim, index, src, reduce [, {include_self = true}]):
-- x with src's values reduced into the 1-based positions index along dim
-- (torch.scatter_reduce); reduce is "sum", "prod", "mean", "amax" or
-- "amin"; include_self = false leaves x's own values at the written
-- positions out of the reduction. Differentiable in x and src.
set("scatter_reduce", function(x, dim, index, src, reduce, opts)
  return scatter_reduce("scatter_reduce", x, dim, index, src, reduce, opts)
end, true)

-- ember.index_reduce(x, dim, index, source, reduce [, {include_self = true}]):
-- x with source's slices reduced into the slices at the 1-based positions
-- index (1-d) along dim (torch.index_reduce; reduce is "prod", "mean",
-- "amax" or "amin"). Differentiable in x and source.
set("index_reduce", function(x, dim, index, source, reduce, opts)
  local op = "index_reduce"
  check_tensor(op, x)
  check_tensor(op, source, "source")
  local d = dim_of(op, x, dim)
  if reduce == "sum" or not REDUCES[reduce] then
    fail(op, "reduce must be one of prod, mean, amax, amin; got %s", tostring(reduce))
  end
  if not core.is_tensor(index) or index.dtype ~= "int64" or index:dim() > 1 then
    fail(op, "index must be a 1-d int64 tensor of 1-based positions, got %s",
      core.is_tensor(index) and (index.dtype .. " " .. shape_str(index)) or type(index))
  end
  local k = index:numel()
  local ok = source:dim() == math.max(x:dim(), 1) and source:size(math.min(d, source:dim())) == k
  for i = 1, x:dim() do ok = ok and (i == d or source:size(i) == x:size(i)) end
  if not ok then
    fail(op, "source must be x's shape %s with dim %d the index's length %d, got %s", shape_str(x), d, k, shape_str(source))
  end
  if x:dim() == 0 then return scatter_reduce(op, x, 1, index:reshape({}), source:reshape({}), reduce, opts) end
  local view = {}
  for i = 1, x:dim() do view[i] = i == d and k or 1 end
  return scatter_reduce(op, x, d, index:reshape(view):expand(source.shape), source, reduce, opts)
end, true)
