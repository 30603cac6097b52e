-- ember/_sdpa.lua: ember.scaled_dot_product_attention, PyTorch's
-- F.scaled_dot_product_attention (2.x) on ember's fused standard attention.
--
--   out = ember.scaled_dot_product_attention(q, k, v
--           [, {attn_mask=, dropout_p=0, is_causal=false, scale=, enable_gqa=false}])
--   out = ember.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)
--
-- The options come by name in a table, or by position in PyTorch's order
-- (nil skips one; a last table names the rest): `(q, k, v, nil, 0, true)`
-- is causal, as PyTorch's F.scaled_dot_product_attention(q, k, v, None, 0.0, True).
--
-- q [..., Hq, L, E], k [..., H, S, E], v [..., H, S, Ev] (2-d [L, E] and
-- 3-d [N, L, E] too) give [..., Hq, L, Ev]: softmax(q k^T * scale + mask) v,
-- scale 1/sqrt(E) by default. As PyTorch:
--   - attn_mask is bool (true = may attend) or float (added to the scores),
--     broadcastable to [..., L, S]; it cannot come with is_causal; a float
--     mask that requires grad (a learned bias) gets its gradient: the call
--     then runs as core ops, O(L*S) memory (the kernel takes masks as
--     constants);
--   - is_causal is PyTorch's top-left causal mask: query i (1-based) sees
--     keys 1..i even when L ~= S (ember.Attention's `causal` aligns the last
--     query with the last key instead, as a KV-cached decoder wants);
--   - dropout_p drops weights whenever it is > 0 (no training flag);
--   - Hq ~= H (grouped-query attention) needs enable_gqa = true and Hq a
--     multiple of H; kv head h // (Hq/H) is read in place, never repeated.
-- Unlike PyTorch, a query row that may attend to no key gives 0, not NaN.
-- The leading dims of q, k and v must be equal (no broadcasting).
-- The work is one call of the fused kernel (ember.Attention, "standard").
local core = require "ember.core"
local errors = require "ember._errors"

local WHO = "ember.scaled_dot_product_attention"
local dense_with_mask_grad
local KNOWN = { attn_mask = true, dropout_p = true, is_causal = true, scale = true, enable_gqa = true }
-- PyTorch's positional order after q, k, v
local POSITIONAL = { "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa" }

local function raise(fmt, ...) errors.raise(WHO .. ": " .. fmt, ...) end

-- One ember.Attention per head layout, dtype and device (they hold no state).
local modules = {}
local function attention_for(H, E, Ev, dtype, device)
  local key = table.concat({ H, E, Ev, dtype, tostring(device) }, ",")
  local m = modules[key]
  if not m then
    m = core.Attention { attention = "standard", heads = H, head_dim = E, v_head_dim = Ev, dtype = dtype,
                         device = device }
    modules[key] = m
  end
  return m
end

local function check_opts(opts)
  for k in pairs(opts) do
    if not KNOWN[k] then
      raise("unknown option '%s' (expected attn_mask, dropout_p, enable_gqa, is_causal, scale)", tostring(k))
    end
  end
  for _, k in ipairs { "is_causal", "enable_gqa" } do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then raise("%s must be true or false, got %s", k, tostring(opts[k])) end
  end
  local p = opts.dropout_p or 0
  if type(p) ~= "number" or not (p >= 0 and p < 1) then raise("dropout_p must be a number in [0, 1), got %s", tostring(p)) end
  if opts.scale ~= nil and (type(opts.scale) ~= "number" or opts.scale ~= opts.scale) then
    raise("scale must be a number, got %s", tostring(opts.scale))
  end
  return opts
end

-- The arguments after q, k, v: by position in PyTorch's order (POSITIONAL;
-- nil skips one), a last plain table naming the rest. (Read by position
-- before, only a table was taken: (q, k, v, nil, 0, true) ran without the
-- causal mask, and (q, k, v, mask) was an error.)
local function read_opts(...)
  local n, out = select("#", ...), {}
  for i = 1, n do
    local v = select(i, ...)
    if i == n and type(v) == "table" and not core.is_tensor(v) then
      for k, o in pairs(v) do
        if out[k] ~= nil then raise("%s is given twice (by position and in the options)", tostring(k)) end
        out[k] = o
      end
    elseif i > #POSITIONAL then
      raise("too many arguments (%d after query, key and value): it takes %s, in this order, or an options table",
        n, table.concat(POSITIONAL, ", "))
    elseif v ~= nil then
      out[POSITIONAL[i]] = v
    end
  end
  return check_opts(out)
end

-- The dims before the last two, as a list.
local function lead(t)
  local s = {}
  for i = 1, t.ndim - 2 do s[i] = t.shape[i] end
  return s
end

local function shape_of(t) return errors.shape_str(t) end

-- softmax(q k^T * scale + mask) v by core ops, differentiable in the float
-- mask too: q [B, Hq, L, E], k and v [B, Hk, S, *], mask broadcasting to
-- [B, Hq, L, S]. A row the mask hides whole gives 0 and gradient 0, as the
-- kernel's; dropout with ember.dropout. Returns out and the weights (before
-- dropout, detached). nn.MultiHeadAttention uses it too.
dense_with_mask_grad = function(q, k, v, mask, scale, p)
  local B, Hq, L, Hk, S = q.shape[1], q.shape[2], q.shape[3], k.shape[2], k.shape[3]
  local out_dtype = q.dtype
  if out_dtype == "bfloat16" then q, k, v, mask = q:float(), k:float(), v:float(), mask:float() end
  if Hk ~= Hq then k, v = k:repeat_interleave(Hq // Hk, 2), v:repeat_interleave(Hq // Hk, 2) end
  local s = (q:matmul(k:transpose(3, 4)) * scale + mask):expand(B, Hq, L, S)
  local dead = s:eq(-math.huge):all(4):view(B, Hq, L, 1)
  local w = s:masked_fill(dead:expand(B, Hq, L, S), 0):softmax(4) * dead:logical_not():to(s.dtype)
  local weights = w
  if p > 0 then w = core.dropout(w:contiguous(), p, true) end
  local out = w:matmul(v)
  if out_dtype == "bfloat16" then out, weights = out:to("bfloat16"), weights:to("bfloat16") end
  return out, weights:detach()
end

local function sdpa(q, k, v, ...)
  for i, t in ipairs { q, k, v } do
    if not core.is_tensor(t) then
      raise("%s must be a tensor, got %s", ({ "query", "key", "value" })[i], type(t))
    end
  end
  local opts = read_opts(...)
  local nd = q.ndim
  if nd < 2 or k.ndim ~= nd or v.ndim ~= nd then
    raise("query, key and value must have the same number of dims (2 or more), got %s, %s and %s",
      shape_of(q), shape_of(k), shape_of(v))
  end
  local L, E, S, Ev = q.shape[nd - 1], q.shape[nd], k.shape[nd - 1], v.shape[nd]
  if k.shape[nd] ~= E or v.shape[nd - 1] ~= S then
    raise("key must be [..., S, E=%d] and value [..., S, Ev] with key's S, got query %s, key %s, value %s", E,
      shape_of(q), shape_of(k), shape_of(v))
  end
  -- B, H of each: the heads dim is the one before L from 4 dims on
  local B, Hq, Hk = 1, 1, 1
  if nd >= 4 then
    Hq, Hk = q.shape[nd - 2], k.shape[nd - 2]
    for i = 1, nd - 3 do B = B * q.shape[i] end
  elseif nd == 3 then
    B = q.shape[1]
  end
  for i = 1, nd - 2 do
    local heads = nd >= 4 and i == nd - 2
    if (not heads and (k.shape[i] ~= q.shape[i] or v.shape[i] ~= q.shape[i])) or (heads and v.shape[i] ~= k.shape[i]) then
      raise("the leading dims of query %s, key %s and value %s must be equal (no broadcasting)",
        shape_of(q), shape_of(k), shape_of(v))
    end
  end
  if Hq ~= Hk then
    if not opts.enable_gqa then
      raise("query has %d heads and key/value %d: grouped-query attention needs {enable_gqa = true}", Hq, Hk)
    end
    if Hq % Hk ~= 0 then raise("query's %d heads must be a multiple of key/value's %d heads", Hq, Hk) end
  end
  local FLOAT = { float32 = true, float64 = true, bfloat16 = true }
  if not FLOAT[q.dtype] or k.dtype ~= q.dtype or v.dtype ~= q.dtype then
    raise("query, key and value must share a float32, float64 or bfloat16 dtype, got %s, %s and %s",
      q.dtype, k.dtype, v.dtype)
  end
  if tostring(k.device) ~= tostring(q.device) or tostring(v.device) ~= tostring(q.device) then
    raise("query, key and value must be on one device, got %s, %s and %s", tostring(q.device),
      tostring(k.device), tostring(v.device))
  end
  local mask, causal = opts.attn_mask, false
  if mask ~= nil then
    if opts.is_causal then raise("attn_mask and is_causal cannot both be set (as PyTorch)") end
    if not core.is_tensor(mask) then raise("attn_mask must be a tensor, got %s", type(mask)) end
    if mask.ndim > nd then raise("attn_mask %s has more dims than query %s", shape_of(mask), shape_of(q)) end
    if mask.dtype ~= "bool" and mask.dtype ~= q.dtype then
      raise("attn_mask must be bool (true = may attend) or float added to the scores in query's dtype %s, got %s",
        q.dtype, mask.dtype)
    end
    if tostring(mask.device) ~= tostring(q.device) then
      raise("attn_mask is on %s, query on %s", tostring(mask.device), tostring(q.device))
    end
    -- it broadcasts to [..., L, S] (the dims of q before L, then L and S)
    local want = lead(q)
    want[#want + 1], want[#want + 2] = L, S
    for i = 1, mask.ndim do
      local m, w = mask.shape[mask.ndim - i + 1], want[#want - i + 1]
      if m ~= 1 and m ~= w then
        raise("attn_mask %s does not broadcast to [%s] (query's leading dims, L = %d, S = %d)", shape_of(mask),
          table.concat(want, ", "), L, S)
      end
    end
    -- the core broadcasts a mask of up to 4 dims against [B, H, L, S]; a
    -- mask over more leading dims is expanded to q's and folded into them
    if mask.ndim > 4 or (mask.ndim > 2 and nd ~= 4) then
      local full = lead(q)
      full[#full + 1], full[#full + 2] = L, S
      local ok, e = pcall(mask.expand, mask, full)
      if not ok then raise("attn_mask %s does not broadcast to %s", shape_of(mask), "[" .. table.concat(full, ", ") .. "]") end
      mask = e:reshape(B, Hq, L, S)
    end
  elseif opts.is_causal then
    if L == S then
      causal = true -- the kernel's own mask: whole tiles above the diagonal are skipped
    else -- top-left: key j <= query i
      local i = core.arange(1, L + 1, { device = q.device }):view(L, 1)
      local j = core.arange(1, S + 1, { device = q.device }):view(1, S)
      mask = j:le(i)
    end
  end
  local p = opts.dropout_p or 0
  local scale = opts.scale -- 0 and negative ones as given (ember.Attention's rule)
  local out
  if mask ~= nil and mask.dtype ~= "bool" and mask.requires_grad and core.is_grad_enabled() then
    -- a learned bias given as the mask gets its gradient, as in PyTorch (the
    -- fused kernel takes masks as constants)
    out = dense_with_mask_grad(q:reshape(B, Hq, L, E), k:reshape(B, Hk, S, E), v:reshape(B, Hk, S, Ev), mask,
      scale or 1 / math.sqrt(E), p)
  else
    local att = attention_for(Hq, E, Ev, q.dtype, q.device)
    att.training = p > 0
    out = att(q:reshape(B, Hq, L, E), k:reshape(B, Hk, S, E), v:reshape(B, Hk, S, Ev),
      { attn_mask = mask, causal = causal, scale = scale, dropout = p > 0 and p or nil })
  end
  local shape = lead(q)
  shape[#shape + 1], shape[#shape + 2] = L, Ev
  return out:reshape(table.unpack(shape))
end

return setmetatable({ dense_with_mask_grad = dense_with_mask_grad }, { __call = function(_, ...) return sdpa(...) end })
