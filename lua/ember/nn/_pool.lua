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

-- [C, H, W] -> [1, C, H, W] (PyTorch's unbatched input); the second result undoes it.
function M.batch(x)
  if x.ndim == 3 then return x:unsqueeze(1), function(y) return y:squeeze(1) end end
  return x, function(y) return y end
end

return M
