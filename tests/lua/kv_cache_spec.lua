-- The key/value cache of MultiHeadAttention.forward_cached (issue 27 item 4,
-- lua/ember/nn/_kv_cache.lua): buffers allocated once and written in place,
-- grown by doubling, the filled part a view; cached == uncached across
-- growths; the padding mask kept; a cache of another model refused.
local ember = require "ember"
local nn = require "ember.nn"
local kv_cache = require "ember.nn._kv_cache"

local function maxdiff(a, b) return (a - b):abs():max():item() end

local function mha(opts)
  local o = { d_model = 16, heads = 4, dtype = "float64" }
  for k, v in pairs(opts or {}) do o[k] = v end
  return nn.MultiHeadAttention(o):eval()
end

describe("the KV cache", function()
  it("writes in place: the buffers stay the same objects until full, then double", function()
    ember.manual_seed(1)
    local m = mha()
    local x = ember.randn({ 2, 200, 16 }, { dtype = "float64" })
    local cache = {}
    ember.no_grad(function()
      m:forward_cached(x:narrow(2, 1, 10), cache)
      assert.are.equal(kv_cache.MIN_CAPACITY, cache.capacity)
      local kb, vb = cache._k, cache._v
      assert.are.same({ 2, 4, kv_cache.MIN_CAPACITY, 4 }, kb.shape)
      local grows = {}
      for t = 11, 200 do
        local before = cache._k
        m:forward_cached(x:narrow(2, t, 1), cache)
        if not rawequal(before, cache._k) then grows[#grows + 1] = { t, cache.capacity } end
        -- the filled part is a view of the buffer: cache.k is [B, H, t, dh]
        assert.are.equal(t, cache.len)
        assert.are.same({ 2, 4, t, 4 }, cache.k.shape)
      end
      -- 64 -> 128 -> 256, nothing else: one allocation per doubling
      assert.are.same({ { 65, 128 }, { 129, 256 } }, grows)
      assert.is_false(rawequal(kb, cache._k))
      assert.is_false(rawequal(vb, cache._v))
      -- and what was cached before a growth was carried over
      local full = m(x, { causal = true })
      local last = m:forward_cached(x:narrow(2, 1, 1), {}) -- a fresh cache: position 1
      assert.is_true(maxdiff(last, full:narrow(2, 1, 1)) < 1e-12)
    end)
  end)

  it("cache.reserve allocates once: generate's whole run never grows the buffers", function()
    ember.manual_seed(5)
    local TinyLM = require "tests.lua.helpers.tiny_lm"
    local generate = require "ember.generate"
    local m = TinyLM { cross = false, rope = true, positions = "none" }
    local p = (ember.rand(2, 3, { dtype = "float64" }) * 11):long() + 1
    local a, la = generate.generate(m, p, { max_new_tokens = 100, return_logits = true })
    for i = 1, 2 do
      assert.are.equal(103, m.last_cache[i].self.capacity) -- prompt + max_new_tokens, not 64 -> 128
      assert.are.equal(102, m.last_cache[i].self.len)      -- the last token is never fed back
    end
    local b, lb = generate.generate(m, p, { max_new_tokens = 100, return_logits = true, use_cache = false })
    assert.is_true(a == b)
    for i = 1, #la do assert(maxdiff(la[i], lb[i]) < 1e-10, "step " .. i) end
  end)

  it("cached == uncached across growths, with chunks of any size", function()
    ember.manual_seed(2)
    for _, spec in ipairs { {}, { rope = true }, { kv_heads = 2 }, { kv_heads = 1, rope = true } } do
      local m = mha(spec)
      local x = ember.randn({ 2, 150, 16 }, { dtype = "float64" })
      ember.no_grad(function()
        local full = m(x, { causal = true })
        local cache, steps, t = {}, {}, 1
        for _, n in ipairs { 3, 1, 70, 1, 1, 60, 14 } do
          steps[#steps + 1] = m:forward_cached(x:narrow(2, t, n), cache)
          t = t + n
        end
        assert.are.equal(151, t)
        local d = maxdiff(ember.cat(steps, 2), full)
        assert(d < 1e-12, ("cached differs by %.3g"):format(d))
      end)
    end
  end)


  it("the fused kernel reads the cache's buffers in place (no copy of the filled part), float32 and float64, MHA and GQA", function()
    ember.manual_seed(3)
    for _, spec in ipairs { { dtype = "float32" }, { kv_heads = 2 }, { kv_heads = 1, dtype = "float32" } } do
      local m = mha(spec)
      local x = ember.randn({ 2, 40, 16 }, { dtype = spec.dtype or "float64" })
      ember.no_grad(function()
        local full = m(x, { causal = true })
        local cache = { reserve = 100 }
        local out = { m:forward_cached(x:narrow(2, 1, 8), cache) }
        -- the unfilled rows hold NaN: a kernel reading past len would show it
        cache._k:narrow(3, 9, 92):fill_(0 / 0)
        cache._v:narrow(3, 9, 92):fill_(0 / 0)
        local before = ember.attention_routes().kv_in_place
        for t = 9, 40 do
          -- the step writes row t, so NaN remains only past it
          out[#out + 1] = m:forward_cached(x:narrow(2, t, 1), cache)
        end
        local read = ember.attention_routes().kv_in_place - before
        assert.are.equal(32, read, "every decoding step reads the buffers in place")
        local d = maxdiff(ember.cat(out, 2), full)
        assert(d < (spec.dtype == "float32" and 1e-5 or 1e-12), ("cached differs by %.3g"):format(d))
      end)
    end
  end)

  it("keys and values that need a backward are read in place too, and their gradients reach the buffer", function()
    ember.manual_seed(4)
    local att = ember.Attention({ heads = 2, head_dim = 4, dtype = "float64" })
    local q = ember.randn({ 1, 2, 3, 4 }, { dtype = "float64" })
    local kb = ember.randn({ 1, 2, 20, 4 }, { dtype = "float64" }):requires_grad_()
    local vb = ember.randn({ 1, 2, 20, 4 }, { dtype = "float64" }):requires_grad_()
    local k, v = kb:narrow(3, 1, 10), vb:narrow(3, 1, 10) -- a cache's filled part
    local kb2, vb2 = kb:detach():clone():requires_grad_(), vb:detach():clone():requires_grad_()
    local ref = att(q, kb2:narrow(3, 1, 10):contiguous(), vb2:narrow(3, 1, 10):contiguous(), { causal = true })
    local before = ember.attention_routes().kv_in_place
    local no_grad_out = ember.no_grad(function() return att(q, k, v, { causal = true }) end)
    assert.are.equal(before + 1, ember.attention_routes().kv_in_place)
    assert.is_true(maxdiff(no_grad_out, ref) < 1e-12)
    local y = att(q, k, v, { causal = true })
    -- the CPU kernel reads strided heads in its backward too (attention_strided_heads)
    assert.are.equal(before + 2, ember.attention_routes().kv_in_place)
    y:sum():backward()
    ref:sum():backward()
    assert.is_true(maxdiff(y, ref) < 1e-12)
    assert.is_true(maxdiff(kb.grad, kb2.grad) < 1e-12 and maxdiff(vb.grad, vb2.grad) < 1e-12)
    assert.are.equal(0, kb.grad:narrow(3, 11, 10):abs():max():item())
    assert.is_true(kb.grad:abs():max():item() > 0)
  end)

  it("keeps a key_padding_mask given once; later steps may give the new positions' mask only", function()
    ember.manual_seed(3)
    local m = mha()
    local x = ember.randn({ 2, 8, 16 }, { dtype = "float64" })
    local pad = ember.tensor({ { true, true, false, false, false, false, false, false },
                               { false, false, false, false, false, false, false, true } })
    ember.no_grad(function()
      local full = m(x, { causal = true, key_padding_mask = pad })
      local cache = {}
      local a = m:forward_cached(x:narrow(2, 1, 4), cache, { key_padding_mask = pad:narrow(2, 1, 4) })
      local b = m:forward_cached(x:narrow(2, 5, 1), cache)                                   -- kept
      local c = m:forward_cached(x:narrow(2, 6, 2), cache, { key_padding_mask = pad:narrow(2, 6, 2) }) -- new only
      local d = m:forward_cached(x:narrow(2, 8, 1), cache, { key_padding_mask = pad })      -- all keys
      local got = ember.cat({ a, b, c, d }, 2)
      -- row 2's last position is padding: compare the real positions only
      assert.is_true(maxdiff(got:narrow(2, 1, 7), full:narrow(2, 1, 7)) < 1e-12)
      assert.is_true(maxdiff(got[1], full[1]) < 1e-12)
      assert.are.same({ 2, 8 }, cache.pad.shape)
      assert.is_true(cache.pad == pad)
      local msg = select(2, pcall(m.forward_cached, m, x:narrow(2, 1, 1), cache,
        { key_padding_mask = ember.zeros({ 2, 3 }, "bool") }))
      assert.truthy(tostring(msg):find("MultiHeadAttention.forward_cached: key_padding_mask must be a bool tensor [B=2, 9]", 1, true), msg)
    end)
  end)

  it("refuses a cache of another model, naming the module at the caller's line", function()
    local a, b = mha(), mha { kv_heads = 2 }
    local x = ember.randn({ 1, 3, 16 }, { dtype = "float64" })
    local cache = {}
    ember.no_grad(function() a:forward_cached(x, cache) end)
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, msg = pcall(function() ember.no_grad(function() b:forward_cached(x, cache) end) end)
    assert.is_false(ok)
    assert.truthy(msg:find("MultiHeadAttention.forward_cached: the cache holds keys [B=1, heads=4, L, dh=4]", 1, true), msg)
    assert.truthy(msg:find("kv_cache_spec.lua:" .. line, 1, true), msg)
  end)

  it("with grad mode on the cache grows by concatenation, so gradients reach past keys", function()
    ember.manual_seed(4)
    local m = mha()
    local x = ember.randn({ 1, 4, 16 }, { dtype = "float64" })
    local cache = {}
    local a = m:forward_cached(x:narrow(2, 1, 3), cache)
    local b = m:forward_cached(x:narrow(2, 4, 1), cache)
    local full = m(x, { causal = true })
    assert.is_true(maxdiff(ember.cat({ a, b }, 2), full) < 1e-12)
    b:sum():backward()
    local g1 = m.k_proj.weight.grad:clone()
    m:zero_grad()
    full:narrow(2, 4, 1):sum():backward()
    assert.is_true(maxdiff(g1, m.k_proj.weight.grad) < 1e-12)
    -- a later no_grad step moves the cache into buffers
    ember.no_grad(function() m:forward_cached(x:narrow(2, 1, 1), cache) end)
    assert.are.equal(5, cache.len)
    assert.are.equal(kv_cache.MIN_CAPACITY, cache.capacity)
  end)
end)
