-- nn/_pool.lua (internal): the windows of 2-d pooling, composed from views.
-- windows(x, k, s, p, d, fill) -> [N, C, Ho, Wo, kh*kw]: every window of x
-- [N, C, H, W] (padded by p with `fill`) as the last dim, one strided slice
-- per kernel offset; the pooling modules reduce it (max, mean).
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

-- x padded by p[1] rows and p[2] columns of `fill` on each side.
local function pad(x, p, fill)
  local opts = { dtype = x.dtype, device = x.device }
  if p[1] > 0 then
    local s = { x.shape[1], x.shape[2], p[1], x.shape[4] }
    local band = ember.full(s, fill, opts)
    x = ember.cat({ band, x, band }, 3)
  end
  if p[2] > 0 then
    local s = { x.shape[1], x.shape[2], x.shape[3], p[2] }
    local band = ember.full(s, fill, opts)
    x = ember.cat({ band, x, band }, 4)
  end
  return x
end

-- Output size of one dim.
function M.out_size(n, k, s, p, d)
  return (n + 2 * p - d * (k - 1) - 1) // s + 1
end

function M.windows(x, k, s, p, d, fill)
  local H, W = x.shape[3], x.shape[4]
  local Ho, Wo = M.out_size(H, k[1], s[1], p[1], d[1]), M.out_size(W, k[2], s[2], p[2], d[2])
  local xp = pad(x, p, fill)
  local parts = {}
  for i = 0, k[1] - 1 do
    local r0 = i * d[1] + 1
    local rows = xp:slice(3, r0, r0 + (Ho - 1) * s[1], s[1])
    for j = 0, k[2] - 1 do
      local c0 = j * d[2] + 1
      parts[#parts + 1] = rows:slice(4, c0, c0 + (Wo - 1) * s[2], s[2])
    end
  end
  return ember.stack(parts, 5), Ho, Wo
end

-- x's dim `dim` (of size n) pooled to `out` adaptive bins (PyTorch's): bin i
-- (0-based) averages floor(i n / out) .. ceil((i + 1) n / out) - 1.
function M.adaptive_mean(x, dim, out)
  local n = x.shape[dim]
  if out == n then return x end
  if out == 1 then return x:mean(dim, true) end
  local parts = {}
  for i = 0, out - 1 do
    local a = (i * n) // out
    local b = -((-(i + 1) * n) // out) -- ceil((i + 1) n / out)
    parts[#parts + 1] = x:narrow(dim, a + 1, b - a):mean(dim, true)
  end
  return ember.cat(parts, dim)
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

-- [C, H, W] -> [1, C, H, W] (PyTorch's unbatched input); the second result undoes it.
function M.batch(x)
  if x.ndim == 3 then return x:unsqueeze(1), function(y) return y:squeeze(1) end end
  return x, function(y) return y end
end

return M
