-- Attention features combined, as a researcher combines them: each variant
-- (standard, local window, relative positions, ALiBi, soft-capping, sinks,
-- prefix-LM and document masks, learned tables, linear, a flex score_mod /
-- mask_mod) with grouped-query heads (kv_heads), key padding, cross-attention
-- (Lq ~= Lk, both ways), causal masks, learned float masks, need_weights,
-- dropout, activation checkpointing, autocast, float64, the KV cache,
-- non-contiguous inputs, batch 1 and length 1.
--
-- The reference is written here from plain ember ops in float64: the
-- module's own projections, keys and values repeated per group
-- (torch's repeat_interleave), softmax(q k^T / sqrt(d) + bias, masked) v,
-- a row that sees no key 0 (ember's documented rule; torch's is NaN).
-- Outputs and the gradients of every input, parameter and learned table are
-- held to it; checkpointed runs to unchecked ones bit for bit; cached
-- decoding to the full pass. What is not supported raises at the user's line.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local raises_here = parity.raises_here

local f64 = { dtype = "float64" }

-- torch.repeat_interleave(t, g, dim = 2) on [B, Hkv, L, d]
local function rep(t, g)
  if g == 1 then return t end
  local idx = {}
  for h = 1, t.shape[2] * g do idx[h] = (h - 1) // g + 1 end
  return t:index_select(2, ember.tensor(idx, { dtype = "int64" }))
end

-- softmax(q k^T * scale [score()] [+ add], masked) v on [B, H, L, d] heads.
-- spec: score(s, P, J) (P the query's position on the key axis [Lq, 1],
-- bottom-right as ember's variants; J the key's [1, Lk]; 1-based), allow(P, J)
-- bool, add (a float mask), causal, kpm [B, Lk] (true = padding), sink [H].
local function attend(q, k, v, spec)
  local B, H, Lq, dh = q.shape[1], q.shape[2], q.shape[3], q.shape[4]
  local Lk = k.shape[3]
  k, v = rep(k, H // k.shape[2]), rep(v, H // v.shape[2])
  local s = q:matmul(k:transpose(3, 4)) * (spec.scale or 1 / math.sqrt(dh))
  local P = ember.arange(1, Lq + 1, f64):view(Lq, 1) + (Lk - Lq)
  local J = ember.arange(1, Lk + 1, f64):view(1, Lk)
  if spec.score then s = spec.score(s, P, J) end
  if spec.add then s = s + spec.add end
  local blocked = ember.zeros({ B, H, Lq, Lk }, { dtype = "bool" })
  if spec.allow then blocked = blocked:logical_or(spec.allow(P, J):logical_not():expand(B, H, Lq, Lk)) end
  if spec.causal then blocked = blocked:logical_or(J:gt(P):view(1, 1, Lq, Lk):expand(B, H, Lq, Lk)) end
  if spec.kpm then blocked = blocked:logical_or(spec.kpm:view(B, 1, 1, Lk):expand(B, H, Lq, Lk)) end
  local empty = blocked:all(4, true)
  s = s:masked_fill(blocked:logical_and(empty:logical_not():expand(B, H, Lq, Lk)), -math.huge)
  local keep = empty:logical_not():to("float64")
  local p
  if spec.sink then
    p = ember.cat({ s, spec.sink:view(1, H, 1, 1):expand(B, H, Lq, 1) }, 4):softmax(-1):narrow(4, 1, Lk)
  else
    p = s:softmax(-1)
  end
  return (p * keep):matmul(v)
end

local function proj(lin, x) return x:matmul(lin.weight:transpose(1, 2)) + lin.bias end

-- [B, L, E] -> [B, heads, L, E / heads]
local function heads_of(x, H) return x:reshape(x.shape[1], x.shape[2], H, x.shape[3] // H):transpose(2, 3) end

-- The module m (nn.MultiHeadAttention) written out densely.
local function reference(m, query, key, spec, attend_fn)
  local q = heads_of(proj(m.q_proj, query), m.heads)
  local k, v = heads_of(proj(m.k_proj, key), m.kv_heads), heads_of(proj(m.v_proj, key), m.kv_heads)
  local o = (attend_fn or attend)(q, k, v, spec)
  return proj(m.out_proj, o:transpose(2, 3):reshape(query.shape[1], query.shape[2], m.heads * m.head_dim))
end

-- max |a - b| over max(|b|, floor)
local function rel(a, b, floor)
  return (a:double() - b:double()):abs():max():item() / math.max(b:double():abs():max():item(), floor or 1e-30)
end

local function close(what, got, want, tol, floor)
  assert(got ~= nil, what .. " is nil")
  assert.are.same(want.shape, got.shape, what .. " shape")
  local e = rel(got, want, floor)
  assert(e <= tol, ("%s: relative error %.3g > %.1g"):format(what, e, tol))
end

local function same_bits(what, got, want)
  assert(got ~= nil and want ~= nil, what .. " is nil")
  assert(got:equal(want), ("%s differs: %.3g"):format(what, (got:double() - want:double()):abs():max():item()))
end

local function randomize(m, dtype)
  ember.no_grad(function()
    for _, p in ipairs(m:parameters()) do p:copy_(ember.randn(p.shape, { dtype = dtype or "float64" }) * 0.5) end
  end)
end

local function clear(m, tensors)
  for _, p in ipairs(m:parameters()) do p.grad = nil end
  for _, t in pairs(tensors) do t.grad = nil end
end

-- m(x, kv, opts) against reference(m, x, kv, spec): the output and the
-- gradients of sum(out * R) for x, kv, every parameter (k_proj's bias is
-- zero in exact arithmetic: rounding noise on both sides) and `extra`.
local function check_module(name, m, x, kv, opts, spec, extra, attend_fn)
  extra = extra or {}
  clear(m, { x, kv, table.unpack(extra) })
  local out = m(x, kv, opts)
  local R = ember.randn(out.shape, f64)
  ;(out * R):sum():backward()
  local got = { x = x.grad:clone(), kv = kv ~= x and kv.grad:clone() or nil }
  for n, p in pairs(m:named_parameters()) do got[n] = p.grad and p.grad:clone() end
  for i, t in ipairs(extra) do got[i] = t.grad and t.grad:clone() end
  clear(m, { x, kv, table.unpack(extra) })
  local want = reference(m, x, kv, spec, attend_fn)
  close(name .. " out", out, want, 1e-10)
  ;(want * R):sum():backward()
  close(name .. " grad x", got.x, x.grad, 1e-9)
  if kv ~= x then close(name .. " grad kv", got.kv, kv.grad, 1e-9) end
  for n, p in pairs(m:named_parameters()) do
    if n ~= "k_proj.bias" then close(name .. " grad " .. n, got[n], p.grad, 1e-9) end
  end
  for i, t in ipairs(extra) do close(name .. " grad of learned tensor " .. i, got[i], t.grad, 1e-9) end
end

local function window(l, r) return function(P, J) return (P - J):le(l):logical_and((J - P):le(r)) end end
local function alibi(H)
  local slopes = ember.tensor(ember.alibi_slopes(H), f64):view(1, H, 1, 1)
  return function(s, P, J) return s - slopes * (P - J):abs() end
end

-- name, options, the reference's spec (for 4 heads), per-call inputs for (B = 2, Lk)
local VARIANTS = {
  { "standard", {}, function() return {} end },
  { "local", { window_left = 2, window_right = 1 }, function() return { allow = window(2, 1) } end },
  { "window_lua", { window_left = 1, window_right = 2 }, function() return { allow = window(1, 2) } end },
  { "relpos", { mode = "alibi" }, function() return { score = alibi(4) } end },
  { "alibi_lua", {}, function() return { score = alibi(4) } end },
  { "softcap", { cap = 0.7 }, function() return { score = function(s) return (s / 0.7):tanh() * 0.7 end } end },
  { "prefix_lm", {}, function() return { allow = function(P, J) return J:le(P):logical_or(J:le(2)) end } end,
    function() return { prefix = ember.tensor({ 2, 2 }, { dtype = "int64" }) } end },
  { "sliding_sinks", { window_left = 1, window_right = 0, sinks = 1 },
    function() return { allow = function(P, J) return window(1, 0)(P, J):logical_or(J:le(1)) end } end },
  { "document", {}, function(Lq, Lk, doc)
      -- the query's document is that of its position on the key axis, the first for those before it
      local pos = ember.arange(Lk - Lq + 1, Lk + 1, { dtype = "int64" }):clamp(1, Lk)
      local dq = doc:index_select(2, pos)
      local same = dq:view(2, 1, Lq, 1):eq(doc:view(2, 1, 1, Lk))
      return { allow = function() return same end }
    end,
    function(Lk) return { doc = ember.tensor({ { 1, 1, 2, 2, 2, 3 }, { 1, 2, 2, 2, 3, 3 } }, { dtype = "int64" }):narrow(2, 1, Lk) } end },
}

local PADDING = ember.tensor({ { false, false, false, false, false, false }, { false, false, false, true, true, true } })

describe("every variant with grouped heads, key padding, cross-attention and causal masks", function()
  -- (kv_heads, Lq, Lk, causal, padding): each variant sees every kind of combination once
  local COMBOS = { { 4, 5, 5, true, true }, { 2, 3, 6, false, true }, { 1, 6, 4, true, false }, { 2, 4, 6, true, true },
                   { 1, 5, 5, false, false } }
  for _, vc in ipairs(VARIANTS) do
    it(vc[1] .. ": output and every gradient equal the float64 dense reference", function()
      for _, c in ipairs(COMBOS) do
        local Hkv, Lq, Lk, causal, padded = table.unpack(c)
        local name = ("%s kv_heads=%d Lq=%d Lk=%d causal=%s padding=%s"):format(vc[1], Hkv, Lq, Lk, causal, padded)
        ember.manual_seed(7)
        local cross = Lq ~= Lk
        local o = { d_model = 8, heads = 4, kv_heads = Hkv, attention = vc[1], dtype = "float64", kdim = cross and 6 or nil,
                    vdim = cross and 6 or nil }
        for k, v in pairs(vc[2]) do o[k] = v end
        local m = nn.MultiHeadAttention(o)
        randomize(m)
        local x = ember.randn({ 2, Lq, 8 }, f64):requires_grad_()
        local kv = cross and ember.randn({ 2, Lk, 6 }, f64):requires_grad_() or x
        local kpm = padded and PADDING:narrow(2, 1, Lk) or nil
        local inputs = vc[4] and vc[4](Lk) or nil
        local spec = vc[3](Lq, Lk, inputs and inputs.doc)
        spec.causal, spec.kpm = causal, kpm
        check_module(name, m, x, kv, { key_padding_mask = kpm, causal = causal, variant_inputs = inputs }, spec)
      end
    end)
  end
end)

describe("learned tables and learned masks with grouped heads and cross-attention", function()
  local function setup(Hkv, cross, att, opts)
    ember.manual_seed(3)
    local o = { d_model = 8, heads = 4, kv_heads = Hkv, attention = att, dtype = "float64" }
    for k, v in pairs(opts or {}) do o[k] = v end
    local m = nn.MultiHeadAttention(o)
    randomize(m)
    local Lq, Lk = 5, cross and 6 or 5
    local x = ember.randn({ 2, Lq, 8 }, f64):requires_grad_()
    local kv = cross and ember.randn({ 2, Lk, 8 }, f64):requires_grad_() or x
    return m, x, kv, Lq, Lk, PADDING:narrow(2, 1, Lk)
  end

  for _, c in ipairs { { 2, false }, { 1, true } } do
    local Hkv, cross = c[1], c[2]
    local tag = (" kv_heads=%d cross=%s"):format(Hkv, cross)

    it("sinks (a learned logit per head)" .. tag, function()
      local m, x, kv, _, _, kpm = setup(Hkv, cross, "sinks")
      check_module("sinks", m, x, kv, { key_padding_mask = kpm, causal = true },
        { causal = true, kpm = kpm, sink = m.attn.sink }, { m.attn.sink })
    end)

    it("a learned distance table (example_lua)" .. tag, function()
      local m, x, kv, Lq, Lk, kpm = setup(Hkv, cross, "example_lua", { max_distance = 3 })
      local tbl = m.attn.distance_bias
      check_module("example_lua", m, x, kv, { key_padding_mask = kpm }, { kpm = kpm, score = function(s, P, J)
        local d = (P - J):abs():clamp(0, 3):long():reshape(-1) + 1
        return s + tbl:index_select(1, d):view(Lq, Lk, 4):permute(3, 1, 2):unsqueeze(1)
      end }, { tbl })
    end)

    it("relpos shaw (learned key and value tables)" .. tag, function()
      local m, x, kv, Lq, Lk, kpm = setup(Hkv, cross, "relpos", { max_relative_position = 2 })
      local rk, rv = m.attn.rel_k, m.attn.rel_v
      local P = ember.arange(1, Lq + 1, f64):view(Lq, 1) + (Lk - Lq)
      local idx = (ember.arange(1, Lk + 1, f64):view(1, Lk) - P):clamp(-2, 2):long():reshape(-1) + 3
      local function shaw(q, k, v)
        k, v = rep(k, 4 // Hkv), rep(v, 4 // Hkv)
        local rkg, rvg = rk:index_select(1, idx):view(1, 1, Lq, Lk, 2), rv:index_select(1, idx):view(1, 1, Lq, Lk, 2)
        local s = (q:matmul(k:transpose(3, 4)) + (q:unsqueeze(4) * rkg):sum(5)) / math.sqrt(2)
        local p = s:masked_fill(kpm:view(2, 1, 1, Lk):expand(2, 4, Lq, Lk), -math.huge):softmax(-1)
        return p:matmul(v) + (p:unsqueeze(5) * rvg):sum(4)
      end
      check_module("shaw", m, x, kv, { key_padding_mask = kpm }, {}, { rk, rv }, shaw)
    end)

    it("a learned float attn_mask, [Lq, Lk] and per head, with padding and causal" .. tag, function()
      local m, x, kv, Lq, Lk, kpm = setup(Hkv, cross, "standard")
      local am = (ember.randn({ Lq, Lk }, f64) * 0.3):requires_grad_()
      check_module("attn_mask", m, x, kv, { key_padding_mask = kpm, causal = true, attn_mask = am },
        { causal = true, kpm = kpm, add = am }, { am })
      local am4 = (ember.randn({ 2, 4, Lq, Lk }, f64) * 0.3):requires_grad_()
      check_module("attn_mask 4-d", m, x, kv, { attn_mask = am4 }, { add = am4 }, { am4 })
      -- a constant one goes to the kernel
      local c = ember.randn({ 1, 4, Lq, Lk }, f64)
      check_module("constant attn_mask", m, x, kv, { attn_mask = c, key_padding_mask = kpm }, { add = c, kpm = kpm })
    end)
  end

  it("a learned attn_mask returns the output alone unless need_weights, as every other route", function()
    -- the learned mask's route returned its weights as a second result: nn.checkpoint(mha, ...)
    -- then packed two tensors in its recompute and failed in the backward
    local m, x, kv, Lq, Lk = setup(2, true, "standard")
    local am = (ember.randn({ Lq, Lk }, f64) * 0.3):requires_grad_()
    assert.is_nil(select(2, m(x, kv, { attn_mask = am })))
    local _, w = m(x, kv, { attn_mask = am, need_weights = true })
    assert.are.same(ember.Size { 2, 4, Lq, Lk }, w.shape)
  end)
end)

describe("linear attention with grouped heads, padding, cross lengths and causal", function()
  -- phi(x) = elu(x) + 1: out_i = sum_j a_ij v_j / (sum_j a_ij + eps), a_ij = phi(q_i).phi(k_j) over visible j
  local function linear_ref(q, k, v, causal, kpm)
    local B, H, Lq, Lk = q.shape[1], q.shape[2], q.shape[3], k.shape[3]
    k, v = rep(k, H // k.shape[2]), rep(v, H // v.shape[2])
    local a = (q:elu() + 1):matmul((k:elu() + 1):transpose(3, 4))
    local P = ember.arange(1, Lq + 1, f64):view(Lq, 1) + (Lk - Lq)
    local J = ember.arange(1, Lk + 1, f64):view(1, Lk)
    if causal then a = a:masked_fill(J:gt(P):view(1, 1, Lq, Lk):expand(B, H, Lq, Lk), 0) end
    a = a:masked_fill(kpm:view(B, 1, 1, Lk):expand(B, H, Lq, Lk), 0)
    return a:matmul(v) / (a:sum(4, true) + 1e-6)
  end
  for _, kernel in ipairs { "auto", "composed" } do
    it(kernel .. " kernel: output and gradients equal the dense reference", function()
      for _, c in ipairs { { 2, 5, 5, true }, { 1, 3, 6, false }, { 4, 6, 3, true }, { 2, 1, 1, true } } do
        local Hkv, Lq, Lk, causal = table.unpack(c)
        ember.manual_seed(3)
        local q = ember.randn({ 2, 4, Lq, 3 }, f64):requires_grad_()
        local k, v = ember.randn({ 2, Hkv, Lk, 3 }, f64):requires_grad_(), ember.randn({ 2, Hkv, Lk, 3 }, f64):requires_grad_()
        local kpm = ember.tensor({ { false, false, false, false, false, false }, { false, false, true, false, true, true } })
          :narrow(2, 1, Lk)
        local att = ember.Attention { attention = "linear", heads = 4, head_dim = 3, dtype = "float64", kernel = kernel }
        local out = att(q, k, v, { causal = causal, key_padding_mask = kpm })
        local want = linear_ref(q, k, v, causal, kpm)
        local name = ("linear kv_heads=%d Lq=%d Lk=%d causal=%s"):format(Hkv, Lq, Lk, causal)
        close(name .. " out", out, want, 1e-10)
        local g = ember.randn(out.shape, f64)
        out:backward(g)
        local got = { q.grad:clone(), k.grad:clone(), v.grad:clone() }
        q.grad, k.grad, v.grad = nil, nil, nil
        want:backward(g)
        for i, t in ipairs { q, k, v } do close(name .. " grad " .. i, got[i], t.grad, 1e-9) end
      end
    end)
  end
end)

describe("ember.flex_attention: score_mod with a learned bias and a block mask, grouped heads, cross lengths", function()
  for _, mode in ipairs { "plain", "non-contiguous query", "checkpointed", "float32", "autocast" } do
    it(mode .. ": output and the gradients of q, k, v and the bias equal the dense reference", function()
      for _, c in ipairs { { 6, 6, 2 }, { 4, 9, 1 }, { 9, 4, 4 }, { 1, 5, 2 } } do
        local Lq, Lk, Hkv = table.unpack(c)
        ember.manual_seed(5)
        local D = { dtype = (mode == "float32" or mode == "autocast") and "float32" or "float64" }
        local q = ember.randn({ 2, 4, Lq, 3 }, D):requires_grad_()
        local k, v = ember.randn({ 2, Hkv, Lk, 3 }, D):requires_grad_(), ember.randn({ 2, Hkv, Lk, 3 }, D):requires_grad_()
        local bias = (ember.randn({ 4, Lq, Lk }, D) * 0.5):requires_grad_()
        local slope = ember.tensor({ 0.5, 0.25, 0.125, 0.0625 }, D)
        local function score_mod(s, b, h, qi, ki) return s + bias[h][qi][ki] - slope[h] * ember.abs(qi - ki) end
        local function mask_mod(b, h, qi, ki) return ember.logical_or(ki:le(qi + 1), ki:eq(Lk)) end
        local bm = ember.create_block_mask(mask_mod, nil, nil, Lq, Lk, { BLOCK_SIZE = 2 })
        local function call(a, b, cc)
          return ember.flex_attention(a, b, cc, { score_mod = score_mod, block_mask = bm, enable_gqa = Hkv ~= 4 })
        end
        local qq = mode == "non-contiguous query" and q:transpose(3, 4):contiguous():transpose(3, 4) or q
        local out
        if mode == "checkpointed" then out = nn.checkpoint(call, qq, k, v)
        elseif mode == "autocast" then out = ember.autocast("bfloat16", call, qq, k, v)
        else out = call(qq, k, v) end
        local Q, K, V, Bi = q:detach():double():requires_grad_(), k:detach():double():requires_grad_(),
          v:detach():double():requires_grad_(), bias:detach():double():requires_grad_()
        -- q_idx is the query's row (top-left), as PyTorch's
        local Qi, J = ember.arange(1, Lq + 1, f64):view(Lq, 1), ember.arange(1, Lk + 1, f64):view(1, Lk)
        local sl = slope:double():view(1, 4, 1, 1)
        local want = attend(Q, K, V, { score = function(s) return s + Bi:unsqueeze(1) - sl * (Qi - J):abs() end,
          allow = function() return J:le(Qi + 1):logical_or(J:eq(Lk)) end })
        local tol = D.dtype == "float64" and 1e-10 or (mode == "float32" and 2e-5 or 3e-2)
        local name = ("%s Lq=%d Lk=%d kv_heads=%d"):format(mode, Lq, Lk, Hkv)
        close(name .. " out", out, want, tol)
        local g = ember.randn(out.shape, f64)
        out:backward(g:to(out.dtype))
        want:backward(g)
        for n, pair in pairs { q = { q, Q }, k = { k, K }, v = { v, V }, bias = { bias, Bi } } do
          close(name .. " grad " .. n, pair[1].grad, pair[2].grad, tol * 10)
        end
      end
    end)
  end
end)

-- Runs f(ckpt) twice, without and with checkpointing, from one seed; returns both results.
local function twice(f)
  local r = {}
  for i, ck in ipairs { false, true } do
    ember.manual_seed(4)
    r[i] = f(ck)
    r[i].after = ember.rand(1):item() -- the generator continues where the unchecked run leaves it
  end
  return r[1], r[2]
end

local function grads_of(m, named)
  local g = {}
  for n, p in pairs(m:named_parameters()) do g[n] = p.grad and p.grad:clone() end
  for n, t in pairs(named) do g["input " .. n] = t.grad and t.grad:clone() end
  return g
end

local function same_runs(tag, a, b)
  same_bits(tag .. " output", b.y, a.y)
  for n, g in pairs(a.g) do same_bits(tag .. " grad " .. n, b.g[n], g) end
  assert.are.equal(a.after, b.after, tag .. ": the generator after the step")
end

describe("activation checkpointing gives the unchecked run's gradients bit for bit", function()
  local LAYER_VARIANTS = { { "standard", {} }, { "local", { window_left = 2, window_right = 1 } }, { "relpos", {} },
    { "relpos", { mode = "t5" } }, { "example_lua", { max_distance = 3 } }, { "sinks", {} }, { "document", {} },
    { "linear", {} } }
  for _, dt in ipairs { "float64", "autocast" } do
    it(dt .. ": TransformerEncoderLayer{checkpoint = true} with every kind of variant, kv_heads, padding and dropout", function()
      for _, vc in ipairs(LAYER_VARIANTS) do
        for _, Hkv in ipairs { 4, 2 } do
          local tag = ("%s %s%s kv_heads=%d"):format(dt, vc[1], vc[2].mode and (" " .. vc[2].mode) or "", Hkv)
          ember.manual_seed(11)
          local dtype = dt == "float64" and "float64" or "float32"
          local layer = nn.TransformerEncoderLayer(8, 4, { dim_feedforward = 16, dropout = 0.2, attention = vc[1],
            attention_options = vc[2], kv_heads = Hkv, dtype = dtype })
          local x = ember.randn({ 2, 6, 8 }, { dtype = dtype }):requires_grad_()
          local opts = { key_padding_mask = vc[1] ~= "linear" and PADDING or nil, causal = true }
          if vc[1] == "document" then
            opts.variant_inputs = { doc = ember.tensor({ { 1, 1, 2, 2, 2, 3 }, { 1, 2, 2, 2, 3, 3 } }, { dtype = "int64" }) }
          end
          local R = ember.randn({ 2, 6, 8 }, { dtype = dtype })
          local a, b = twice(function(ck)
            layer.checkpoint = ck
            clear(layer, { x })
            local y
            if dt == "autocast" then y = ember.autocast("bfloat16", function() return layer(x, opts) end)
            else y = layer(x, opts) end
            ;(y:to(dtype) * R):sum():backward()
            return { y = y:detach(), g = grads_of(layer, { x = x }) }
          end)
          same_runs(tag, a, b)
        end
      end
    end)
  end

  it("TransformerDecoderLayer{checkpoint = true}: a window on the target, variants on the memory, its padding", function()
    for _, ca in ipairs { "standard", "relpos", "alibi_lua" } do
      ember.manual_seed(1)
      local layer = nn.TransformerDecoderLayer(8, 4, { dim_feedforward = 16, dropout = 0.3, kv_heads = 2,
        cross_attention = ca, attention = "window_lua", attention_options = { window_left = 2, window_right = 0 },
        memory_dim = 6, dtype = "float64" })
      local x, mem = ember.randn({ 2, 5, 8 }, f64):requires_grad_(), ember.randn({ 2, 7, 6 }, f64):requires_grad_()
      local mpad = ember.tensor({ { false, false, false, false, false, false, false }, { false, false, false, false, true, true, true } })
      local a, b = twice(function(ck)
        layer.checkpoint = ck
        clear(layer, { x, mem })
        local y = layer(x, mem, { memory_key_padding_mask = mpad })
        y:pow(2):sum():backward()
        return { y = y:detach(), g = grads_of(layer, { x = x, memory = mem }) }
      end)
      same_runs("decoder, cross " .. ca, a, b)
    end
  end)

  it("a learned attn_mask (a non-leaf of a learned bias) through the layers and through nn.checkpoint(mha, ...)", function()
    -- the checkpoint's first forward runs with grad mode off: the mask took the fused kernel there
    -- and core ops in the recompute and the unchecked run (other bits), and mha returned the
    -- learned route's weights as a second result in the recompute only (an error in the backward)
    for _, Hkv in ipairs { 4, 2 } do
      ember.manual_seed(1)
      local layer = nn.TransformerEncoderLayer(8, 4, { dim_feedforward = 16, dropout = 0.3, kv_heads = Hkv, dtype = "float64" })
      local x = ember.randn({ 2, 5, 8 }, f64):requires_grad_()
      local bias = (ember.randn({ 5, 5 }, f64) * 0.1):requires_grad_()
      local a, b = twice(function(ck)
        layer.checkpoint = ck
        clear(layer, { x, bias })
        local y = layer(x, { attn_mask = bias * 2, causal = true })
        y:pow(2):sum():backward()
        return { y = y:detach(), g = grads_of(layer, { x = x, bias = bias }) }
      end)
      same_runs("layer, learned mask, kv_heads=" .. Hkv, a, b)
      local mha = layer.self_attn
      a, b = twice(function(ck)
        clear(mha, { x, bias })
        local f = function(xx, bb) return mha(xx, { attn_mask = bb }) end
        local y = ck and nn.checkpoint(f, x, bias) or f(x, bias)
        y:pow(2):sum():backward()
        return { y = y:detach(), g = grads_of(mha, { x = x, bias = bias }) }
      end)
      same_runs("nn.checkpoint(mha), learned mask, kv_heads=" .. Hkv, a, b)
    end
  end)

  it("a bias built inside the checkpointed fn from a learned tensor, and checkpoints nested in one", function()
    -- the first forward ran with grad mode off: a mask computed there from the argument did not
    -- require grad, so it took the fused kernel, and core ops in the recompute (other bits)
    ember.manual_seed(1)
    local l1 = nn.TransformerEncoderLayer(8, 4, { dim_feedforward = 16, dropout = 0.2, kv_heads = 2, dtype = "float64" })
    local l2 = nn.TransformerEncoderLayer(8, 4, { dim_feedforward = 16, dropout = 0.2, kv_heads = 2, dtype = "float64",
      attention = "local", attention_options = { window_left = 1, window_right = 1 } })
    local x = ember.randn({ 2, 5, 8 }, f64):requires_grad_()
    local table_ = (ember.randn({ 5, 5 }, f64) * 0.1):requires_grad_()
    local f = function(xx, t) return l2(l1(xx, { attn_mask = t * 1.5 }), { causal = true }) end
    for _, nested in ipairs { false, true } do
      local a, b = twice(function(ck)
        l1.checkpoint, l2.checkpoint = ck and nested, ck and nested
        clear(l1, { x, table_ })
        clear(l2, {})
        local y = ck and nn.checkpoint(f, x, table_) or f(x, table_)
        y:pow(2):sum():backward()
        local g = grads_of(l1, { x = x, table = table_ })
        for n, t in pairs(grads_of(l2, {})) do g["l2." .. n] = t end
        return { y = y:detach(), g = g }
      end)
      same_runs(nested and "nested checkpoints" or "one checkpoint", a, b)
    end
  end)

  it("flex_attention reading a bias computed inside the checkpointed fn: the same bits, no second trace", function()
    -- with grad off in the first forward the bias did not require grad there: another trace (and route)
    local flex = require "ember.flex"
    ember.manual_seed(1)
    local param = ember.randn({ 4, 5, 5 }, f64):requires_grad_()
    local q = ember.randn({ 1, 4, 5, 3 }, f64):requires_grad_()
    local function fn(qq)
      local bias = param * 0.5
      return ember.flex_attention(qq, qq, qq, { score_mod = function(s, b, h, i, j) return s + bias[h][i][j] end })
    end
    fn(q) -- traced once
    local traces
    local a, b = twice(function(ck)
      param.grad, q.grad = nil, nil
      local before = flex.stats.traces
      local y = ck and nn.checkpoint(fn, q) or fn(q)
      y:pow(2):sum():backward()
      traces = flex.stats.traces - before
      return { y = y:detach(), g = { param = param.grad:clone(), q = q.grad:clone() } }
    end)
    same_runs("flex", a, b)
    assert.are.equal(0, traces, "the checkpointed run traced again")
  end)

  it("a Lua variant's float per-call input that requires grad, under nn.checkpoint", function()
    ember.attention_variant { name = "probe_combos_bias", inputs = { bias = { ndim = 2, dtype = "float" } },
      score = function(s, b, h, q, k, ctx) return s + ctx.bias[q][k] end }
    ember.manual_seed(1)
    local m = nn.MultiHeadAttention(8, 4, { attention = "probe_combos_bias", kv_heads = 2, dropout = 0.2, dtype = "float64" })
    local x = ember.randn({ 2, 5, 8 }, f64):requires_grad_()
    local bias = (ember.randn({ 5, 5 }, f64) * 0.1):requires_grad_()
    local a, b = twice(function(ck)
      clear(m, { x, bias })
      local f = function(xx, bb) return m(xx, { variant_inputs = { bias = bb } }) end
      local y = ck and nn.checkpoint(f, x, bias) or f(x, bias)
      y:pow(2):sum():backward()
      return { y = y:detach(), g = grads_of(m, { x = x, bias = bias }) }
    end)
    same_runs("per-call input", a, b)
  end)

  it("scaled_dot_product_attention with a learned mask, grouped heads and dropout, under nn.checkpoint", function()
    ember.manual_seed(1)
    local q = ember.randn({ 2, 4, 5, 3 }, f64):requires_grad_()
    local k, v = ember.randn({ 2, 2, 6, 3 }, f64):requires_grad_(), ember.randn({ 2, 2, 6, 3 }, f64):requires_grad_()
    local bias = (ember.randn({ 5, 6 }, f64) * 0.1):requires_grad_()
    local f = function(a, b, c, m)
      return ember.scaled_dot_product_attention(a, b, c, { attn_mask = m, dropout_p = 0.2, enable_gqa = true })
    end
    local a, b = twice(function(ck)
      for _, t in ipairs { q, k, v, bias } do t.grad = nil end
      local y = ck and nn.checkpoint(f, q, k, v, bias) or f(q, k, v, bias)
      y:pow(2):sum():backward()
      return { y = y:detach(), g = { q = q.grad:clone(), k = k.grad:clone(), bias = bias.grad:clone() } }
    end)
    same_runs("sdpa", a, b)
  end)

  it("torch's spelling nn.checkpoint(mha, x, x, x) with a loss on the weights: one tensor given three times", function()
    -- the recompute made three leaves of x: mha then projected them apart (not as one joined product)
    -- and x's gradient was the sum of three, in other bits
    ember.manual_seed(1)
    local m = nn.MultiheadAttention(8, 2, { dtype = "float64", batch_first = true, dropout = 0.1 })
    local x = ember.randn({ 2, 5, 8 }, f64):requires_grad_()
    local a, b = twice(function(ck)
      clear(m, { x })
      local y, w
      if ck then y, w = nn.checkpoint(m, x, x, x) else y, w = m(x, x, x) end
      ;(y:pow(2):sum() + w:pow(2):sum() * 3):backward()
      return { y = ember.cat({ y:reshape(-1), w:reshape(-1) }, 1):detach(), g = grads_of(m, { x = x }) }
    end)
    same_runs("torch mha", a, b)
  end)
end)

describe("cached decoding equals the full causal pass", function()
  local CACHED = { { "standard", {} }, { "local", { window_left = 2, window_right = 1 } }, { "relpos", {} },
    { "relpos", { mode = "t5" } }, { "relpos", { mode = "alibi" } }, { "example_lua", { max_distance = 3 } },
    { "sinks", {} }, { "alibi_lua", {} }, { "window_lua", { window_left = 2, window_right = 1 } }, { "linear", {} },
    { "softcap", { cap = 1 } }, { "sliding_sinks", { window_left = 1, window_right = 0, sinks = 1 } } }
  for _, dt in ipairs { "float64", "float32" } do
    it(dt .. ": every variant, kv_heads 4/2/1, rope, a left-padded prompt", function()
      for _, vc in ipairs(CACHED) do
        for _, c in ipairs { { 4, false, true }, { 2, true, true }, { 1, true, false } } do
          local Hkv, rope, padded = table.unpack(c)
          if vc[1] == "linear" then padded = false end
          ember.manual_seed(13)
          local o = { d_model = 8, heads = 4, kv_heads = Hkv, attention = vc[1], rope = rope, dtype = dt }
          for k, v in pairs(vc[2]) do o[k] = v end
          local m = nn.MultiHeadAttention(o)
          randomize(m, dt)
          m:eval()
          local x = ember.randn({ 2, 7, 8 }, { dtype = dt })
          local kpm = padded and ember.tensor({ { false, false, false, false, false, false, false },
            { true, true, false, false, false, false, false } }) or nil
          local full = m(x, { causal = true, key_padding_mask = kpm })
          local cache = {}
          local parts = { m:forward_cached(x:narrow(2, 1, 3), cache, { key_padding_mask = kpm and kpm:narrow(2, 1, 3) }) }
          for t = 4, 7 do parts[#parts + 1] = m:forward_cached(x:narrow(2, t, 1), cache) end
          close(("%s kv_heads=%d rope=%s padded=%s"):format(vc[1], Hkv, rope, padded), ember.cat(parts, 2), full,
            dt == "float64" and 1e-12 or 1e-5)
        end
      end
    end)
  end

  it("cross-attention over a memory: variants that read no query position equal the full pass, step by step", function()
    for _, c in ipairs { { "standard", {} }, { "softcap", { cap = 1 } }, { "sinks", {} }, { "linear", {} } } do
      ember.manual_seed(5)
      local o = { d_model = 8, heads = 4, kv_heads = 2, attention = c[1], dtype = "float64", kdim = 6, vdim = 6 }
      for k, v in pairs(c[2]) do o[k] = v end
      local m = nn.MultiHeadAttention(o)
      randomize(m)
      m:eval()
      local x, mem = ember.randn({ 2, 4, 8 }, f64), ember.randn({ 2, 5, 6 }, f64)
      local mpad = c[1] ~= "linear" and PADDING:narrow(2, 1, 5) or nil
      local full = m(x, mem, { key_padding_mask = mpad })
      local cache, parts = {}, {}
      for t = 1, 4 do parts[t] = m:forward_cached(x:narrow(2, t, 1), cache, { memory = mem, key_padding_mask = mpad }) end
      close("cross cached " .. c[1], ember.cat(parts, 2), full, 1e-12)
    end
  end)

  it("cross-attention that reads the query's position is refused by cached decoding (it computed something else)", function()
    -- forward places cross-attention queries at the memory's end from the whole target's length
    -- (bottom-right); a step of one token sat at the end each time: 0.01-0.6 off, silently
    local mem = ember.randn(1, 4, 8)
    for _, o in ipairs { { rope = true }, { attention = "relpos" }, { attention = "local", window_left = 1, window_right = 1 },
                         { attention = "alibi_lua" }, { attention = "window_lua" } } do
      o.d_model, o.heads = 8, 4
      local m = nn.MultiHeadAttention(o)
      m:eval()
      raises_here(function() m:forward_cached(ember.randn(1, 1, 8), {}, { memory = mem }) end,
        "MultiHeadAttention.forward_cached: cross-attention with " .. (o.rope and "rope = true" or ("attention '" .. o.attention .. "'"))
        .. " reads the query's position")
    end
    -- through a decoder layer, at the caller's line; without a cache it runs
    local layer = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, cross_attention = "relpos" })
    layer:eval()
    local x = ember.randn(1, 3, 8)
    assert.are.same(ember.Size { 1, 3, 8 }, layer(x, mem).shape)
    raises_here(function() layer(x:narrow(2, 1, 1), mem, { cache = {} }) end, "use_cache = false")
  end)

  it("under autocast, with rope and kv_heads, the same bits", function()
    for _, att in ipairs { "standard", "alibi_lua", "local" } do
      ember.manual_seed(3)
      local m = nn.MultiHeadAttention { d_model = 8, heads = 4, kv_heads = 2, attention = att, rope = true }
      m:eval()
      local x = ember.randn(2, 6, 8)
      local full = ember.autocast("bfloat16", function() return m(x, { causal = true }) end)
      local cache, parts = {}, {}
      ember.autocast("bfloat16", function()
        parts[1] = m:forward_cached(x:narrow(2, 1, 3), cache)
        for t = 4, 6 do parts[#parts + 1] = m:forward_cached(x:narrow(2, t, 1), cache) end
      end)
      same_bits("autocast cached " .. att, ember.cat(parts, 2), full)
    end
  end)
end)

describe("autocast, float32, non-contiguous inputs, batch 1 and length 1", function()
  it("every shape and route against the float64 reference", function()
    for _, vc in ipairs { VARIANTS[1], VARIANTS[2], VARIANTS[4], VARIANTS[5] } do
      for _, Hkv in ipairs { 4, 1 } do
        for _, sh in ipairs { { 1, 1, 1 }, { 1, 1, 5 }, { 2, 5, 1 }, { 1, 4, 4 }, { 3, 2, 6 } } do
          local B, Lq, Lk = table.unpack(sh)
          ember.manual_seed(17)
          local o = { d_model = 8, heads = 4, kv_heads = Hkv, attention = vc[1], dtype = "float64" }
          for k, v in pairs(vc[2]) do o[k] = v end
          local m = nn.MultiHeadAttention(o)
          randomize(m)
          -- x stored [8, Lq, B] and kv [Lk + 2, B, 8]: the inputs are a permuted and a narrowed view
          local xs, ks = ember.randn({ 8, Lq, B }, f64), ember.randn({ Lk + 2, B, 8 }, f64)
          local x = xs:permute(3, 2, 1):contiguous():requires_grad_()
          local kv = ks:narrow(1, 2, Lk):transpose(1, 2):contiguous():requires_grad_()
          local spec = vc[3]()
          spec.causal = true
          local want = reference(m, x, kv, spec)
          local R = ember.randn(want.shape, f64)
          ;(want * R):sum():backward()
          local wg = { x = x.grad:clone(), kv = kv.grad:clone() }
          for n, p in pairs(m:named_parameters()) do wg[n] = p.grad:clone() end
          local name = ("%s kv_heads=%d B=%d Lq=%d Lk=%d"):format(vc[1], Hkv, B, Lq, Lk)
          -- float64 on the views themselves
          clear(m, {})
          local xl, kl = xs:clone():requires_grad_(), ks:clone():requires_grad_()
          local xv, kvv = xl:permute(3, 2, 1), kl:narrow(1, 2, Lk):transpose(1, 2)
          local out = m(xv, kvv, { causal = true })
          close(name .. " views out", out, want, 1e-10)
          ;(out * R):sum():backward()
          -- q and k gradients are 0 in exact arithmetic when Lk = 1: measured on the gradients' scale
          close(name .. " views grad x", xl.grad:permute(3, 2, 1), wg.x, 1e-9, 1e-3)
          close(name .. " views grad kv", kl.grad:narrow(1, 2, Lk):transpose(1, 2), wg.kv, 1e-9, 1e-3)
          for n, p in pairs(m:named_parameters()) do
            if n ~= "k_proj.bias" then close(name .. " views grad " .. n, p.grad, wg[n], 1e-9, 1e-3) end
          end
          -- float32, and bfloat16 products under autocast
          for _, mode in ipairs { "float32", "autocast" } do
            local o32 = {}
            for k, v in pairs(o) do o32[k] = v end
            o32.dtype = "float32"
            local m32 = nn.MultiHeadAttention(o32)
            m32:load_state_dict(m:state_dict())
            local x32, kv32 = x:detach():float():requires_grad_(), kv:detach():float():requires_grad_()
            local y
            if mode == "autocast" then y = ember.autocast("bfloat16", function() return m32(x32, kv32, { causal = true }) end)
            else y = m32(x32, kv32, { causal = true }) end
            local tol = mode == "float32" and 1e-5 or 3e-2
            close(name .. " " .. mode .. " out", y, want, tol)
            ;(y:float() * R:float()):sum():backward()
            close(name .. " " .. mode .. " grad x", x32.grad, wg.x, tol * 10, 1e-2)
            close(name .. " " .. mode .. " grad kv", kv32.grad, wg.kv, tol * 10, 1e-2)
            for n, p in pairs(m32:named_parameters()) do
              if Lk == 1 and n:match("^k_proj") then -- 0 in exact arithmetic: rounding noise
                assert(p.grad:abs():max():item() < tol, name .. " " .. mode .. " grad " .. n)
              elseif n ~= "k_proj.bias" then
                close(name .. " " .. mode .. " grad " .. n, p.grad, wg[n], tol * 10, 1e-2)
              end
            end
          end
        end
      end
    end
  end)

  it("need_weights with grouped heads, cross lengths, padding and dropout: the output is the one without", function()
    for _, att in ipairs { "standard", "local", "alibi_lua", "softcap" } do
      ember.manual_seed(3)
      local o = { d_model = 8, heads = 4, kv_heads = 2, attention = att, dtype = "float64", dropout = 0.3 }
      local m = nn.MultiHeadAttention(o)
      local x, kv = ember.randn({ 2, 3, 8 }, f64), ember.randn({ 2, 5, 8 }, f64)
      local kpm = ember.tensor({ { false, false, false, false, false }, { false, true, false, false, true } })
      for _, training in ipairs { false, true } do
        m:train(training)
        ember.manual_seed(9)
        local out, w = m(x, kv, { need_weights = true, key_padding_mask = kpm, causal = true })
        ember.manual_seed(9)
        local out2 = m(x, kv, { key_padding_mask = kpm, causal = true })
        close(att .. " need_weights output", out, out2, 1e-12)
        -- the weights are the probabilities before dropout, detached (ember_attention.h, forward's doc): rows sum to 1
        close(att .. " weights' rows", w:sum(-1), ember.ones({ 2, 4, 3 }, f64), 1e-12)
        assert.is_false(w.requires_grad)
        if not training then
          local vv = rep(heads_of(m.v_proj(kv), 2), 2)
          close(att .. " out_proj(w v)", m.out_proj(w:matmul(vv):transpose(2, 3):reshape(2, 3, 8)), out, 1e-12)
        end
      end
    end
  end)
end)

describe("combinations that are not supported are refused at the user's line", function()
  local x, kv = ember.randn(2, 5, 8), ember.randn(2, 7, 8)

  it("linear attention: masks and dropout", function()
    local lin = nn.MultiHeadAttention(8, 4, { attention = "linear", kv_heads = 2 })
    raises_here(function() lin(x, { attn_mask = ember.zeros(5, 5) }) end, "attention 'linear': does not support an attention mask")
    raises_here(function() lin(x, { allow_mask = ember.ones({ 5, 5 }, { dtype = "bool" }) }) end,
      "attention 'linear': does not support an attention mask")
    lin:eval()
    raises_here(function() lin:forward_cached(x, {}, { block_mask = ember.zeros({ 5, 5 }, { dtype = "bool" }) }) end,
      "attention 'linear': does not support an attention mask")
    raises_here(function() nn.MultiHeadAttention(8, 4, { attention = "linear", dropout = 0.1 }) end,
      "MultiHeadAttention: attention 'linear' has no dropout on attention weights")
  end)

  it("grouped heads that do not divide, flex and sdpa without enable_gqa", function()
    raises_here(function() nn.MultiHeadAttention(8, 4, { kv_heads = 3 }) end, "MultiHeadAttention: heads (4) must be divisible by kv_heads (3)")
    local q, k = ember.randn(1, 4, 5, 2), ember.randn(1, 2, 5, 2)
    raises_here(function() ember.flex_attention(q, k, k) end, "ember.flex_attention: query has 4 heads and key/value 2: grouped-query attention needs {enable_gqa = true}")
    raises_here(function() ember.scaled_dot_product_attention(q, k, k) end,
      "ember.scaled_dot_product_attention: query has 4 heads and key/value 2")
    raises_here(function() ember.flex_attention(q, ember.randn(1, 3, 5, 2), ember.randn(1, 3, 5, 2), { enable_gqa = true }) end,
      "ember.flex_attention: query's 4 heads must be a multiple of key/value's 3 heads")
  end)

  it("padding masks and per-call tensors of the wrong shape or kind with cross-attention", function()
    local m = nn.MultiHeadAttention(8, 4, { kv_heads = 2 })
    raises_here(function() m(x, kv, { key_padding_mask = ember.zeros({ 2, 5 }, { dtype = "bool" }) }) end,
      "MultiHeadAttention.forward: key_padding_mask must be a bool tensor [B=2, Lk=7]")
    raises_here(function() m(x, kv, { attn_mask = ember.zeros(5, 5) }) end,
      "MultiHeadAttention.forward: the attention mask must be [Lq=5, Lk=7]")
    raises_here(function() m(x, kv, { variant_inputs = { doc = ember.ones({ 2, 7 }, { dtype = "int64" }) } }) end,
      "MultiHeadAttention.forward: variant_inputs are for variants written in Lua; 'standard' takes none")
    -- said by the module called (they named the inner Attention.forward, or ember.Attention.forward)
    local doc = nn.MultiHeadAttention(8, 4, { attention = "document", kv_heads = 2 })
    raises_here(function() doc(x, kv) end, "MultiHeadAttention.forward: variant 'document' needs the per-call tensor 'doc'")
    raises_here(function() doc(x, kv, { variant_inputs = { doc = ember.ones({ 2, 7 }) } }) end,
      "MultiHeadAttention.forward: variant 'document' declares its input 'doc' int64")
    raises_here(function() doc(x, kv, { variant_inputs = { doc = ember.ones({ 2, 6 }, { dtype = "int64" }) } }) end,
      "MultiHeadAttention.forward: attention 'document': mask: index 7 out of range for dim 2 of captured tensor 'doc' (size 6)")
    doc:eval()
    raises_here(function() doc:forward_cached(x, {}) end,
      "MultiHeadAttention.forward_cached: variant 'document' needs the per-call tensor 'doc'")
  end)

  it("the KV cache: weights, dropout in training, another module's cache", function()
    local m = nn.MultiHeadAttention(8, 4, { kv_heads = 2, dropout = 0.1 })
    raises_here(function() m:forward_cached(x, {}) end, "MultiHeadAttention.forward_cached: call :eval() first")
    m:eval()
    raises_here(function() m:forward_cached(x, {}, { need_weights = true }) end,
      "MultiHeadAttention.forward_cached: unknown option 'need_weights'")
    -- a prompt outside autocast, a step under it: the dtypes differ, and the message says why
    local c = {}
    m:forward_cached(x, c)
    raises_here(function() ember.autocast("bfloat16", function() m:forward_cached(x:narrow(2, 1, 1), c) end) end,
      "float32 on cpu, but this step's are [B=2, heads=2, L, dh=2] bfloat16 on cpu (a step under ember.autocast and "
      .. "another outside it? decode every step under the same autocast state)")
    local other = nn.MultiHeadAttention(8, 4, { kv_heads = 2 })
    local cache = {}
    m:forward_cached(x, cache)
    raises_here(function() other:forward_cached(x:narrow(2, 1, 1), cache) end, "MultiHeadAttention.forward_cached")
  end)
end)
