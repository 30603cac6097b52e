-- nn.MultiHeadAttention: the C module ember.MultiHeadAttention (core/lua/
-- l_attention.c), which already has the module methods (parameters,
-- named_parameters, state_dict, load_state_dict, train, eval, zero_grad, to),
-- so containers register it as a child like any Lua module.
--
--   nn.MultiHeadAttention{d_model=, heads=, attention="standard", dropout=,
--                         bias=, causal=, rope=, <variant options>}
--   nn.MultiHeadAttention(d_model, heads [, opts])
--
-- This file adds what the C module does not do: incremental decoding with
-- a key/value cache (forward_cached), used by the Transformer decoder layers
-- when generating. It recomputes exactly what mha:forward does -- the same
-- projections, RoPE and attention variant (an ember.Attention with the same
-- options and variant parameters) -- on the new queries only, against keys
-- and values kept from earlier steps.
local ember = require "ember.nn._ember"

local MHA = {}

local function build(d_model, heads, opts)
  local t = {}
  if type(d_model) == "table" then
    t = d_model
  else
    for k, v in pairs(opts or {}) do t[k] = v end
    t.d_model, t.heads = d_model, heads
  end
  return ember.MultiHeadAttention(t)
end

setmetatable(MHA, { __call = function(_, ...) return build(...) end })
MHA.new = build

-- The projection weights of a module, shared (not copied).
local function weights(mha)
  local p = mha:named_parameters()
  return p
end

local function linear(x, w, b)
  local y = x:matmul(w:transpose(1, 2))
  if b then y = y + b end
  return y
end

-- [B, L, H*dh] -> [B, H, L, dh]
local function split_heads(x, H)
  local B, L, E = x.shape[1], x.shape[2], x.shape[3]
  return x:reshape(B, L, H, E // H):transpose(2, 3)
end

-- Rotary embedding as l_attention.c's rope(): rotate-half form on
-- x [B, H, L, dh] for positions first_pos, first_pos+1, ... (0-based).
local function rope(x, first_pos, base)
  local L, dh = x.shape[3], x.shape[4]
  local half = dh // 2
  local cs, sn = {}, {}
  for p = 0, L - 1 do
    local crow, srow = {}, {}
    for m = 0, half - 1 do
      local ang = (first_pos + p) * base ^ (-2.0 * m / dh)
      crow[m + 1], srow[m + 1] = math.cos(ang), math.sin(ang)
    end
    cs[p + 1], sn[p + 1] = crow, srow
  end
  local c = ember.tensor(cs, { dtype = "float64", device = x.device }):to(x.dtype)
  local s = ember.tensor(sn, { dtype = "float64", device = x.device }):to(x.dtype)
  local x1, x2 = x:narrow(4, 1, half), x:narrow(4, half + 1, half)
  return ember.cat({ x1 * c - x2 * s, x2 * c + x1 * s }, 4)
end

-- A bare ember.Attention of the module's variant and options, remembered per
-- module (rebuilt when the variant, its options, dtype or device change). Its variant parameters (relpos
-- tables...) are copied from the module when `refresh` is set: at the first
-- step of every sequence, so training between generations is seen.
local bare_cache = setmetatable({}, { __mode = "k" })

local function bare_attention(mha, refresh)
  local opts, names = mha:options(), {}
  for k in pairs(opts) do names[#names + 1] = k end
  table.sort(names)
  local key = { mha.attention, mha.dtype, mha.device }
  for _, k in ipairs(names) do key[#key + 1] = k .. "=" .. tostring(opts[k]) end
  key = table.concat(key, " ")
  local hit = bare_cache[mha]
  if not hit or hit.variant ~= key then
    local spec = { attention = mha.attention, heads = mha.heads, head_dim = mha.head_dim,
                   dtype = mha.dtype, device = mha.device }
    for k, v in pairs(opts) do spec[k] = v end
    hit = { variant = key, attn = ember.Attention(spec) }
    hit.attn:eval()
    bare_cache[mha] = hit
    refresh = true
  end
  if refresh then
    local sd, own = mha:state_dict(), {}
    for k in pairs(hit.attn:state_dict()) do own[k] = sd[k] end
    hit.attn:load_state_dict(own)
  end
  return hit.attn
end

-- forward_cached(mha, x, cache [, opts]) -> out [B, Lnew, d_model]
-- Self-attention (opts.memory == nil): projects the new tokens x
-- [B, Lnew, d_model], appends their keys/values to cache.k / cache.v
-- ([B, H, L, dh]) and attends causally (bottom-right) over all of them.
-- Cross-attention (opts.memory given): keys/values of the memory are
-- projected on the first call only and kept in the cache.
-- opts.key_padding_mask applies to the cached keys ([B, Lk] bool).
-- The cache is a plain table the caller creates empty ({}) per sequence.
function MHA.forward_cached(mha, x, cache, opts)
  opts = opts or {}
  if mha.training then error("MultiHeadAttention.forward_cached: call :eval() first (no dropout in decoding)", 2) end
  local w, H = weights(mha), mha.heads
  local attn = bare_attention(mha, cache.k == nil)
  local q = split_heads(linear(x, w.w_q, w.b_q), H)
  local cross = opts.memory ~= nil
  if cross then
    if not cache.k then
      cache.k = split_heads(linear(opts.memory, w.w_k, w.b_k), H)
      cache.v = split_heads(linear(opts.memory, w.w_v, w.b_v), H)
      if mha.rope then cache.k = rope(cache.k, 0, mha.rope_base or 10000) end
    end
  else
    local k = split_heads(linear(x, w.w_k, w.b_k), H)
    local v = split_heads(linear(x, w.w_v, w.b_v), H)
    local past = cache.k and cache.k.shape[3] or 0
    if mha.rope then k = rope(k, past, mha.rope_base or 10000) end
    if cache.k then
      cache.k = ember.cat({ cache.k, k }, 3)
      cache.v = ember.cat({ cache.v, v }, 3)
    else
      cache.k, cache.v = k, v
    end
  end
  local Lq, Lk = q.shape[3], cache.k.shape[3]
  if mha.rope then q = rope(q, Lk - Lq, mha.rope_base or 10000) end
  local o = attn(q, cache.k, cache.v, {
    causal = not cross and (opts.causal ~= false) or false,
    key_padding_mask = opts.key_padding_mask,
    attn_mask = opts.attn_mask,
  })
  local B = x.shape[1]
  o = o:transpose(2, 3):reshape(B, Lq, mha.d_model)
  return linear(o, w.w_o, w.b_o)
end

return MHA
