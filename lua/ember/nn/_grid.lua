-- nn/_grid.lua (internal): sampling an image at given points, as
-- torch.nn.functional.affine_grid and grid_sample (4-d: [N, C, H, W]
-- images, [N, Ho, Wo, 2] grids of (x, y) in [-1, 1]), the rules of
-- nn.functional's. Composed from core ops: the points are unnormalised
-- (align_corners: -1 and 1 are the corner pixels' centres, else their
-- outer edges), moved into the image by the padding mode ("border" clamps,
-- "reflection" mirrors at the edges, "zeros" leaves them and reads zeros
-- outside), then each output reads its four neighbours (bilinear) or the
-- nearest pixel (round half to even, as PyTorch's nearbyint) through one
-- gather each over the flattened planes. The gradient reaches the image
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

-- Grid coordinates g (in [-1, 1]) along a dim of `size` pixels as pixel coordinates.
local function source(g, size, padding_mode, align_corners)
  local c
  if align_corners then c = (g + 1) * ((size - 1) / 2) else c = ((g + 1) * size - 1) / 2 end
  if padding_mode == "border" then
    c = c:clamp(0, size - 1)
  elseif padding_mode == "reflection" then
    if align_corners then c = reflect(c, 0, 2 * (size - 1)) else c = reflect(c, -1, 2 * size - 1) end
    c = c:clamp(0, size - 1)
  end
  return c
end

-- x's values at integer pixel coordinates ix, iy ([N, L] each, float):
-- [N, C, L], zero where a point lies outside the image.
local function read(flat, W, H, ix, iy)
  local N, C = flat.shape[1], flat.shape[2]
  local inside = ix:ge(0):logical_and(ix:le(W - 1)):logical_and(iy:ge(0)):logical_and(iy:le(H - 1))
  local idx = (iy:clamp(0, H - 1) * W + ix:clamp(0, W - 1)):to("int64") + 1
  local L = idx.shape[2]
  local v = flat:gather(3, idx:view({ N, 1, L }):expand({ N, C, L }))
  return v * inside:to(flat.dtype):view({ N, 1, L })
end

-- x [N, C, H, W] sampled at grid [N, Ho, Wo, 2]: [N, C, Ho, Wo].
function M.grid_sample(x, grid, mode, padding_mode, align_corners)
  local N, C, H, W = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  local Ho, Wo = grid.shape[2], grid.shape[3]
  local g = grid:reshape({ N, Ho * Wo, 2 })
  local ix = source(g:select(3, 1), W, padding_mode, align_corners)
  local iy = source(g:select(3, 2), H, padding_mode, align_corners)
  local flat = x:reshape({ N, C, H * W })
  local y
  if mode == "nearest" then
    -- round half to even (PyTorch's nearbyint)
    local function nearest(c)
      local r = (c + 0.5):floor()
      local tie = (r - c):eq(0.5):logical_and(r:remainder(2):eq(1))
      return ember.where(tie, r - 1, r):detach()
    end
    y = read(flat, W, H, nearest(ix), nearest(iy))
  else
    local x0, y0 = ix:detach():floor(), iy:detach():floor()
    local x1, y1 = x0 + 1, y0 + 1
    local wx1, wy1 = ix - x0, iy - y0
    local wx0, wy0 = -wx1 + 1, -wy1 + 1
    local function w(a, b) return (a * b):view({ N, 1, Ho * Wo }) end
    y = read(flat, W, H, x0, y0) * w(wx0, wy0) + read(flat, W, H, x1, y0) * w(wx1, wy0)
      + read(flat, W, H, x0, y1) * w(wx0, wy1) + read(flat, W, H, x1, y1) * w(wx1, wy1)
  end
  return y:view({ N, C, Ho, Wo })
end

-- The points of an H x W image in [-1, 1] coordinates moved by theta
-- [N, 2, 3]: [N, H, W, 2] (x, y), as PyTorch's affine_grid.
function M.affine_grid(theta, N, H, W, align_corners)
  local o = { dtype = theta.dtype, device = theta.device }
  local function steps(n)
    local s = n > 1 and ember.linspace(-1, 1, n, o) or ember.zeros({ 1 }, o)
    if not align_corners then s = s * ((n - 1) / n) end
    return s
  end
  local xs = steps(W):view({ 1, W, 1 }):expand({ H, W, 1 })
  local ys = steps(H):view({ H, 1, 1 }):expand({ H, W, 1 })
  local base = ember.cat({ xs, ys, ember.ones({ H, W, 1 }, o) }, 3):reshape({ 1, H * W, 3 })
  return base:matmul(theta:transpose(2, 3)):reshape({ N, H, W, 2 })
end

return M
