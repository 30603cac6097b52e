-- Grouped-query and multi-query attention at the module level (issue 27
-- item 1): nn.MultiHeadAttention{kv_heads = Hkv}. Held to a PyTorch-style
-- reference written here from ember ops with the module's own weights --
-- keys/values projected to Hkv heads, then repeat_interleave'd to H heads
-- (index_select with explicit indices), softmax(q k^T / sqrt(dh)) v --
-- outputs and gradients in float64; state dict shapes; every variant equals
-- a full-heads module whose k/v weights repeat each group's; errors.
local ember = require "ember"
local nn = require "ember.nn"

local function maxdiff(a, b) return (a - b):abs():max():item() end
local f64 = { dtype = "float64" }

-- torch.repeat_interleave(t, g, dim=2) on [B, Hkv, L, dh]
local function repeat_interleave(t, g)
  local idx = {}
  for h = 1, t.shape[2] * g do idx[h] = (h - 1) // g + 1 end
  return t:index_select(2, ember.tensor(idx, { dtype = "int64" }))
end

local function reference(m, query, key, value, causal)
  local H, Hkv, dh = m.heads, m.kv_heads, m.head_dim
  local B, Lq, Lk = query.shape[1], query.shape[2], key.shape[2]
  local function proj(lin, x) return x:matmul(lin.weight:transpose(1, 2)) + lin.bias end
  local q = proj(m.q_proj, query):reshape(B, Lq, H, dh):transpose(2, 3)
  local k = proj(m.k_proj, key):reshape(B, Lk, Hkv, dh):transpose(2, 3)
  local v = proj(m.v_proj, value):reshape(B, Lk, Hkv, dh):transpose(2, 3)
  k, v = repeat_interleave(k, H // Hkv), repeat_interleave(v, H // Hkv)
  local s = q:matmul(k:transpose(3, 4)) / math.sqrt(dh)
  if causal then
    local blocked = {}
    for i = 1, Lq do
      blocked[i] = {}
      for j = 1, Lk do blocked[i][j] = j - (Lk - Lq) > i end
    end
    s = s:masked_fill(ember.tensor(blocked), -math.huge)
  end
  local o = s:softmax(-1):matmul(v):transpose(2, 3):reshape(B, Lq, H * dh)
  return proj(m.out_proj, o)
end

-- gradients of every parameter and of the inputs after loss:backward()
local function grads(m, inputs)
  local out = {}
  for n, p in pairs(m:named_parameters()) do out[n] = p.grad:clone() end
  for i, t in ipairs(inputs) do out["input" .. i] = t.grad:clone() end
  return out
end

describe("nn.MultiHeadAttention{kv_heads}", function()
  for _, c in ipairs { { 8, 2, false }, { 8, 1, true }, { 4, 4, true }, { 6, 3, false } } do
    local H, Hkv, causal = c[1], c[2], c[3]
    it(("heads=%d kv_heads=%d%s equals the repeat_interleave reference, gradients too"):format(H, Hkv,
      causal and " causal" or ""), function()
      ember.manual_seed(40 + H + Hkv)
      local m = nn.MultiHeadAttention { d_model = 2 * H, heads = H, kv_heads = Hkv, kdim = 5, vdim = 7, dtype = "float64" }
      ember.no_grad(function()
        for _, p in ipairs(m:parameters()) do p:copy_(ember.randn(p.shape, f64) * 0.5) end
      end)
      local q = ember.randn({ 2, 4, 2 * H }, f64):requires_grad_()
      local k = ember.randn({ 2, 6, 5 }, f64):requires_grad_()
      local v = ember.randn({ 2, 6, 7 }, f64):requires_grad_()
      local w = ember.randn({ 2, 4, 2 * H }, f64)
      local y = m(q, k, v, { causal = causal })
      local r = reference(m, q, k, v, causal)
      assert.is_true(maxdiff(y, r) < 1e-12, ("outputs differ by %.3g"):format(maxdiff(y, r)))
      ;(y * w):sum():backward()
      local g1 = grads(m, { q, k, v })
      m:zero_grad()
      q.grad, k.grad, v.grad = nil, nil, nil
      ;(r * w):sum():backward()
      local g2 = grads(m, { q, k, v })
      for n, g in pairs(g1) do
        assert(maxdiff(g, g2[n]) < 1e-11, ("gradient of %s differs by %.3g"):format(n, maxdiff(g, g2[n])))
      end
    end)
  end

  it("state dict: k_proj and v_proj are [kv_heads * head_dim, kdim]; print names kv_heads", function()
    local m = nn.MultiHeadAttention { d_model = 32, heads = 8, kv_heads = 2, kdim = 12 }
    local sd = m:state_dict()
    assert.are.same({ 32, 32 }, sd["q_proj.weight"].shape)
    assert.are.same({ 8, 12 }, sd["k_proj.weight"].shape)
    assert.are.same({ 8 }, sd["k_proj.bias"].shape)
    assert.are.same({ 8, 32 }, sd["v_proj.weight"].shape)
    assert.are.same({ 32, 32 }, sd["out_proj.weight"].shape)
    assert.truthy(tostring(m):find("heads=8, kv_heads=2,", 1, true))
    -- a round trip, and a full-heads state dict does not fit
    local m2 = nn.MultiHeadAttention { d_model = 32, heads = 8, kv_heads = 2, kdim = 12 }
    m2:load_state_dict(sd)
    assert.are.equal(0, maxdiff(m2.k_proj.weight, m.k_proj.weight))
    assert.has_error(function() m2:load_state_dict(nn.MultiHeadAttention { d_model = 32, heads = 8, kdim = 12 }:state_dict()) end)
  end)

  it("every variant: equals the full-heads module whose k/v weights repeat each group's", function()
    local variants = require("tests.lua.helpers.tiny_lm").plain_variants()
    assert.is_true(#variants >= 1)
    for _, name in ipairs(variants) do
      ember.manual_seed(50)
      local g = nn.MultiHeadAttention { d_model = 16, heads = 4, kv_heads = 2, attention = name, dtype = "float64" }:eval()
      local full = nn.MultiHeadAttention { d_model = 16, heads = 4, attention = name, dtype = "float64" }:eval()
      ember.no_grad(function() -- random values everywhere (relpos tables start at zero)
        for _, p in ipairs(g:parameters()) do p:add_(ember.randn(p.shape, f64) * 0.3) end
      end)
      local sd = g:state_dict()
      local fsd = {}
      for n, t in pairs(sd) do fsd[n] = t end
      for _, n in ipairs { "k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias" } do
        local t = sd[n]
        local rows = t:reshape(2, 4, -1)          -- [Hkv, dh, in]
        fsd[n] = repeat_interleave(rows:unsqueeze(1), 2):reshape(16, -1):reshape(table.unpack(
          n:find("bias") and { 16 } or { 16, t.shape[2] }))
      end
      full:load_state_dict(fsd)
      local x = ember.randn({ 2, 5, 16 }, f64)
      local ok, err = pcall(function()
        local a, b = g(x, { causal = true }), full(x, { causal = true })
        assert(maxdiff(a, b) < 1e-12, ("differs by %.3g"):format(maxdiff(a, b)))
        -- and the cache holds kv_heads heads
        ember.no_grad(function()
          local cache = {}
          local s1 = g:forward_cached(x:narrow(2, 1, 3), cache)
          local s2 = g:forward_cached(x:narrow(2, 4, 2), cache)
          assert.are.same({ 2, 2, 5, 4 }, cache.k.shape)
          assert(maxdiff(ember.cat({ s1, s2 }, 2), a) < 1e-11, "cached differs")
        end)
      end)
      assert(ok, name .. ": " .. tostring(err))
    end
  end)

  it("heads % kv_heads ~= 0 is an error naming the module at the caller's line", function()
    for _, bad in ipairs { 3, 0, 16 } do
      local line = debug.getinfo(1, "l").currentline + 1
      local ok, msg = pcall(function() return nn.MultiHeadAttention { d_model = 32, heads = 8, kv_heads = bad } end)
      assert.is_false(ok)
      assert.truthy(msg:find("MultiHeadAttention: heads (8) must be divisible by kv_heads (" .. bad .. ")", 1, true), msg)
      assert.truthy(msg:find("gqa_spec.lua:" .. line, 1, true), msg)
    end
    local ok, msg = pcall(function() return nn.MultiHeadAttention(32, 8, { kv_heads = 2.5 }) end)
    assert.is_false(ok)
    assert.truthy(msg:find("kv_heads must be a positive integer", 1, true), msg)
  end)

  it("a decoder layer takes kv_heads", function()
    local layer = nn.TransformerDecoderLayer(16, 4, { kv_heads = 1, cross = false, dim_feedforward = 8 })
    assert.are.same({ 4, 16 }, layer.self_attn.k_proj.weight.shape)
  end)
end)

describe("grouped heads in the fused kernel", function()
  -- ember.Attention gets k and v at kv heads: the CPU kernel reads head
  -- h // (H / Hkv) in place and sums dK, dV over each group; every other
  -- route (a variant's own kernels, the composition) gets them repeated.
  for _, case in ipairs { { "standard", {} }, { "relpos", { mode = "t5" } }, { "local", { window_left = 9, window_right = 3 } },
    { "softcap", { cap = 2 } }, { "sinks", {} }, { "linear", {} } } do
    it(case[1] .. ": equals the repeated heads, gradients too, on the fused route where it has one", function()
      ember.manual_seed(8)
      local spec = { attention = case[1], heads = 8, head_dim = 8, dtype = "float64" }
      for k, v in pairs(case[2]) do spec[k] = v end
      local att = ember.Attention(spec)
      local q = ember.randn(2, 8, 70, 8, { dtype = "float64" }):requires_grad_()
      local k = ember.randn(2, 2, 70, 8, { dtype = "float64" }):requires_grad_()
      local v = ember.randn(2, 2, 70, 8, { dtype = "float64" }):requires_grad_()
      local r0 = ember.attention_routes().fused
      local o1 = att(q, k, v, { causal = true })
      local fused = ember.attention_routes().fused - r0
      local w = ember.randn(o1.shape, { dtype = "float64" })
      ;(o1 * w):sum():backward()
      local g1 = { q.grad:clone(), k.grad:clone(), v.grad:clone() }
      q.grad, k.grad, v.grad = nil, nil, nil
      local o2 = att(q, repeat_interleave(k, 4), repeat_interleave(v, 4), { causal = true })
      ;(o2 * w):sum():backward()
      assert(maxdiff(o1, o2) < 1e-12)
      assert(maxdiff(g1[1], q.grad) < 1e-12 and maxdiff(g1[2], k.grad) < 1e-12 and maxdiff(g1[3], v.grad) < 1e-12)
      assert.are.same({ 2, 2, 70, 8 }, g1[2].shape)
      assert.are.equal(case[1] == "linear" and 0 or 1, fused)
    end)
  end

  it("heads that are not a multiple of the kv heads are an error", function()
    local att = ember.Attention { attention = "standard", heads = 6, head_dim = 4 }
    local ok, err = pcall(att, ember.randn(1, 6, 5, 4), ember.randn(1, 4, 5, 4), ember.randn(1, 4, 5, 4))
    assert.is_false(ok)
    assert.matches("multiple of the key/value heads", tostring(err))
  end)
end)
