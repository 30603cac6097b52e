-- check_plugin_decl.lua -- for scripts/check_plugin.lua: a declaration
-- (core:declaration(), ember_attention.h em_attn_decl) written out densely,
-- with references written here independently of the C core: the ALiBi
-- paper's slopes, T5's bucket function, clipped distances, block masks.
-- Returns function(ember) -> dense_declaration(attention, decl, H, Lq, Lk),
-- an additive float64 [H, Lq, Lk] mask (-inf where the block mask hides).
-- Run on its own, it only answers --help (it is a part of check_plugin.lua).
if arg and arg[0] and arg[0]:match("check_plugin_decl%.lua$") then
  require("ember.cli").help_from_header(arg)
  print("check_plugin_decl.lua is loaded by scripts/check_plugin.lua; run that (see its --help)")
  return
end

local function t5_bucket(rel, nb, md, bi)
  local ret, nbk, nn = 0, nb, nil
  if bi then
    nbk = nb // 2
    if rel > 0 then ret = ret + nbk end
    nn = math.abs(rel)
  else
    nn = rel < 0 and -rel or 0
  end
  local max_exact = nbk // 2
  if nn < max_exact then return ret + nn end
  local large = max_exact + math.floor(math.log(nn / max_exact) / math.log(md / max_exact) * (nbk - max_exact))
  return ret + math.min(large, nbk - 1)
end
local function table_row(d, r) -- 0-based
  if d.rel == "clip" then return math.max(-d.max_distance, math.min(d.max_distance, r)) + d.max_distance end
  if d.rel == "abs_clip" then return math.min(math.abs(r), d.max_distance) end
  return t5_bucket(r, d.num_buckets, d.max_distance, d.bidirectional)
end
local function alibi_slopes(H)
  local function pow2(nh) local s = 2 ^ (-8 / nh); local t = {} for i = 1, nh do t[i] = s ^ i end return t end
  local p2 = 1
  while p2 * 2 <= H do p2 = p2 * 2 end
  local sl, extra = pow2(p2), pow2(2 * p2)
  for i = 1, H - p2 do sl[#sl + 1] = extra[2 * i - 1] end
  return sl
end
local function mask_allows(d, p, j) -- 0-based key-axis positions
  if d.global > 0 and (p < d.global or j < d.global) then return true end
  if d.mask == "window" then return j >= p - d.left and j <= p + d.right end
  if d.mask == "blocks" then return math.abs(j // d.block - p // d.block) <= d.local_blocks end
  return true
end
local function dense_declaration(ember, a, d, H, Lq, Lk)
  local tbl = d.table and a:parameters()[d.table]
  local slopes = d.bias == "alibi" and alibi_slopes(H)
  local bias = {}
  for h = 1, H do
    bias[h] = {}
    for i = 1, Lq do
      local row, p = {}, i - 1 + Lk - Lq
      for j = 1, Lk do
        local r, b = (j - 1) - p, 0
        if slopes then b = -slopes[h] * math.abs(r) end
        if tbl then b = tbl[table_row(d, r) + 1][h]:item() end
        row[j] = mask_allows(d, p, j - 1) and b or -math.huge
      end
      bias[h][i] = row
    end
  end
  return ember.tensor(bias, {dtype = "float64"})
end


return function(ember)
  return function(a, d, H, Lq, Lk) return dense_declaration(ember, a, d, H, Lq, Lk) end
end
