-- ember.generate: greedy / temperature / top-k decoding, and the KV cache:
-- cached and uncached decoding give the same logits (encoder-decoder with
-- cross-attention, decoder-only, every attention variant, RoPE), each cached
-- step sees one new token, and cross-attention keys/values are computed once.
local ember = require "ember"
local nn = require "ember.nn"
local generate = require "ember.generate"

-- A small decoder with the decode(ids, {cache=, start=, memory=}) method
-- generate() calls (shared with the other generate and cache specs).
local Decoder = require "tests.lua.helpers.tiny_lm"

local function prompt(B, L, V)
  return (ember.rand(B, L, { dtype = "float64" }) * (V or 11)):long() + 1
end

-- Greedy decoding with and without the cache: same ids, same logits.
local function same_with_and_without_cache(m, p, opts, tol)
  opts = opts or {}
  local o1, o2 = { use_cache = true, return_logits = true }, { use_cache = false, return_logits = true }
  for k, v in pairs(opts) do o1[k], o2[k] = v, v end
  local a, la = generate.generate(m, p, o1)
  local b, lb = generate.generate(m, p, o2)
  assert.is_true(a == b, "ids differ")
  assert.are.equal(#la, #lb)
  for i = 1, #la do
    local e = (la[i] - lb[i]):abs():max():item() / la[i]:abs():max():item()
    assert(e <= (tol or 1e-12), ("step %d: logits differ by %.3g"):format(i, e))
  end
  return a, la
end

describe("KV-cached decoding", function()
  it("encoder-decoder: cached and uncached logits agree; cross K/V computed once", function()
    ember.manual_seed(7)
    local m = Decoder { cross = true }
    local memory = ember.randn(2, 5, 8, { dtype = "float64" })
    local mask = ember.tensor({ { false, false, false, false, false }, { false, false, false, true, true } })
    local p = prompt(2, 3)
    m.inputs = {}
    local ids = same_with_and_without_cache(m, p, { max_new_tokens = 8, memory = memory,
      memory_key_padding_mask = mask })
    assert.are.same({ 2, 11 }, ids.shape)
    assert.is_true(ids:narrow(2, 1, 3) == p)
    -- cached run: the prompt once, then one token per step
    assert.are.same({ 3, 1, 1, 1, 1, 1, 1, 1 }, { table.unpack(m.inputs, 1, 8) })
    -- uncached run: the whole prefix every step
    assert.are.same({ 3, 4, 5, 6, 7, 8, 9, 10 }, { table.unpack(m.inputs, 9, 16) })
  end)

  it("keeps the memory's keys/values from the first step and grows the self cache by one", function()
    local m = Decoder { cross = true }
    local memory = ember.randn(1, 4, 8, { dtype = "float64" })
    local cache = {}
    local p = prompt(1, 2)
    ember.no_grad(function()
      m:eval()
      m:decode(p, { cache = cache, start = 1, memory = memory })
      local k1 = cache[1].cross.k
      assert.are.same({ 1, 2, 2, 4 }, cache[1].self.k.shape)
      m:decode(prompt(1, 1), { cache = cache, start = 3, memory = memory })
      assert.is_true(rawequal(k1, cache[1].cross.k))
      assert.are.same({ 1, 2, 3, 4 }, cache[1].self.k.shape)
      assert.are.same({ 1, 2, 4, 4 }, cache[2].cross.v.shape)
    end)
  end)

  it("decoder-only, pre-norm, learned positions", function()
    ember.manual_seed(8)
    local m = Decoder { cross = false, norm_first = true, learned_pos = true, layers = 3 }
    same_with_and_without_cache(m, prompt(3, 4), { max_new_tokens = 10 })
  end)

  it("with RoPE", function()
    ember.manual_seed(9)
    local m = Decoder { cross = true, rope = true }
    same_with_and_without_cache(m, prompt(2, 3), { max_new_tokens = 6, memory = ember.randn(2, 4, 8, { dtype = "float64" }) })
  end)

  it("for every attention variant", function()
    local have = Decoder.plain_variants() -- those needing per-call tensors (document ids) aside
    assert.is_true(#have >= 1)
    for _, v in ipairs(have) do
      ember.manual_seed(10)
      -- the cross-attention takes the variant too where that is prefix-consistent
      -- (no positions between target and memory)
      local cross = (v == "linear" or v == "standard") and v or nil
      local m = Decoder { cross = true, attention = v, cross_attention = cross }
      local memory = ember.randn(2, 4, 8, { dtype = "float64" })
      local ok, err = pcall(same_with_and_without_cache, m, prompt(2, 3),
        { max_new_tokens = 6, memory = memory }, 1e-10)
      assert(ok, v .. ": " .. tostring(err))
      -- new weights (as after training): the cached path must see them too
      ember.no_grad(function()
        for _, p in ipairs(m:parameters()) do p:add_(ember.randn(p.shape, { dtype = "float64" }) * 0.3) end
      end)
      ok, err = pcall(same_with_and_without_cache, m, prompt(2, 3), { max_new_tokens = 6, memory = memory }, 1e-10)
      assert(ok, v .. " after an update: " .. tostring(err))
    end
  end)

  it("applies tgt_key_padding_mask to the cached keys (left-padded prompts)", function()
    ember.manual_seed(7)
    local dec = nn.TransformerDecoder(8, 2, 2, { dim_feedforward = 16, dropout = 0, dtype = "float64",
      cross = false, norm_first = true })
    dec:eval()
    local B, L = 2, 6
    local x = ember.randn({ B, L, 8 }, { dtype = "float64" })
    -- row 1 has two pad positions on the left, row 2 none (true = padding)
    local pad = ember.tensor({ { 1, 1, 0, 0, 0, 0 }, { 0, 0, 0, 0, 0, 0 } }, { dtype = "int64" }):eq(1)
    local full = dec(x, nil, { tgt_key_padding_mask = pad })
    local cache, steps = {}, {}
    for t = 1, L do
      steps[t] = dec(x:narrow(2, t, 1), nil, { cache = cache, tgt_key_padding_mask = pad:narrow(2, 1, t) })
    end
    local e = (ember.cat(steps, 2) - full):abs():max():item()
    assert(e < 1e-12, ("cached and uncached differ by %.3g"):format(e))
    -- without the mask the padded keys would change row 1's later outputs
    local unmasked = dec(x, nil, {})
    assert.is_true((unmasked - full):narrow(1, 1, 1):abs():max():item() > 1e-3)
  end)

  it("in float32", function()
    ember.manual_seed(11)
    local m = Decoder { cross = true, dtype = "float32" }
    same_with_and_without_cache(m, prompt(2, 3), { max_new_tokens = 6, memory = ember.randn(2, 4, 8) }, 1e-5)
  end)
end)

describe("sampling", function()
  local m
  before_each(function()
    ember.manual_seed(12)
    m = Decoder { cross = false }
  end)

  it("is reproducible with a seed and differs across seeds", function()
    local p = prompt(4, 2)
    ember.manual_seed(1)
    local a = generate.generate(m, p, { strategy = "sample", max_new_tokens = 12, temperature = 2 })
    ember.manual_seed(1)
    local b = generate.generate(m, p, { strategy = "sample", max_new_tokens = 12, temperature = 2 })
    ember.manual_seed(2)
    local c = generate.generate(m, p, { strategy = "sample", max_new_tokens = 12, temperature = 2 })
    assert.is_true(a == b)
    assert.is_false(a == c)
  end)

  it("top_k = 1 and a tiny temperature are greedy", function()
    local p = prompt(3, 2)
    local g = generate.generate(m, p, { max_new_tokens = 8 })
    assert.is_true(g == generate.generate(m, p, { strategy = "sample", top_k = 1, max_new_tokens = 8 }))
    assert.is_true(g == generate.generate(m, p, { strategy = "sample", temperature = 1e-4, max_new_tokens = 8 }))
  end)

  it("top_k draws only among the k most likely tokens", function()
    local logits = ember.tensor({ { 0, 5, 1, 4, 2, 3 } }, { dtype = "float64" })
    local seen = {}
    ember.manual_seed(3)
    for _ = 1, 200 do
      local id = generate.pick(logits, { strategy = "sample", top_k = 2, temperature = 5 }):item()
      seen[id] = (seen[id] or 0) + 1
    end
    assert.are.same({ 2, 4 }, (function() local k = {} for id in pairs(seen) do k[#k + 1] = id end table.sort(k) return k end)())
    assert.is_true(seen[2] > seen[4])
  end)

  it("stops rows at eos and pads them with it", function()
    local p = prompt(2, 2)
    local g = generate.generate(m, p, { max_new_tokens = 6 })
    local eos = g[1][3]:item() -- the first generated token of row 1
    local e = generate.generate(m, p, { max_new_tokens = 6, eos_id = eos })
    for j = 3, e.shape[2] do
      if e[1][j]:item() ~= eos then error("row 1 continues after eos") end
    end
  end)

  it("checks its arguments", function()
    assert.has_error(function() generate.generate(m, ember.zeros(1, 2), {}) end,
      "generate: prompt must be int64 [B, L], got float32 [1, 2]")
    assert.has_error(function() generate.generate({}, prompt(1, 1)) end,
      "generate: the model needs a decode(ids, opts) method (or a forward(ids) -> logits [B, L, V]), got a table without them")
    assert.has_error(function() generate.generate(prompt(1, 1), prompt(1, 1)) end,
      "generate: the model needs a decode(ids, opts) method (or a forward(ids) -> logits [B, L, V]), got a tensor "
      .. "(generate(model, prompt, opts): the model comes first)")
    assert.has_error(function() generate.generate(m, prompt(1, 1), { strategy = "beam" }) end)
    assert.has_error(function() generate.pick(ember.zeros(1, 3), { strategy = "sample", top_k = -1 }) end,
      "generate: top_k must be an integer >= 0 (0: no top-k filtering), got -1")
  end)

  it("restores training mode", function()
    m:train()
    generate.generate(m, prompt(1, 2), { max_new_tokens = 2 })
    assert.is_true(m.training)
  end)
end)
