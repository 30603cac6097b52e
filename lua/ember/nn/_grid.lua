-- nn/_grid.lua (internal): sampling an image at given points, as
-- torch.nn.functional.affine_grid and grid_sample ([N, C, H, W] images
-- with [N, Ho, Wo, 2] grids of (x, y) in [-1, 1], or [N, C, D, H, W]
-- volumes with [N, Do, Ho, Wo, 3] grids of (x, y, z)), the rules of
-- nn.functional's. Composed from core ops: the points are unnormalised
-- (align_corners: -1 and 1 are the corner pixels' centres, else their
-- outer edges), moved into the image by the padding mode ("border" clamps,
-- "reflection" mirrors at the edges, "zeros" leaves them and reads zeros
-- outside), then each output reads its 2^nd neighbours (bilinear; trilinear
-- for a volume, PyTorch's "bilinear" there too), its 4 x 4 (bicubic,
-- images only, the padding applied to each tap) or the nearest pixel
-- (round half to even, as PyTorch's nearbyint) through one gather each
-- over the flattened planes. The gradient reaches the image
-- (gather's backward adds into the pixels read) and the grid (through the
-- bilinear weights; the integer corners are constants, as PyTorch's).
-- Follows PyTorch 1.13's GridSampler.h.
local ember = require "ember.nn._ember"

local M = {}

-- PyTorch's reflect_coordinates: c mirrored into [lo2 / 2, hi2 / 2].
local function reflect(c, lo2, hi2)
  if lo2 == hi2 then return ember.zeros_like(c) end
  local min, span = lo2 / 2, (hi2 - lo2) / 2
  local d = (c - min):abs()
  local flips = (d / span):detach():floor()
  local extra = d - flips * span -- fmod(d, span), differentiable in d
  local even = flips:remainder(2):eq(0)
  return ember.where(even, extra + min, -extra + span + min)
end

-- a * b + c (b, c numbers) rounded once, as a fused multiply-add: a * b + c
-- plus a constant correction, the fused result's difference from it (so
-- the gradient is b's). float32: the exact value in float64 (a 24-bit a
-- times a size / 2 fits), rounded once; float64: Dekker's exact product
-- error and the sum's error added before the last rounding.
local function fmadd(a, b, c)
  local y = a * b + c
  local ad = a:detach()
  local exact
  if a.dtype == "float32" then
    exact = (ad:double() * b + c):float()
  elseif a.dtype == "float64" then
    local function split(v) -- v = hi + lo, each of at most 26 bits
      local t = v * 134217729
      local hi = t - (t - v)
      return hi, v - hi
    end
    local bt = b * 134217729
    local bh = bt - (bt - b)
    local bl = b - bh
    local ah, al = split(ad)
    local p = ad * b
    local e = ((ah * bh - p) + ah * bl + al * bh) + al * bl -- a * b - p, exactly
    local sum = p + c
    local bb = sum - p
    local e2 = (p - (sum - bb)) + (c - bb) -- p + c - sum, exactly
    exact = sum + (e + e2)
  else
    return y
  end
  return y + (exact - y:detach())
end

-- a * b + c for Lua numbers, rounded once (a fused multiply-add): Dekker's
-- exact product and sum errors added before the last rounding.
local function fma_number(a, b, c)
  local function split(v)
    local t = v * 134217729
    local hi = t - (t - v)
    return hi, v - hi
  end
  local ah, al = split(a)
  local bh, bl = split(b)
  local p = a * b
  local e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
  local sum = p + c
  local bb = sum - p
  return sum + (e + ((p - (sum - bb)) + (c - bb)))
end

-- c clamped into [0, size - 1] with PyTorch's clip_coordinates_set_grad's
-- gradient: 1 strictly inside, 0 on the edge too (clamp's passes it there,
-- which an identity grid with align_corners, its points on the edges, meets).
local function clip(c, size)
  local inside = c:gt(0):logical_and(c:lt(size - 1))
  return ember.where(inside, c, c:detach():clamp(0, size - 1))
end

-- Pixel coordinates c moved into the image by the padding mode.
local function pad(c, size, padding_mode, align_corners)
  if padding_mode == "border" then
    c = clip(c, size)
  elseif padding_mode == "reflection" then
    if align_corners then c = reflect(c, 0, 2 * (size - 1)) else c = reflect(c, -1, 2 * size - 1) end
    c = clip(c, size)
  end
  return c
end

-- Grid coordinates g (in [-1, 1]) along a dim of `size` pixels as pixel
-- coordinates, rounded as PyTorch's CPU kernels do (an identity grid's
-- points fall on pixel centres, where the bilinear gradient is one-sided,
-- so the rounding picks the side): its 2-d kernel is vectorised,
-- fmadd(g + 1, size / 2, -0.5) (align_corners: (g + 1) * ((size - 1) / 2)), its
-- 3-d one scalar, ((g + 1) * size - 1) / 2 (align_corners: (g + 1) / 2 * (size - 1)).
-- (pad then moves them into the image; bicubic pads each tap instead, PyTorch's
-- get_value_bounded: source(g, size, "zeros", ...) and pad(tap, ...).)
local function source(g, size, padding_mode, align_corners, nd)
  local c
  if nd == 2 then
    if align_corners then c = (g + 1) * ((size - 1) / 2) else c = fmadd((g + 1), size / 2, -0.5) end
  elseif align_corners then
    c = (g + 1) / 2 * (size - 1)
  else
    c = ((g + 1) * size - 1) / 2
  end
  return pad(c, size, padding_mode, align_corners)
end

-- x's values at integer pixel coordinates c[k] ([N, L] each, float; c[1]
-- along the last dim, sizes[k] that dim's size): [N, C, L], zero where a
-- point lies outside the image.
local function read(flat, sizes, c)
  local N, C = flat.shape[1], flat.shape[2]
  local inside, idx, stride
  for k = 1, #sizes do
    local ok = c[k]:ge(0):logical_and(c[k]:le(sizes[k] - 1))
    inside = inside and inside:logical_and(ok) or ok
    local part = c[k]:clamp(0, sizes[k] - 1) * (stride or 1)
    idx = idx and idx + part or part
    stride = (stride or 1) * sizes[k]
  end
  idx = idx:to("int64") + 1
  local L = idx.shape[2]
  local v = flat:gather(3, idx:view({ N, 1, L }):expand({ N, C, L }))
  return v * inside:to(flat.dtype):view({ N, 1, L })
end

-- x [N, C, *spatial] (2 or 3 spatial dims) sampled at grid [N, *out, nd]:
-- [N, C, *out].
function M.grid_sample(x, grid, mode, padding_mode, align_corners)
  local nd, N, C = x.ndim - 2, x.shape[1], x.shape[2]
  local sizes, out, L, P = {}, {}, 1, 1
  for k = 1, nd do
    sizes[k] = x.shape[x.ndim - k + 1] -- the grid's k-th coordinate runs along the k-th dim from the end
    P = P * sizes[k]
  end
  for i = 2, grid.ndim - 1 do
    out[#out + 1] = grid.shape[i]
    L = L * grid.shape[i]
  end
  local g = grid:reshape({ N, L, nd })
  local c = {}
  local coord_padding = mode == "bicubic" and "zeros" or padding_mode -- bicubic pads each tap
  for k = 1, nd do c[k] = source(g:select(3, k), sizes[k], coord_padding, align_corners, nd) end
  local flat = x:reshape({ N, C, P })
  local y
  if mode == "bicubic" then
    -- 4 x 4 taps around floor(c), Keys' weights with A = -0.75 (PyTorch's bicubic): each row's
    -- taps along x summed with x's weights, then the rows with y's (its cubic_interp1d order)
    local A = -0.75
    local function near(t) return ((t * (A + 2)) - (A + 3)) * t * t + 1 end
    local function far(t) return ((t * A - 5 * A) * t + 8 * A) * t - 4 * A end
    local lo, w = {}, {}
    for k = 1, 2 do
      lo[k] = c[k]:detach():floor()
      local t = c[k] - lo[k]
      local u = -t + 1
      w[k] = { far(t + 1), near(t), near(u), far(u + 1) }
    end
    local taps = {}
    for k = 1, 2 do
      taps[k] = {}
      for i = 1, 4 do taps[k][i] = pad(lo[k] + (i - 2), sizes[k], padding_mode, align_corners):detach() end
    end
    for j = 1, 4 do
      local row
      for i = 1, 4 do
        local part = read(flat, sizes, { taps[1][i], taps[2][j] }) * w[1][i]:view({ N, 1, L })
        row = row and row + part or part
      end
      local part = row * w[2][j]:view({ N, 1, L })
      y = y and y + part or part
    end
  elseif mode == "nearest" then
    -- round half to even (PyTorch's nearbyint)
    local function nearest(v)
      local r = (v + 0.5):floor()
      local tie = (r - v):eq(0.5):logical_and(r:remainder(2):eq(1))
      return ember.where(tie, r - 1, r):detach()
    end
    local at = {}
    for k = 1, nd do at[k] = nearest(c[k]) end
    y = read(flat, sizes, at)
  else
    local lo, w1, w0 = {}, {}, {}
    for k = 1, nd do
      lo[k] = c[k]:detach():floor()
      w1[k] = c[k] - lo[k]
      w0[k] = -w1[k] + 1
    end
    -- corner `m`: bit k - 1 picks lo[k] + 1 along coordinate k (x, y, then z)
    for m = 0, 2 ^ nd - 1 do
      local at, w = {}, nil
      for k = 1, nd do
        local up = (m >> (k - 1)) & 1 == 1
        at[k] = up and lo[k] + 1 or lo[k]
        local wk = up and w1[k] or w0[k]
        w = w and w * wk or wk
      end
      local part = read(flat, sizes, at) * w:view({ N, 1, L })
      y = y and y + part or part
    end
  end
  return y:view({ N, C, table.unpack(out) })
end

-- The points of an output of `sizes` (H, W or D, H, W) in [-1, 1]
-- coordinates moved by theta [N, nd, nd + 1]: [N, *sizes, nd] ((x, y) or
-- (x, y, z)), as PyTorch's affine_grid.
function M.affine_grid(theta, N, sizes, align_corners)
  local o = { dtype = theta.dtype, device = theta.device }
  local nd = #sizes
  -- PyTorch's linspace_from_neg_one, rounding as it does (its linspace counts the second half
  -- back from 1, then range * (n - 1) / n): an identity grid's points land on the same side of
  -- the pixel centres, where the bilinear gradient jumps, as torch's
  -- (its scalar kernel's start + step * i and end - step * k are fused multiply-adds; float32:
  -- each value rounded to float32, the fused ones exact in double first. Its vectorised chunks,
  -- 8 doubles or 16 floats and more, may round a point an ulp apart)
  local f32 = theta.dtype == "float32"
  local r = f32 and function(v) return (string.unpack("f", string.pack("f", v))) end or function(v) return v end
  local fma = f32 and function(a, b, c) return r(a * b + c) end or fma_number
  local function steps(n)
    if n <= 1 then return ember.zeros({ 1 }, o) end
    local step, v = r(2 / (n - 1)), {}
    for i = 0, n - 1 do
      v[i + 1] = i < n // 2 and fma(step, i, -1) or fma(-step, n - i - 1, 1)
      if not align_corners then v[i + 1] = r(r(v[i + 1] * (n - 1)) / n) end
    end
    return ember.tensor(v, o)
  end
  local full = { table.unpack(sizes) }
  full[nd + 1] = 1
  local cols, count = {}, 1
  for _, n in ipairs(sizes) do count = count * n end
  for k = 1, nd do -- coordinate k (x, y, z) runs along the k-th spatial dim from the end
    local dim = nd - k + 1
    local view = {}
    for i = 1, nd + 1 do view[i] = 1 end
    view[dim] = sizes[dim]
    cols[k] = steps(sizes[dim]):view(view):expand(full)
  end
  cols[nd + 1] = ember.ones(full, o)
  local base = ember.cat(cols, nd + 1):reshape({ 1, count, nd + 1 })
  local shape = { N, table.unpack(sizes) }
  shape[#shape + 1] = nd
  return base:matmul(theta:transpose(2, 3)):reshape(shape)
end

return M
