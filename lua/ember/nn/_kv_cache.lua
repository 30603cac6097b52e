-- The key/value cache of MultiHeadAttention.forward_cached, in one place.
--
-- A cache is the plain table the caller hands in ({} at a sequence's first
-- step). Keys and values live in buffers [B, Hkv, capacity, dh] that are
-- allocated once, written in place (narrow + copy_) and grown by doubling
-- when full, so a decoding step writes only its new positions instead of
-- copying the whole cache (ember.cat did, at every step). The fields a
-- caller may read:
--   cache.k, cache.v  views [B, Hkv, len, dh] of the filled part
--   cache.len         the number of cached positions
--   cache.capacity    the buffers' length
--   cache.pad         bool [B, len] (true = padding), kept once a
--                     key_padding_mask was given: a batch of left-padded
--                     prompts keeps its padding for every later step
-- and the one a caller may set before the first step:
--   cache.reserve     positions to allocate at once (ember.generate sets
--                     it to prompt + max_new_tokens, at most 2048 new
--                     ones, so the buffers seldom grow); without it the
--                     first step allocates what it needs (at least
--                     MIN_CAPACITY) and growth doubles
-- Buffers are written with autograd off. Where a gradient is wanted (grad
-- mode on and keys that require grad), the cache grows by concatenation
-- instead, which autograd records, and the buffers are made again at the
-- next step under no_grad. A cache belongs to the module that filled it
-- (cache._owner): another module refuses it, even where the shapes agree;
-- and to one kind of call (cache._kind): self-attention, or cross-attention,
-- whose cache holds a memory's keys made at its first call (memory_shape:
-- a memory of another batch or length is refused).
local ember = require "ember.nn._ember"
local errors = require "ember._errors"

local M = {}

M.MIN_CAPACITY = 64

-- A new buffer of `cap` positions holding the first `len` of `old`.
local function grown(old, like, cap, len)
  local shape = { like.shape[1], like.shape[2], cap, like.shape[4] }
  local buf = ember.empty(shape, { dtype = like.dtype, device = like.device })
  if len > 0 then buf:narrow(3, 1, len):copy_(old:narrow(3, 1, len)) end
  return buf
end

-- Checks that new keys fit the cache made by earlier steps (same batch,
-- heads, head dim, dtype, device): a cache of another model is an error.
local function check_fits(cache, k, who)
  local c = cache.k
  if not c then return end
  if c.shape[1] ~= k.shape[1] or c.shape[2] ~= k.shape[2] or c.shape[4] ~= k.shape[4]
      or c.dtype ~= k.dtype or c.device ~= k.device then
    errors.raise("%s: the cache holds keys [B=%d, heads=%d, L, dh=%d] %s on %s, but this step's are "
      .. "[B=%d, heads=%d, L, dh=%d] %s on %s (%s)",
      who, c.shape[1], c.shape[2], c.shape[4], c.dtype, c.device,
      k.shape[1], k.shape[2], k.shape[4], k.dtype, k.device,
      -- only the dtype differs: the steps ran under different autocast states
      (c.shape[1] == k.shape[1] and c.shape[2] == k.shape[2] and c.shape[4] == k.shape[4] and c.device == k.device)
        and "a step under ember.autocast and another outside it? decode every step under the same autocast state"
        or "a cache of another model or batch? start a new one with {}")
  end
end

-- A cache belongs to the module that filled it first: another module's keys
-- may have the same shapes, and would be attended to silently. It is also
-- of one kind, "self" (keys appended at every step) or "cross" (a memory's
-- keys, made once): the one module's self- and cross-attention calls would
-- otherwise read each other's keys (a cross call took the cached self keys
-- as the memory's; a self call appended to the memory's).
function M.claim(cache, owner, who, kind)
  if cache._owner == nil then
    cache._owner = owner
  elseif cache._owner ~= owner then
    errors.raise("%s: this cache was filled by another module (a cache of another model or layer? each attention "
      .. "layer needs its own table: start a new one with {})", who)
  end
  if kind == nil then return end -- (a layer's table of its attentions' caches)
  if cache._kind == nil then
    cache._kind = kind
  elseif cache._kind ~= kind then
    errors.raise("%s: this cache holds %s, but this call is %s: self- and cross-attention each need a cache of "
      .. "their own (start a new one with {})", who,
      cache._kind == "cross" and "a memory's keys (cross-attention)" or "self-attention keys",
      kind == "cross" and "cross-attention (memory given)" or "self-attention (no memory)")
  end
end

-- Appends keys and values [B, Hkv, n, dh] for `owner` (the module);
-- returns the cached views cache.k, cache.v [B, Hkv, len, dh].
function M.append(cache, k, v, who, owner)
  check_fits(cache, k, who)
  M.claim(cache, owner, who, "self")
  local len, n = cache.len or 0, k.shape[3]
  local total = len + n
  if ember.is_grad_enabled() and (k.requires_grad or v.requires_grad) then
    if len > 0 then k, v = ember.cat({ cache.k, k }, 3), ember.cat({ cache.v, v }, 3) end
    cache.k, cache.v, cache.len, cache.capacity = k, v, total, total
    cache._k, cache._v = nil, nil
    return cache.k, cache.v
  end
  ember.no_grad(function()
    if not cache._k or cache.capacity < total then
      local cap = math.max(total, 2 * (cache.capacity or 0), cache.reserve or 0, M.MIN_CAPACITY)
      cache._k = grown(cache._k or cache.k, k, cap, len)
      cache._v = grown(cache._v or cache.v, v, cap, len)
      cache.capacity = cap
    end
    cache._k:narrow(3, len + 1, n):copy_(k)
    cache._v:narrow(3, len + 1, n):copy_(v)
  end)
  cache.len = total
  cache.k, cache.v = cache._k:narrow(3, 1, total), cache._v:narrow(3, 1, total)
  return cache.k, cache.v
end

-- The key padding mask over every cached key after an append of n
-- positions, or nil. `given` is bool [B, len] (over all cached keys, the
-- new ones included) or [B, n] (the new positions only); once one was
-- given the cache keeps it, and later steps without one append false (the
-- new tokens are real).
function M.padding(cache, given, n, who)
  local total = cache.len
  local B = cache.k.shape[1]
  if given ~= nil then
    if not ember.is_tensor(given) or given.dtype ~= "bool" or given.ndim ~= 2 or given.shape[1] ~= B
        or (given.shape[2] ~= total and given.shape[2] ~= n) then
      errors.raise("%s: key_padding_mask must be a bool tensor [B=%d, %d] over every cached key, or [B=%d, %d] "
        .. "over this step's new ones (true = padding), got %s", who, B, total, B, n,
        ember.is_tensor(given) and (errors.shape_str(given) .. " " .. given.dtype) or type(given))
    end
  elseif not cache._pad then
    return nil
  end
  ember.no_grad(function()
    if not cache._pad or cache._pad.shape[2] < total then
      local cap = math.max(cache.capacity or total, total)
      local buf = ember.zeros({ B, cap }, { dtype = "bool", device = cache.k.device })
      local before = total - n
      if cache._pad and before > 0 then buf:narrow(2, 1, before):copy_(cache._pad:narrow(2, 1, before)) end
      cache._pad = buf
    end
    if given == nil then
      cache._pad:narrow(2, total - n + 1, n):fill_(false)
    elseif given.shape[2] == total then
      cache._pad:narrow(2, 1, total):copy_(given)
    else
      cache._pad:narrow(2, total - n + 1, n):copy_(given)
    end
  end)
  cache.pad = cache._pad:narrow(2, 1, total)
  return cache.pad
end

return M
