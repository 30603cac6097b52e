-- Decoding as a user coming from PyTorch / Hugging Face tries it:
-- ember.generate's edge cases (top_p = 1 and top_p = 0, one prompt [L], a
-- model with forward alone, a generator of its own, stop sequences given as
-- tensors, the training flags of a model's parts), generate's ids checked
-- before they reach the model (pad_id, stop sequences, eos_id, max_time), and
-- grouped-query attention through the KV cache: every variant, a
-- cross-attention cache, models.Llama with GQA and MQA, forward_cached with
-- kdim / vdim.
local ember = require "ember"
local nn = require "ember.nn"
local generate = require "ember.generate"
local models = require "ember.models"

local function llama(kv)
  return models.Llama { vocab_size = 30, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 2,
    num_attention_heads = 4, num_key_value_heads = kv or 2 }
end

local function ids(t) return ember.tensor(t, { dtype = "int64" }) end

describe("generate as a Hugging Face user calls it", function()
  it("top_p = 1 filters nothing: the draws of sampling without top_p (Hugging Face leaves the warper out)", function()
    ember.manual_seed(1)
    local m, p = llama(), ids { { 5, 9, 2 }, { 4, 4, 8 } }
    local function run(o)
      o.strategy, o.max_new_tokens = "sample", 8
      ember.manual_seed(3)
      return generate(m, p, o)
    end
    assert.is_true(run { top_p = 1 }:equal(run {}))
    assert.is_true(run { top_p = 1.0, top_k = 30 }:equal(run {}))
    -- (and top_p below 1 still filters)
    assert.is_false(run { top_p = 0.3 }:equal(run {}))
    -- the vocabulary read in blocks (over 1024 ids) too
    local logits = ember.randn(6, 3000, { dtype = "float64" }) * 3
    ember.manual_seed(9)
    local a = generate.pick(logits, { strategy = "sample", top_p = 1 })
    ember.manual_seed(9)
    assert.is_true(a:equal(generate.pick(logits, { strategy = "sample" })))
  end)

  it("one prompt [L] (or a Lua list of ids) gives ids [L + n] and logits [V], as the batch of one", function()
    ember.manual_seed(2)
    local m = llama()
    local batch, blog = generate(m, ids { { 5, 9, 2 } }, { max_new_tokens = 5, return_logits = true })
    local one, log = generate(m, ids { 5, 9, 2 }, { max_new_tokens = 5, return_logits = true })
    assert.are.same({ 8 }, one.shape)
    assert.is_true(one:equal(batch[1]))
    assert.are.equal(5, #log)
    assert.are.same({ 30 }, log[1].shape)
    assert.is_true(log[5]:equal(blog[5][1]))
    assert.is_true(generate(m, { 5, 9, 2 }, { max_new_tokens = 5 }):equal(one))
    assert.is_true(generate(m, { { 5, 9, 2 } }, { max_new_tokens = 5 }):equal(batch))
    -- the model's own generate too, and a prompt of one token
    assert.is_true(m:generate(ids { 5, 9, 2 }, { max_new_tokens = 5 }):equal(one))
    assert.are.same({ 4 }, m:generate(ids { 7 }, { max_new_tokens = 3 }).shape)
    -- max_new_tokens = 0: the prompt as it came
    assert.is_true(generate(m, ids { 5, 9 }, { max_new_tokens = 0 }):equal(ids { 5, 9 }))
    -- num_return_sequences keeps its rows
    assert.are.same({ 3, 6 }, generate(m, ids { 5, 9, 2 }, { max_new_tokens = 3, strategy = "sample",
      num_return_sequences = 3 }).shape)
    -- what is not ids is still refused, saying what is taken
    local ok, err = pcall(generate, m, ember.tensor { 1, 2 })
    assert.is_false(ok)
    assert.matches("prompt must be int64 %[B, L%], got float32 %[2%]", tostring(err))
    -- Hugging Face's model.generate(**tokenizer(...)) habit
    ok, err = pcall(generate, m, { input_ids = ids { { 1, 2 } }, attention_mask = ids { { 1, 1 } } })
    assert.is_false(ok)
    assert.matches("got table %(a tokenizer's output%? give its input_ids", tostring(err))
  end)

  it("a model with forward(ids) alone (an nn.Sequential) is decoded without a cache", function()
    ember.manual_seed(4)
    local seq = nn.Sequential(nn.Embedding(20, 8), nn.Linear(8, 20))
    local calls = {}
    local dec = { decode = function(_, x, o)
      calls[#calls + 1] = x.shape[2]
      return seq(x)
    end }
    local p = ids { { 1, 2, 3 }, { 4, 5, 6 } }
    local want = generate(dec, p, { max_new_tokens = 4 })
    assert.are.same({ 3, 4, 5, 6 }, calls) -- (a decode that ignores the cache gets the whole sequence)
    assert.is_true(generate(seq, p, { max_new_tokens = 4 }):equal(want))
    ember.manual_seed(5)
    local a = generate(seq, p, { max_new_tokens = 4, strategy = "sample", top_k = 5 })
    ember.manual_seed(5)
    assert.is_true(generate(dec, p, { max_new_tokens = 4, strategy = "sample", top_k = 5 }):equal(a))
    -- what it cannot take is refused, not dropped
    local ok, err = pcall(generate, seq, p, { prompt_padding_mask = p:eq(1) })
    assert.is_false(ok)
    assert.matches("generate_decode_cache_spec.lua:%d+: generate: prompt_padding_mask needs a model with a decode", tostring(err))
    ok, err = pcall(generate, seq, p, { pad_id = 1 }) -- as Hugging Face, pad_id at the start is left padding
    assert.is_false(ok)
    assert.matches("pad_id 1 marks the left padding", tostring(err))
    ok, err = pcall(generate, {}, p)
    assert.is_false(ok)
    assert.matches("generate: the model needs a decode%(ids, opts%) method", tostring(err))
  end)

  it("generator = ember.Generator samples reproducibly and leaves the global generator alone", function()
    local m, p = llama(), ids { { 5, 9, 2 }, { 3, 3, 1 } }
    local function run(seed)
      return generate(m, p, { max_new_tokens = 6, strategy = "sample", generator = ember.Generator():manual_seed(seed) })
    end
    ember.manual_seed(11)
    local state = ember.get_rng_state()
    local a = run(7)
    assert.are.same(state, ember.get_rng_state())
    ember.manual_seed(99)
    assert.is_true(run(7):equal(a))
    assert.is_false(run(8):equal(a))
    local ok, err = pcall(generate, m, p, { strategy = "sample", generator = 7 })
    assert.is_false(ok)
    assert.matches("generate: generator must be an ember.Generator", tostring(err))
    -- generate.pick takes it too
    local logits = ember.randn(4, 50)
    local function pick(seed)
      return generate.pick(logits, { strategy = "sample", generator = ember.Generator():manual_seed(seed) })
    end
    assert.is_true(pick(3):equal(pick(3)))
  end)

  it("stop sequences may be int64 tensors (a tokenizer's ids)", function()
    ember.manual_seed(6)
    local m, p = llama(), ids { { 5, 9, 2 } }
    local free = generate(m, p, { max_new_tokens = 6 })
    local s = free[1]:narrow(1, 5, 2)
    local a = generate(m, p, { max_new_tokens = 6, stop = { s } })
    assert.is_true(a:equal(generate(m, p, { max_new_tokens = 6, stop = { s:totable() } })))
    assert.are.same({ 1, 6 }, a.shape)
  end)

  it("puts back each module's training flag: a part kept in eval mode stays in it", function()
    local m = llama()
    m:train()
    m.model.layers[1]:eval()
    generate(m, ids { { 1, 2 } }, { max_new_tokens = 2 })
    assert.is_true(m.training)
    assert.is_false(m.model.layers[1].training)
    assert.is_false(m.model.layers[1].self_attn.training)
    assert.is_true(m.model.layers[2].training)
    -- also when generation fails
    local ok = pcall(generate, m, ids { { 1, 2 } }, { max_new_tokens = 2, eos_id = 1, stop = { { 1 } },
      variant_inputs = function() error("boom") end })
    assert.is_false(ok)
    assert.is_false(m.model.layers[1].training)
    assert.is_true(m.model.layers[2].training)
    -- a model in eval mode stays there
    m:eval()
    generate(m, ids { { 1, 2 } }, { max_new_tokens = 1 })
    assert.is_false(m.training)
  end)
end)

describe("grouped-query attention through the KV cache", function()
  -- a variant's per-call tensors for the first n positions (a cached call's
  -- keys are every position so far)
  local function inputs(name, n)
    if name == "document" then
      return { doc = ids { { 1, 1, 1, 2, 2, 2, 2 }, { 1, 2, 2, 2, 3, 3, 3 } }:narrow(2, 1, n) }
    elseif name == "prefix_lm" then
      return { prefix = ids { 2, 3 } }
    end
  end

  it("every variant, kv_heads 2 and 1: chunks through forward_cached equal forward, left padding kept", function()
    local tried = 0
    for _, v in ipairs(ember.attention_variants()) do
      for _, kv in ipairs { 2, 1 } do
        ember.manual_seed(0)
        local m = nn.MultiHeadAttention(16, 4, { attention = v.name, kv_heads = kv, causal = true, dtype = "float64" })
        m:eval()
        local x = ember.randn({ 2, 7, 16 }, { dtype = "float64" })
        local pad = ember.tensor { { false, false, false, false, false, false, false },
                                   { true, true, false, false, false, false, false } }
        local full = m(x, { key_padding_mask = pad, variant_inputs = inputs(v.name, 7) })
        local cache, outs, at = {}, {}, 1
        for i, n in ipairs { 3, 1, 2, 1 } do
          outs[i] = ember.no_grad(function()
            return m:forward_cached(x:narrow(2, at, n), cache, { key_padding_mask = i == 1 and pad:narrow(2, 1, 3) or nil,
              variant_inputs = inputs(v.name, at + n - 1) })
          end)
          at = at + n
        end
        assert.are.same({ 2, kv, 7, 4 }, cache.k.shape)
        -- (the padded queries of row 2 attend to nothing real: compared past them)
        local d = (ember.cat(outs, 2) - full):abs():detach()
        local worst = math.max(d[1]:max():item(), d[2]:narrow(1, 3, 5):max():item())
        assert(worst < 1e-12, ("%s kv_heads=%d: cached differs by %.3g"):format(v.name, kv, worst))
        tried = tried + 1
      end
    end
    assert.is_true(tried >= 8)
  end)

  it("a cross-attention cache refuses another memory, and self- and cross-attention calls refuse each other's cache",
    function()
    local f64 = { dtype = "float64" }
    local m = nn.MultiHeadAttention(8, 2, { kv_heads = 1, dtype = "float64" })
    local x, mem = ember.randn({ 2, 1, 8 }, f64), ember.randn({ 2, 5, 8 }, f64)
    local function fails(cache, opts, pattern)
      local line = debug.getinfo(1, "l").currentline + 1
      local ok, err = pcall(function() return m:forward_cached(x, cache, opts) end)
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
      assert.truthy(tostring(err):find("generate_decode_cache_spec.lua:" .. line, 1, true), tostring(err))
    end
    ember.no_grad(function()
      local cross = {}
      local y = m:forward_cached(x, cross, { memory = mem })
      -- the same memory (or one of its shape, which cannot be told apart) reads the kept keys
      assert.is_true(m:forward_cached(x, cross, { memory = mem }):equal(y))
      -- a memory of another length was ignored (the first one's keys read)
      fails(cross, { memory = ember.randn({ 2, 7, 8 }, f64) },
        "the cache holds the keys of a memory %[B=2, Lm=5, kdim%], but this call's memory is %[2, 7, 8%]")
      -- a self-attention call appended its keys to the memory's
      fails(cross, nil, "this cache holds a memory's keys %(cross%-attention%), but this call is self%-attention")
      local self_cache = {}
      m:forward_cached(x, self_cache)
      -- a cross-attention call took the cached self keys as the memory's
      fails(self_cache, { memory = mem }, "this cache holds self%-attention keys, but this call is cross%-attention")
      assert.are.equal(1, self_cache.len)
    end)
  end)

  it("models.Llama with GQA and MQA: cached and uncached greedy decoding of a left-padded batch agree, in bfloat16 too",
    function()
    for _, kv in ipairs { 2, 1 } do
      ember.manual_seed(12)
      local m = llama(kv)
      local p = ids { { 5, 9, 2, 7 }, { 1, 1, 3, 4 } }
      local o = { max_new_tokens = 6, prompt_padding_mask = p:eq(1), return_logits = true }
      local a, la = generate(m, p, o)
      o.use_cache = false
      local b, lb = generate(m, p, o)
      assert.is_true(a:equal(b))
      for i = 1, #la do assert.is_true((la[i] - lb[i]):abs():max():item() < 1e-5) end
      -- the padded row is the row alone
      assert.is_true(generate(m, ids { { 3, 4 } }, { max_new_tokens = 6 })[1]:equal(a[2]:narrow(1, 3, 8)))
      local c = ember.autocast("bfloat16", function()
        return ember.no_grad(function() return generate(m, p, { max_new_tokens = 6, prompt_padding_mask = p:eq(1) }) end)
      end)
      local d = ember.autocast("bfloat16", function()
        return ember.no_grad(function()
          return generate(m, p, { max_new_tokens = 6, prompt_padding_mask = p:eq(1), use_cache = false })
        end)
      end)
      assert.is_true(c:equal(d))
    end
  end)
end)

local function tiny_llama(seed)
  ember.manual_seed(seed)
  return require("ember.models").Llama { vocab_size = 40, hidden_size = 32, intermediate_size = 64,
    num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }
end

describe("generate with top_p = 0", function()
  -- Hugging Face's TopPLogitsWarper takes top_p = 0 and keeps its
  -- min_tokens_to_keep = 1: the most likely token. ember refused it
  -- ("top_p must be a number in (0, 1], got 0").
  it("keeps only the most likely token, as Hugging Face's: the greedy tokens", function()
    local m = tiny_llama(1)
    local P = ember.tensor({ { 3, 4, 5, 6 }, { 1, 1, 8, 9 } }, { dtype = "int64" })
    local mask = P:eq(1)
    local greedy = m:generate(P, { max_new_tokens = 6, prompt_padding_mask = mask })
    for seed = 1, 3 do
      ember.manual_seed(seed)
      local s = m:generate(P, { max_new_tokens = 6, prompt_padding_mask = mask, strategy = "sample", top_p = 0,
        temperature = 2 })
      assert.is_true(s:equal(greedy), tostring(s))
    end
  end)

  it("in pick, on a small vocabulary and on one read in blocks (past 1024 ids), with top_k", function()
    for _, V in ipairs { 7, 3000 } do
      local logits = ember.randn(5, V)
      local best = logits:argmax(-1, true)
      for _, o in ipairs { { top_p = 0 }, { top_p = 0, top_k = 3 }, { top_p = 0, temperature = 50 } } do
        o.strategy = "sample"
        assert.is_true(generate.pick(logits, o):equal(best), V)
      end
    end
  end)

  it("still refuses a top_p outside [0, 1], at the user's line", function()
    local m = tiny_llama(2)
    local p = ember.tensor({ { 3, 4 } }, { dtype = "int64" })
    for _, v in ipairs { -0.1, 1.5, 0 / 0 } do
      local line = debug.getinfo(1, "l").currentline + 1
      local ok, err = pcall(function() m:generate(p, { strategy = "sample", top_p = v }) end)
      assert.is_false(ok)
      assert.truthy(err:find("generate_decode_cache_spec.lua:" .. line .. ": generate: top_p must be a number in [0, 1]",
        1, true), err)
    end
  end)
end)

describe("generate's ids checked before they reach the model", function()
  local P = ember.tensor({ { 3, 4, 5 }, { 8, 9, 10 } }, { dtype = "int64" })

  local function refused(m, opts, pattern)
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() return m:generate(P, opts) end)
    assert.is_false(ok)
    assert.truthy(err:find("generate_decode_cache_spec.lua:" .. line .. ": generate: ", 1, true), err)
    assert.truthy(err:find(pattern, 1, true), err)
  end

  -- A pad_id past the vocabulary was emitted by a done row and handed to
  -- the model at the next step: "Embedding.forward: id 41 at {1, 1} is out
  -- of range 1..40", not naming generate or pad_id.
  it("a pad_id past the vocabulary, given or the first eos_id, once a row can end", function()
    local m = tiny_llama(4)
    local e = m:generate(P, { max_new_tokens = 1 })[1][4]:item() -- row 1's first token: it ends at step 1
    refused(m, { max_new_tokens = 4, eos_id = e, pad_id = 41 }, "pad_id 41 is past the model's 40 logits")
    refused(m, { max_new_tokens = 4, eos_id = { 41, e } }, "pad_id 41 (the first eos_id) is past the model's 40 logits")
    refused(m, { max_new_tokens = 4, eos_id = 41, stop = { { e } } }, "pad_id 41 (the first eos_id)")
    -- no row can end: nothing is padded, as before
    assert.are.same({ 2, 7 }, m:generate(P, { max_new_tokens = 4, eos_id = 41 }).shape)
    assert.are.same({ 2, 7 }, m:generate(P, { max_new_tokens = 4, eos_id = e, pad_id = 40 }).shape)
  end)

  -- stop = {{0}} (a 0-based id) was taken, and never matched; eos_id = 0 was refused.
  it("a stop sequence's ids are 1-based, as eos_id's", function()
    local m = tiny_llama(5)
    refused(m, { max_new_tokens = 2, stop = { { 0 } } }, "stop sequence 1 holds the id 0: token ids are 1-based")
    refused(m, { max_new_tokens = 2, stop = { { 3 }, { 4, -1 } } }, "stop sequence 2 holds the id -1")
  end)

  -- eos_id = {} said "got table: 0x55...", max_time = "1" said "got 1".
  it("shows the value given: a string quoted, a table as a list", function()
    local m = tiny_llama(6)
    refused(m, { eos_id = {} }, "or a list of them, got an empty table")
    refused(m, { eos_id = { 2.5 } }, "or a list of them, got {2.5}")
    refused(m, { eos_id = "2" }, 'or a list of them, got "2"')
    refused(m, { max_time = "1" }, 'max_time must be a number of seconds >= 0, got "1"')
  end)
end)

describe("nn.MultiHeadAttention.forward_cached with kdim/vdim", function()
  -- the message of a failed call, or nil
  local err_of = require("tests.lua.helpers.parity").error_of

  it("refuses what it cannot compute naming forward_cached, not an inner Linear", function()
    -- was: 'Linear.forward: input's last dim is 10, expected in_features=6'
    local m = nn.MultiHeadAttention{ d_model = 16, heads = 4, kv_heads = 2, kdim = 10, vdim = 6 }:eval()
    assert.matches("generate_decode_cache_spec.lua:%d+: MultiHeadAttention.forward_cached: cross%-attention over a memory needs "
      .. "kdim = vdim", err_of(function() m:forward_cached(ember.randn(2, 1, 16), {}, { memory = ember.randn(2, 5, 10) }) end))
    local s = nn.MultiHeadAttention{ d_model = 16, heads = 4, kdim = 10, vdim = 10 }:eval()
    assert.matches("forward_cached: self%-attention projects the new tokens x into keys and values, so kdim and vdim "
      .. "must equal d_model=16", err_of(function() s:forward_cached(ember.randn(1, 2, 16), {}) end))
    -- a memory of kdim = vdim still decodes as forward computes
    local q, mem = ember.randn(1, 2, 16), ember.randn(1, 3, 10)
    assert.is_true(ember.allclose(s:forward_cached(q, {}, { memory = mem }), s(q, mem), 1e-5, 1e-6))
  end)
end)
