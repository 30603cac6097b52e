-- nn/_pool.lua (internal): the windows of 2-d pooling, composed from views.
-- windows(x, k, s, p, d, fill [, ceil]) -> [N, C, Ho, Wo, kh*kw]: every
-- window of x [N, C, H, W] (padded by p with `fill`; with ceil_mode also
-- past it, for the last window) as the last dim, one strided slice per
-- kernel offset; the pooling modules reduce it (max, mean). counts(...)
-- gives avg_pool2d's divisors.
local ember = require "ember.nn._ember"

local M = {}

-- A number or a pair {h, w} as two positive integers; nil when invalid.
function M.pair(v, min)
  min = min or 1
  if math.type(v) == "integer" then v = { v, v } end
  if type(v) ~= "table" or #v ~= 2 then return nil end
  for i = 1, 2 do
    if math.type(v[i]) ~= "integer" or v[i] < min then return nil end
  end
  return { v[1], v[2] }
end

-- x padded with `fill`: lo[1] rows above, hi[1] below, lo[2] columns on
-- the left, hi[2] on the right.
local function pad(x, lo, hi, fill)
  local opts = { dtype = x.dtype, device = x.device }
  for i = 1, 2 do
    if lo[i] > 0 or hi[i] > 0 then
      local parts = {}
      for _, n in ipairs { lo[i], -1, hi[i] } do
        if n == -1 then
          parts[#parts + 1] = x
        elseif n > 0 then
          local s = { x.shape[1], x.shape[2], x.shape[3], x.shape[4] }
          s[2 + i] = n
          parts[#parts + 1] = ember.full(s, fill, opts)
        end
      end
      x = ember.cat(parts, 2 + i)
    end
  end
  return x
end

-- Output size of one dim, as PyTorch's pooling_output_shape: with
-- ceil_mode the last window may run past the padded input, but it must
-- start inside the input or the left padding.
function M.out_size(n, k, s, p, d, ceil)
  local span = n + 2 * p - d * (k - 1) - 1
  if not ceil then return span // s + 1 end
  local o = -((-span) // s) + 1 -- ceil(span / s) + 1
  if (o - 1) * s >= n + p then o = o - 1 end
  return o
end

-- How far the last of o windows runs past the padded input (ceil_mode).
local function overhang(n, k, s, p, d, o)
  return math.max(0, (o - 1) * s + d * (k - 1) + 1 - (n + 2 * p))
end

-- The windows of xp (padded already) for Ho x Wo outputs.
local function cut(xp, k, s, d, Ho, Wo)
  local parts = {}
  for i = 0, k[1] - 1 do
    local r0 = i * d[1] + 1
    local rows = xp:slice(3, r0, r0 + (Ho - 1) * s[1], s[1])
    for j = 0, k[2] - 1 do
      local c0 = j * d[2] + 1
      parts[#parts + 1] = rows:slice(4, c0, c0 + (Wo - 1) * s[2], s[2])
    end
  end
  return ember.stack(parts, 5)
end

-- Also returns Ho, Wo and the overhang {rows, columns} past the padding
-- (ceil_mode; those positions hold `fill` too).
function M.windows(x, k, s, p, d, fill, ceil)
  local H, W = x.shape[3], x.shape[4]
  local Ho, Wo = M.out_size(H, k[1], s[1], p[1], d[1], ceil), M.out_size(W, k[2], s[2], p[2], d[2], ceil)
  local over = { overhang(H, k[1], s[1], p[1], d[1], Ho), overhang(W, k[2], s[2], p[2], d[2], Wo) }
  local xp = pad(x, p, { p[1] + over[1], p[2] + over[2] }, fill)
  return cut(xp, k, s, d, Ho, Wo), Ho, Wo, over
end

-- How many of each window's positions lie inside a [H, W] input padded by
-- p (with_pad: the padding counts; else only the input) -- not the
-- overhang of ceil_mode: PyTorch's avg_pool2d divisors. [1, 1, Ho, Wo].
function M.counts(H, W, k, s, p, d, ceil, with_pad, opts)
  local h, w, lo = H, W, p
  if with_pad then h, w, lo = H + 2 * p[1], W + 2 * p[2], { 0, 0 } end
  local ones = ember.ones({ 1, 1, h, w }, opts)
  local Ho, Wo = M.out_size(H, k[1], s[1], p[1], d[1], ceil), M.out_size(W, k[2], s[2], p[2], d[2], ceil)
  local over = { overhang(H, k[1], s[1], p[1], d[1], Ho), overhang(W, k[2], s[2], p[2], d[2], Wo) }
  local hi = with_pad and over or { p[1] + over[1], p[2] + over[2] }
  return cut(pad(ones, lo, hi, 0), k, s, d, Ho, Wo):sum(5)
end

-- x's dim `dim` (of size n) pooled to `out` adaptive bins (PyTorch's): bin i
-- (0-based) takes floor(i n / out) .. ceil((i + 1) n / out) - 1, reduced by
-- `how` ("mean", the default, or "max": the gradient to the first largest).
function M.adaptive_mean(x, dim, out, how)
  local function reduce(t)
    if how == "max" then return (t:max(dim, true)) end
    return t:mean(dim, true)
  end
  local n = x.shape[dim]
  if out == n then return x end
  if out == 1 then return reduce(x) end
  local parts = {}
  for i = 0, out - 1 do
    local a = (i * n) // out
    local b = -((-(i + 1) * n) // out) -- ceil((i + 1) n / out)
    parts[#parts + 1] = reduce(x:narrow(dim, a + 1, b - a))
  end
  return ember.cat(parts, dim)
end

-- The output of a resampling of x's last nd dims to out (a number or a list; an entry that is no
-- number keeps that dim) must fit in memory: an absurd size (2^31, a factor of 1e9) is an error
-- naming `who`, before the per-position index lists are built (they hung the process).
local MAX_ELEMENTS = 2 ^ 40
function M.check_output_size(who, x, nd, out)
  local shape = {}
  for i = 1, x.ndim - nd do shape[i] = x.shape[i] end
  for i = 1, nd do
    local o = type(out) == "table" and out[i] or out
    if type(o) ~= "number" then o = x.shape[x.ndim - nd + i] end
    shape[#shape + 1] = o
  end
  M.check_shape_fits(who, shape)
end

-- The same for an output of the given shape (a list of sizes).
function M.check_shape_fits(who, shape)
  local n, text = 1.0, {}
  for i, v in ipairs(shape) do n, text[i] = n * v, ("%.0f"):format(v) end
  if n > MAX_ELEMENTS then
    require("ember._errors").raise("%s: the output [%s] would hold %.3g elements, too many to allocate", who,
      table.concat(text, ", "), n)
  end
end

-- An adaptive pool's input x [N, C, *] or [C, *] (nd spatial dims) has no empty dim but the
-- batch's (PyTorch's rule: an empty bin has no mean or max), and its output (out: the
-- output_size, unchecked here) fits in memory; else an error naming `who`.
function M.check_adaptive_input(who, x, nd, out)
  for i = x.ndim == nd + 2 and 2 or 1, x.ndim do
    if x.shape[i] == 0 then
      require("ember._errors").raise("%s: expected a non-empty size in every dim but the batch's, got shape [%s] "
        .. "(dim %d is empty)", who, table.concat(x.shape, ", "), i)
    end
  end
  M.check_output_size(who, x, nd, out)
end

-- xb [N, C, *spatial] (1 to 3 spatial dims) max-pooled to o (one size per spatial dim; false:
-- that dim's size) adaptive bins, as PyTorch's adaptive_max_pool1d/2d/3d: the largest value of
-- each bin, its gradient to the first largest in the bin's row-major order (dim by dim, as the
-- separable max, it went to another of equal values). Each dim's bins are gathered as windows
-- of the largest bin's length K (a shorter bin repeats its last element, which comes after it
-- in that order), then one max over the K_1 K_2 ... positions of each bin. With `with_indices`
-- also where each max is (PyTorch's return_indices): 1-based flat indices into each input
-- plane of the spatial dims, int64, the output's shape.
function M.adaptive_max(xb, o, with_indices)
  local nd, N, C = xb.ndim - 2, xb.shape[1], xb.shape[2]
  local outs, Ks, view, same, ones = {}, {}, { N, C }, true, true
  local io = { dtype = "int64", device = xb.device }
  for d = 1, nd do
    outs[d] = o[d] or xb.shape[2 + d]
    same, ones = same and outs[d] == xb.shape[2 + d], ones and outs[d] == 1
  end
  if same then
    if not with_indices then return xb end
    local plane = {}
    for d = 1, nd do plane[d] = xb.shape[2 + d] end
    local n = xb:numel() // (N * C)
    return xb, ember.arange(1, n + 1, 1, io):reshape(plane):expand(xb.shape):contiguous()
  end
  if ones then -- a global max pool: one max over each plane
    for d = 1, nd do view[2 + d] = 1 end
    local values, arg = xb:reshape({ N, C, -1 }):max(3)
    if not with_indices then return values:reshape(view) end
    return values:reshape(view), arg:reshape(view)
  end
  local y, pos = xb, {}
  for d = 1, nd do
    local n, out, K = xb.shape[2 + d], outs[d], 0
    for i = 0, out - 1 do K = math.max(K, -((-(i + 1) * n) // out) - (i * n) // out) end
    local idx = {}
    for i = 0, out - 1 do
      local a, b = (i * n) // out, -((-(i + 1) * n) // out)
      for t = 0, K - 1 do idx[#idx + 1] = math.min(a + t, b - 1) + 1 end
    end
    pos[d] = ember.tensor(idx, io)
    y = y:index_select(2 + d, pos[d])
    Ks[d] = K
    view[#view + 1], view[#view + 2] = out, K
  end
  -- [N, C, o1 K1, o2 K2, ...] -> [N, C, o1, o2, ..., K1 K2 ...]: each bin's positions in row-major order
  local perm, shape, k = { 1, 2 }, { N, C }, 1
  for d = 1, nd do perm[#perm + 1], shape[#shape + 1] = 1 + 2 * d, outs[d] end
  for d = 1, nd do perm[#perm + 1], k = 2 + 2 * d, k * Ks[d] end
  shape[#shape + 1] = k
  local values, arg = y:reshape(view):permute(table.unpack(perm)):reshape(shape):max(nd + 3)
  if not with_indices then return values end
  -- the max's offset in its bin, row-major over K1 K2 ..., back to each dim's input position
  local off, t = arg - 1, {}
  for d = nd, 1, -1 do
    t[d] = off % Ks[d]
    off = off // Ks[d]
  end
  local index
  for d = 1, nd do
    local bshape = {}
    for e = 1, nd + 2 do bshape[e] = 1 end
    bshape[2 + d] = outs[d]
    local lin = ember.arange(0, outs[d], 1, io):reshape(bshape) * Ks[d] + t[d] -- 0-based into pos[d]
    local p = pos[d]:index_select(1, lin:reshape({ -1 }) + 1):reshape(lin.shape) - 1
    index = index and index * xb.shape[2 + d] + p or p
  end
  return values, index + 1
end

-- xb [N, C, H, W] pooled to o = {oh, ow} adaptive bins (false: that dim's
-- size) by `how` ("mean" or "max"): the adaptive pools' (modules' and
-- nn.functional's) rule.
function M.adaptive2d(xb, o, how)
  if how == "max" then return M.adaptive_max(xb, o) end
  return M.adaptive_mean(M.adaptive_mean(xb, 3, o[1] or xb.shape[3], how), 4, o[2] or xb.shape[4], how)
end

-- An adaptive pool's output_size: a positive integer or a pair whose
-- entries are positive integers or false (PyTorch's None: that dim's input
-- size; nil too for the first, {nil, 7}: a missing second entry is a table
-- of one, refused); {oh, ow} with false for None, or nil when invalid.
function M.output_pair(v)
  if math.type(v) == "integer" then return v > 0 and { v, v } or nil end
  if type(v) ~= "table" or v[2] == nil then return nil end
  for k in pairs(v) do if k ~= 1 and k ~= 2 then return nil end end
  local out = {}
  for i = 1, 2 do
    local e = v[i]
    if e == nil or e == false then
      out[i] = false
    elseif math.type(e) == "integer" and e > 0 then
      out[i] = e
    else
      return nil
    end
  end
  return out
end

-- output_size as PyTorch prints it: 3, (3, 5) or (None, 5).
function M.output_repr(o)
  local function f(e) return e and tostring(e) or "None" end
  if o[1] == o[2] and o[1] then return tostring(o[1]) end
  return ("(%s, %s)"):format(f(o[1]), f(o[2]))
end

-- A number or a table of one as an integer >= min (1-d sizes); nil when invalid.
function M.single(v, min)
  if type(v) == "table" and #v == 1 then v = v[1] end
  if math.type(v) ~= "integer" or v < (min or 1) then return nil end
  return v
end

-- [N, C, L] or [C, L] -> [N, C, 1, L] (the 1-d pools run the 2-d code on
-- it); the second result takes a [N, C, 1, Lo] result back to x's layout.
function M.as_2d(x)
  local x4 = x:unsqueeze(x.ndim)
  if x.ndim == 2 then x4 = x4:unsqueeze(1) end
  local unbatched = x.ndim == 2
  return x4, function(y)
    y = y:squeeze(3)
    if unbatched then y = y:squeeze(1) end
    return y
  end
end

-- Max pooling of xb [N, C, H, W] with cfg's kernel_size, stride, padding,
-- dilation and ceil_mode (pairs): nn.MaxPool1d/2d's and
-- nn.functional.max_pool1d/2d's. The gradient goes to the first largest.
function M.max2d(cfg, xb)
  return (M.windows(xb, cfg.kernel_size, cfg.stride, cfg.padding, cfg.dilation, -math.huge, cfg.ceil_mode):max(5))
end

-- max2d and where each max is: 1-based flat indices into each input
-- plane of H * W (PyTorch's return_indices, 0-based there), int64
-- [N, C, Ho, Wo]; the first largest of a window, as the gradient's.
function M.max2d_indices(cfg, xb)
  local k, s, p, d = cfg.kernel_size, cfg.stride, cfg.padding, cfg.dilation
  local w, Ho, Wo = M.windows(xb, k, s, p, d, -math.huge, cfg.ceil_mode)
  local values, arg = w:max(5)
  local off = arg - 1 -- the window offset, 0-based, row-major over the kernel
  local io = { dtype = "int64", device = xb.device }
  local rows = (ember.arange(0, Ho, 1, io) * s[1] - p[1]):view({ Ho, 1 })
  local cols = (ember.arange(0, Wo, 1, io) * s[2] - p[2]):view({ 1, Wo })
  local row = (off // k[2]) * d[1] + rows
  local col = (off % k[2]) * d[2] + cols
  return values, row * xb.shape[4] + col + 1
end

-- Average pooling of xb [N, C, H, W] with cfg's sizes (as max2d's),
-- count_include_pad and divisor_override: nn.AvgPool1d/2d's and
-- nn.functional.avg_pool1d/2d's.
function M.avg2d(cfg, xb)
  local k, s, p, d, ceil = cfg.kernel_size, cfg.stride, cfg.padding, cfg.dilation, cfg.ceil_mode
  local sum, Ho, Wo, over = M.windows(xb, k, s, p, d, 0, ceil)
  sum = sum:sum(5)
  if cfg.divisor_override then return sum / cfg.divisor_override end
  local with_pad = cfg.count_include_pad
  if over[1] == 0 and over[2] == 0 and (with_pad or (p[1] == 0 and p[2] == 0)) then
    return sum / (k[1] * k[2])
  end
  local count = M.counts(xb.shape[3], xb.shape[4], k, s, p, d, ceil, with_pad, { dtype = xb.dtype, device = xb.device })
  assert(count.shape[3] == Ho and count.shape[4] == Wo)
  return sum / count
end

-- max2d's inverse, as PyTorch's max_unpool2d (and max3d_indices', as max_unpool3d):
-- xb [N, C, *] put at the 1-based flat `indices` of [N, C, out[1], out[2] (, out[3])]
-- planes, zeros elsewhere. Differentiable in xb. Overlapping windows (stride < kernel) may
-- name one position twice, with the same value: it is written once, and each copy's gradient
-- is the output's gradient there (PyTorch's gather), not a share of it.
function M.unpool2d(xb, indices, out)
  local N, C = xb.shape[1], xb.shape[2]
  local plane = 1
  for _, n in ipairs(out) do plane = plane * n end
  local opts = { dtype = xb.dtype, device = xb.device }
  local idx = indices:reshape({ N, C, -1 })
  local y = ember.zeros({ N, C, plane }, opts):scatter_add(3, idx, xb:reshape({ N, C, -1 }))
  local count = ember.zeros({ N, C, plane }, opts):scatter_add(3, idx, ember.ones(idx.shape, opts))
  if count:numel() > 0 and count:max():item() > 1 then
    -- the sum's value divided by the count, its gradient the sum's
    y = y - y:detach() * (1 - 1 / count:clamp(1))
  end
  return y:reshape({ N, C, table.unpack(out) })
end

-- 3-d pooling (nn.functional.max_pool3d and avg_pool3d): cfg's
-- kernel_size, stride, padding, dilation (3 each: depth, height, width),
-- ceil_mode, and for "avg" count_include_pad and divisor_override. Each
-- depth tap pools the input's depth slices it meets in 2-d (the output
-- depths folded into the batch), then the taps are reduced: max (the first
-- largest, depth by depth) or summed and divided by the window's count
-- (PyTorch's: the padding counted or not, never the ceil_mode overhang).
local function count1(n, k, s, p, o, with_pad)
  local c = {}
  for i = 0, o - 1 do
    local lo, hi = i * s - p, math.min(i * s - p + k, n + p)
    if not with_pad then lo, hi = math.max(lo, 0), math.min(hi, n) end
    c[i + 1] = hi - lo
  end
  return c
end

function M.pool3d(how, cfg, x, with_indices)
  local k, s, p, d, ceil = cfg.kernel_size, cfg.stride, cfg.padding, cfg.dilation, cfg.ceil_mode
  local N, C, D, H, W = x.shape[1], x.shape[2], x.shape[3], x.shape[4], x.shape[5]
  local Do = M.out_size(D, k[1], s[1], p[1], d[1], ceil)
  local hi = p[1] + overhang(D, k[1], s[1], p[1], d[1], Do)
  local fill = how == "max" and -math.huge or 0
  local xp = x
  if p[1] > 0 or hi > 0 then
    local opts = { dtype = x.dtype, device = x.device }
    local parts = {}
    if p[1] > 0 then parts[#parts + 1] = ember.full({ N, C, p[1], H, W }, fill, opts) end
    parts[#parts + 1] = x
    if hi > 0 then parts[#parts + 1] = ember.full({ N, C, hi, H, W }, fill, opts) end
    xp = ember.cat(parts, 3)
  end
  local k2, s2, p2, d2 = { k[2], k[3] }, { s[2], s[3] }, { p[2], p[3] }, { d[2], d[3] }
  local parts, where = {}, {}
  for t = 0, k[1] - 1 do
    local z0 = t * d[1] + 1
    local slices = xp:slice(3, z0, z0 + (Do - 1) * s[1], s[1]):transpose(2, 3):reshape({ N * Do, C, H, W })
    if with_indices then -- each tap's max and where it is in its H x W plane (1-based)
      parts[#parts + 1], where[#where + 1] = M.max2d_indices({ kernel_size = k2, stride = s2, padding = p2, dilation = d2,
        ceil_mode = ceil }, slices)
    else
      local w = M.windows(slices, k2, s2, p2, d2, fill, ceil)
      parts[#parts + 1] = how == "max" and (w:max(5)) or w:sum(5)
    end
  end
  local y
  if with_indices then
    -- the first largest over the taps (as the gradient's), then its flat index in D x H x W:
    -- depth o s - p + (t - 1) d for output depth o (0-based) and tap t (1-based)
    local tap
    y, tap = ember.stack(parts, 1):max(1)
    local hw = ember.stack(where, 1):gather(1, tap:unsqueeze(1)):squeeze(1)
    local io = { dtype = "int64", device = x.device }
    local Ho, Wo = y.shape[3], y.shape[4]
    local o = ember.arange(0, N * Do, 1, io) % Do -- the rows are (sample, output depth), depth fastest
    local depth = (tap - 1) * d[1] + (o * s[1] - p[1]):view({ N * Do, 1, 1, 1 })
    local flat = depth * (H * W) + hw
    local function back(t) return t:reshape({ N, Do, C, Ho, Wo }):transpose(2, 3) end
    return back(y), back(flat)
  end
  if how == "max" then
    y = #parts == 1 and parts[1] or (ember.stack(parts, 1):max(1))
  else
    y = parts[1]
    for i = 2, #parts do y = y + parts[i] end
  end
  local Ho, Wo = y.shape[3], y.shape[4]
  y = y:reshape({ N, Do, C, Ho, Wo }):transpose(2, 3)
  if how == "max" then return y end
  if cfg.divisor_override then return y / cfg.divisor_override end
  local opts = { dtype = x.dtype, device = x.device }
  local cd = ember.tensor(count1(D, k[1], s[1], p[1], Do, cfg.count_include_pad), opts)
  local ch = ember.tensor(count1(H, k[2], s[2], p[2], Ho, cfg.count_include_pad), opts)
  local cw = ember.tensor(count1(W, k[3], s[3], p[3], Wo, cfg.count_include_pad), opts)
  return y / (cd:view({ Do, 1, 1 }) * ch:view({ 1, Ho, 1 }) * cw:view({ 1, 1, Wo }))
end

-- Fractional max pooling (nn.functional.fractional_max_pool2d/3d), PyTorch's rule: per plane, the
-- window starts along a dim of n inputs, o outputs, kernel k and sample u in [0, 1) are
-- floor((i + u) a) - floor(u a) for i < o - 1 (a = (n - k) / (o - 1)) and n - k for the last.
-- xb [N, C, *spatial] (2 or 3 spatial dims); samples a [N, C, nd] Lua table, `which[d]` naming the
-- sample of spatial dim d (PyTorch's order: {u_w, u_h} in 2-d, {u_t, u_h, u_w} in 3-d); returns
-- the maxima [N, C, *out] (the first largest of a window) and their 1-based flat indices into
-- each plane (or volume).
local function starts(u, n, o, k)
  local seq = {}
  local a = o > 1 and (n - k) / (o - 1) or 0
  for i = 0, o - 2 do seq[i + 1] = math.floor((i + u) * a) - math.floor(u * a) end
  seq[o] = n - k
  return seq
end

function M.fractional(xb, k, out, samples, which)
  local nd = #k
  local N, C = xb.shape[1], xb.shape[2]
  local io = { dtype = "int64", device = xb.device }
  local v, first = xb, {}
  for d = 1, nd do
    -- each plane's rows (1-based) of the windows along spatial dim d: [N, C, out[d] * k[d]]
    local pos = {}
    for n = 1, N do
      pos[n] = {}
      for c = 1, C do
        local st, r = starts(samples[n][c][which[d]], xb.shape[2 + d], out[d], k[d]), {}
        for i = 1, out[d] do for j = 1, k[d] do r[#r + 1] = st[i] + j end end
        pos[n][c] = r
      end
    end
    local idx = ember.tensor(pos, io)
    first[d] = idx:view({ N, C, out[d], k[d] }):select(4, 1) - 1 -- 0-based window starts [N, C, out[d]]
    local shape, view = { table.unpack(v.shape) }, { N, C }
    shape[2 + d] = out[d] * k[d]
    for e = 1, nd do view[2 + e] = e == d and out[d] * k[d] or 1 end
    v = v:gather(2 + d, idx:view(view):expand(table.unpack(shape)))
  end
  -- [N, C, o1 k1, o2 k2, ...] -> [N, C, o1, o2, ..., k1 k2 ...]
  local split, perm = { N, C }, { 1, 2 }
  for d = 1, nd do split[#split + 1], split[#split + 2] = out[d], k[d] end
  for d = 1, nd do perm[2 + d] = 1 + 2 * d end
  for d = 1, nd do perm[2 + nd + d] = 2 + 2 * d end
  local kk, flat_shape = 1, { N, C }
  for d = 1, nd do kk, flat_shape[2 + d] = kk * k[d], out[d] end
  flat_shape[3 + nd] = kk
  v = v:reshape(split):permute(perm):reshape(flat_shape)
  local y, arg = v:max(3 + nd)
  -- the flat index: sum over dims of (start + offset) * stride, offsets row-major in the window
  local off, index = arg - 1, nil
  local stride, kstride = 1, 1
  for d = nd, 1, -1 do
    local view = { N, C }
    for e = 1, nd do view[2 + e] = e == d and out[d] or 1 end
    local pos = first[d]:view(view) + (off // kstride) % k[d]
    index = index and (index + pos * stride) or pos * stride
    stride, kstride = stride * xb.shape[2 + d], kstride * k[d]
  end
  return y, index + 1
end

-- [C, H, W] -> [1, C, H, W] (PyTorch's unbatched input); the second result undoes it.
function M.batch(x)
  if x.ndim == 3 then return x:unsqueeze(1), function(y) return y:squeeze(1) end end
  return x, function(y) return y end
end

-- Under ember.autocast the pools keep their input's dtype, as torch's CPU
-- autocast leaves avg_pool1d/2d and adaptive_avg_pool1d/2d alone (its 3-d
-- ones return float32 there; here they keep it too, one rule): their sums
-- run as outside autocast (a bfloat16 sum accumulates in float32) instead
-- of on a float32 copy of every window.
for _, k in ipairs { "adaptive_mean", "avg2d", "pool3d" } do
  local f = M[k]
  M[k] = function(...) return ember.autocast._outside(f, ...) end
end

return M
