-- ember.generate probed as a Hugging Face `generate` user would use it
-- (issue 27 item 4). The expected tokens and probabilities below were
-- computed in PyTorch 1.13 by a reference of Hugging Face's logits
-- processors (RepetitionPenaltyLogitsProcessor, MinNewTokensLengthLogitsProcessor,
-- TemperatureLogitsWarper -> TopKLogitsWarper -> TopPLogitsWarper, eos and
-- stop criteria) run on the same fake model: the next-token logits of a
-- row are 3 sin(1.3 v + 0.7 last + 0.31 L) for token v, `last` its last id
-- and L its length.
local ember = require "ember"
local generate = require "ember.generate"

local V = 12
local Fake = {}
Fake.__index = Fake
function Fake:decode(ids)
  local rows = {}
  for b, row in ipairs(ids:totable()) do
    local r = {}
    for v = 1, V do r[v] = 3 * math.sin(1.3 * v + 0.7 * row[#row] + 0.31 * #row) end
    rows[b] = { r }
  end
  return ember.tensor(rows, { dtype = "float64" })
end
local fake = setmetatable({}, Fake)

local function ids(t) return ember.tensor({ t }, { dtype = "int64" }) end

-- how often each id is drawn from one row of logits, over n draws
local function frequencies(logits, opts, n)
  local counts = {}
  for v = 1, logits.shape[2] do counts[v] = 0 end
  local drawn = generate.pick(logits:expand(n, logits.shape[2]), opts):view(-1):totable()
  for _, id in ipairs(drawn) do counts[id] = counts[id] + 1 end
  for v = 1, #counts do counts[v] = counts[v] / n end
  return counts
end

-- want: PyTorch's probabilities (0: filtered out)
local function assert_distribution(want, got, what)
  for v = 1, #want do
    assert.is_true(want[v] == 0 and got[v] == 0 or want[v] > 0 and (got[v] > 0 or want[v] < 0.001),
      ("%s: token %d drawn %g, PyTorch's probability %g"):format(what, v, got[v], want[v]))
    -- five standard deviations of a frequency over n = 4000 draws, and the rounding of want
    local tol = 5 * math.sqrt(want[v] * (1 - want[v]) / 4000) + 2e-3
    assert.is_true(math.abs(want[v] - got[v]) < tol, ("%s: token %d drawn %g, PyTorch's probability %g"):format(what,
      v, got[v], want[v]))
  end
end

describe("generate against Hugging Face's logits processors (PyTorch reference)", function()
  it("greedy: repetition_penalty, eos ids, min_new_tokens and stop sequences give PyTorch's tokens", function()
    local cases = {
      { { 3, 8, 8, 5 }, { repetition_penalty = 1.3 }, { 3, 8, 8, 5, 12, 8, 10, 4, 2, 3, 7, 9, 8, 8, 8, 3 } },
      { { 3, 8, 8, 5 }, { repetition_penalty = 0.7 }, { 3, 8, 8, 5, 3, 8, 5, 2, 3, 2, 3, 2, 2, 2, 2, 2 } },
      { { 2, 9, 4 }, { eos_id = { 12, 9 } }, { 2, 9, 4, 8, 1, 9 } },
      { { 2, 9, 4 }, { eos_id = { 12, 9 }, min_new_tokens = 3 }, { 2, 9, 4, 8, 1, 4, 12 } },
      { { 2, 9, 4 }, { repetition_penalty = 2, eos_id = { 4, 9 }, min_new_tokens = 3 },
        { 2, 9, 4, 8, 1, 5, 7, 10, 3, 12, 11, 12, 6, 9 } },
      { { 2, 9, 4 }, { stop = { { 3, 5 }, { 2, 3, 12 } } }, { 2, 9, 4, 8, 1, 9, 5, 2, 3, 12 } },
      { { 11, 6, 2 }, { stop = { { 2, 3, 2 } }, repetition_penalty = 1.1 },
        { 11, 6, 2, 9, 5, 7, 1, 4, 2, 3, 12, 2, 7, 4, 10 } },
    }
    -- a stop sequence may begin in the prompt, as Hugging Face's stop_strings (its
    -- StopStringCriteria reads the tail of input_ids), but must end at a new token
    for _, c in ipairs {
      { { 2, 9, 4 }, { stop = { { 4, 8 } } }, { 2, 9, 4, 8 } },
      { { 2, 9, 4 }, { stop = { { 9, 4, 8 } } }, { 2, 9, 4, 8 } },
      { { 2, 9, 4 }, { stop = { { 2, 9, 4 } } }, { 2, 9, 4, 8, 1, 9, 5, 2, 3, 12, 2, 12, 11, 2, 11 } },
    } do cases[#cases + 1] = c end
    for i, c in ipairs(cases) do
      local o = { max_new_tokens = 12 }
      for k, v in pairs(c[2]) do o[k] = v end
      assert.are.same(c[3], generate.generate(fake, ids(c[1]), o)[1]:totable(), "case " .. i)
    end
  end)

  it("sampling: temperature -> top_k -> top_p keep PyTorch's tokens with PyTorch's probabilities", function()
    local logits = fake:decode(ids { 3, 8, 8, 5 }):select(2, 1)
    local cases = {
      { { top_p = 0.9 }, { 0, 0.2114, 0.1292, 0, 0, 0, 0.2731, 0.0779, 0, 0, 0, 0.3085 } },
      { { temperature = 0.5, top_k = 6, top_p = 0.8 }, { 0, 0.2084, 0, 0, 0, 0, 0.3478, 0, 0, 0, 0, 0.4438 } },
      { { temperature = 2, top_k = 4 }, { 0, 0.2423, 0.1895, 0, 0, 0, 0.2755, 0, 0, 0, 0, 0.2927 } },
      { { top_p = 0.3 }, { 0, 0, 0, 0, 0, 0, 0.4696, 0, 0, 0, 0, 0.5304 } },
      { { temperature = 2 }, { 0.032, 0.1694, 0.1324, 0.0219, 0.0107, 0.0441, 0.1925, 0.1028, 0.0168, 0.012, 0.0609,
        0.2046 } },
    }
    ember.manual_seed(11)
    for i, c in ipairs(cases) do
      c[1].strategy = "sample"
      assert_distribution(c[2], frequencies(logits, c[1], 4000), "case " .. i)
    end
  end)

  it("repetition_penalty before temperature: the first sampled token has PyTorch's probabilities", function()
    -- the prompt's ids 3, 5 and 8 penalized by 3 (logits 2.120, -2.911, 1.614: divided where positive,
    -- multiplied where negative), then temperature 1 and 0.5
    local N = 4000
    local prompt = ids({ 3, 8, 8, 5 }):expand(N, 4)
    local function first(t)
      local out = generate.generate(fake, prompt, { strategy = "sample", temperature = t, repetition_penalty = 3,
        max_new_tokens = 1 })
      local f = {}
      for v = 1, V do f[v] = 0 end
      for _, id in ipairs(out:select(2, 5):totable()) do f[id] = f[id] + 1 / N end
      return f
    end
    ember.manual_seed(2)
    assert_distribution({ 0.0083, 0.2331, 0.0347, 0.0039, 1.6e-5, 0.0158, 0.3011, 0.0293, 0.0023, 0.0012, 0.0302,
      0.3402 }, first(1), "temperature 1")
    assert_distribution({ 0.0003, 0.2058, 0.0046, 0.0001, 3e-10, 0.0009, 0.3435, 0.0032, 3e-5, 8e-6, 0.0034, 0.4382 },
      first(0.5), "temperature 0.5")
  end)

  it("repetition_penalty counts a row's own ids, not its left padding (so a row of a batch is penalized as alone)",
    function()
    -- every step: token 1 (the pad id) a little ahead of token 2
    local flat = { decode = function(_, x)
      return ember.tensor({ 2.0, 1.9, 0, 0, 0 }, { dtype = "float64" }):view(1, 1, 5):expand(x.shape[1], 1, 5)
    end }
    local p = ember.tensor({ { 1, 1, 4 }, { 3, 4, 5 } }, { dtype = "int64" })
    local mask = ember.tensor({ { true, true, false }, { false, false, false } }, { dtype = "bool" })
    local out = generate.generate(flat, p, { max_new_tokens = 2, repetition_penalty = 2, prompt_padding_mask = mask })
    -- 1 first (the padding is not counted), then 2 (1 is now the row's own: 2 / 2 < 1.9)
    assert.are.same({ { 1, 1, 4, 1, 2 }, { 3, 4, 5, 1, 2 } }, out:totable())
  end)

  it("top_k keeps every token as likely as the k-th, as Hugging Face's TopKLogitsWarper", function()
    -- logits 1, 3, 2, 2, 2, 0.5 and top_k = 2: the three 2s tie with the 2nd
    local logits = ember.tensor({ { 1, 3, 2, 2, 2, 0.5 } }, { dtype = "float64" })
    ember.manual_seed(3)
    assert_distribution({ 0, 0.4754, 0.1749, 0.1749, 0.1749, 0 },
      frequencies(logits, { strategy = "sample", top_k = 2 }, 4000), "ties at the k-th")
    -- in float32 too (bfloat16 and float16 logits tie often)
    assert_distribution({ 0, 0.4754, 0.1749, 0.1749, 0.1749, 0 },
      frequencies(logits:float(), { strategy = "sample", top_k = 2 }, 4000), "float32")
  end)

  it("top-k and top-p sort in C, not with a Lua table.sort of the vocabulary per row", function()
    local sort, calls = table.sort, 0
    table.sort = function(t, ...) -- luacheck: ignore
      if #t > 100 then calls = calls + 1 end -- (small ones: ember's own, e.g. a list of dims)
      return sort(t, ...)
    end
    local ok, err = pcall(function()
      local logits = ember.randn(2, 5000)
      generate.pick(logits, { strategy = "sample", top_p = 0.9 })
      generate.pick(logits, { strategy = "sample", top_k = 50 })
    end)
    table.sort = sort -- luacheck: ignore
    assert(ok, err)
    assert.are.equal(0, calls)
  end)
end)

describe("sampling sorts only the tokens top-k / top-p can keep", function()
  -- the draw of one row from u, with the whole vocabulary sorted in Lua
  local function reference(probs, total, k, p, u)
    if k and k >= #probs then k = nil end -- no filtering
    if p == 1 then p = nil end -- (as Hugging Face: no top-p filtering)
    local ids = {}
    for i = 1, #probs do ids[i] = i end
    if not (k or p) then -- plain sampling: in id order, over the whole row
      total = 0
      for i = 1, #probs do total = total + probs[i] end
    end
    table.sort(ids, function(a, b)
      if not (k or p) then return a < b end
      if probs[a] ~= probs[b] then return probs[a] > probs[b] end
      return a < b
    end)
    local n = #ids
    if k and k < n then
      n = k
      while n < #ids and probs[ids[n + 1]] == probs[ids[k]] do n = n + 1 end
      total = 0
      for i = 1, n do total = total + probs[ids[i]] end
    end
    if p then
      local acc, keep = 0, 0
      for i = 1, n do
        if acc >= p * total then break end
        acc, keep = acc + probs[ids[i]], i
      end
      n, total = keep, acc
    end
    local acc = 0
    for i = 1, n do
      acc = acc + probs[ids[i]]
      if u * total < acc then return ids[i] end
    end
    return ids[n]
  end

  it("draw for draw as sorting the whole vocabulary (plain sampling: as a pass over it), peaked and flat rows, ties",
    function()
    -- (a vocabulary of more than 1024 ids is read in blocks / pruned before sorting; a smaller one is not)
    for _, V in ipairs { 3000, 500 } do
      ember.manual_seed(8)
      local B = 48
      local logits = ember.randn(B, V, { dtype = "float64" }) * ember.linspace(0.5, 6, B, { dtype = "float64" }):view(B, 1)
      logits = logits:round() -- ties
      for _, o in ipairs { { top_p = 0.9 }, { top_p = 0.5, temperature = 0.7 }, { top_k = 40 }, { top_k = 1 },
                           { top_k = 200, top_p = 0.95 }, { top_p = 1 }, { top_k = 2999 }, {}, { temperature = 2 } } do
        o.strategy = "sample"
        ember.manual_seed(21)
        local got = generate.pick(logits, o):view(-1):totable()
        ember.manual_seed(21)
        local u = ember.rand(B, { dtype = "float64" }):totable()
        local probs = (logits / (o.temperature or 1)):softmax(-1)
        local totals, rows = probs:sum(2):totable(), probs:totable()
        for b = 1, B do
          assert.are.equal(reference(rows[b], totals[b], o.top_k, o.top_p, u[b]), got[b],
            ("V %d, row %d, top_k %s, top_p %s"):format(V, b, tostring(o.top_k), tostring(o.top_p)))
        end
      end
    end
  end)
end)

describe("num_return_sequences (Hugging Face's name)", function()
  local prompt = ember.tensor({ { 2, 9, 4 }, { 11, 6, 2 } }, { dtype = "int64" })

  it("samples n sequences per prompt, each prompt's copies next to each other", function()
    ember.manual_seed(5)
    local out, logits = generate.generate(fake, prompt, { strategy = "sample", num_return_sequences = 3,
      max_new_tokens = 6, return_logits = true })
    assert.are.same({ 6, 9 }, out.shape)
    assert.are.same({ 6, V }, logits[1].shape)
    for r = 1, 6 do
      assert.is_true(out[r]:narrow(1, 1, 3):equal(prompt[math.ceil(r / 3)]), "row " .. r)
    end
    -- as the repeated prompt, draw for draw
    ember.manual_seed(5)
    local same = generate.generate(fake, prompt:repeat_interleave(3, 1), { strategy = "sample", max_new_tokens = 6 })
    assert.is_true(out:equal(same))
    -- the copies differ (three equal rows of six draws over 12 tokens would be a fluke)
    assert.is_false(out[1]:equal(out[2]) and out[2]:equal(out[3]))
    -- 1 is the plain call
    ember.manual_seed(5)
    local one = generate.generate(fake, prompt, { strategy = "sample", max_new_tokens = 6, num_return_sequences = 1 })
    ember.manual_seed(5)
    assert.is_true(one:equal(generate.generate(fake, prompt, { strategy = "sample", max_new_tokens = 6 })))
  end)

  it("repeats the prompt's padding mask and the memory with it", function()
    local seen = {}
    local m = { decode = function(_, x, o)
      seen[#seen + 1] = { x.shape[1], o.key_padding_mask and o.key_padding_mask.shape[1], o.memory and o.memory.shape[1],
                          o.memory_key_padding_mask and o.memory_key_padding_mask.shape[1] }
      return fake:decode(x)
    end }
    local mask = ember.tensor({ { true, false, false }, { false, false, false } }, { dtype = "bool" })
    generate.generate(m, prompt, { strategy = "sample", num_return_sequences = 2, max_new_tokens = 1,
      prompt_padding_mask = mask, memory = ember.zeros(2, 4, 3), memory_key_padding_mask = ember.zeros({ 2, 4 },
        { dtype = "bool" }) })
    assert.are.same({ { 4, 4, 4, 4 } }, seen)
  end)

  it("is refused where Hugging Face refuses it, and checked", function()
    local function message(o)
      local ok, err = pcall(generate.generate, fake, prompt, o)
      assert.is_false(ok)
      return tostring(err)
    end
    local msg = message({ num_return_sequences = 2 })
    assert.truthy(msg:find('num_return_sequences = 2 needs strategy = "sample"', 1, true), msg)
    msg = message({ num_return_sequences = 0, strategy = "sample" })
    assert.truthy(msg:find("num_return_sequences must be an integer >= 1, got 0", 1, true), msg)
    msg = message({ num_return_sequences = 2, strategy = "sample", variant_inputs = { prefix = 1 } })
    assert.truthy(msg:find("repeat_interleave", 1, true), msg)
  end)
end)

describe("generate's errors for a Hugging Face user", function()
  it("do_sample = false is pointed at greedy, a flat stop list at its nested form", function()
    local ok, err = pcall(generate.generate, fake, ids { 2, 9 }, { do_sample = false })
    assert.is_false(ok)
    assert.truthy(tostring(err):find('do_sample is strategy = "sample" here (do_sample = false is "greedy", the default)',
      1, true), tostring(err))
    ok, err = pcall(generate.generate, fake, ids { 2, 9 }, { stop = { 5, 6 } })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("got a list of ids {5, 6} (one sequence is {{5, 6}}; each id alone: {{5}, {6}})",
      1, true), tostring(err))
    for o, want in pairs {
      min_length = "Hugging Face's min_length is min_new_tokens (the prompt not counted) here",
      num_beams = "Hugging Face's num_beams: ember's generate has no beam search (greedy or sampling)",
      output_scores = "Hugging Face's output_scores: return_logits = true returns each step's logits",
    } do
      ok, err = pcall(generate.generate, fake, ids { 2, 9 }, { [o] = 4 })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("generate: unknown option '" .. o .. "'; " .. want, 1, true), tostring(err))
    end
    -- Hugging Face's stop_strings are text
    for _, stop in ipairs { { "\n\n" }, "###" } do
      ok, err = pcall(generate.generate, fake, ids { 2, 9 }, { stop = stop })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("got text: stop takes token ids (a tokenizer's encode of each string", 1, true),
        tostring(err))
    end
    ok, err = pcall(generate.generate, fake, ids { 2, 9 }, { stop = { { 1.5 } } })
    assert.truthy(tostring(err):find("got a table that is not a list of non-empty lists of integer ids", 1, true),
      tostring(err))
  end)
end)

describe("prompt_padding_mask from Hugging Face's attention_mask", function()
  it("taken as it is (1 = token) is refused, saying how to turn it (an unpadded batch was all padding, silently)",
    function()
    local p = ember.tensor({ { 1, 1, 4 }, { 3, 4, 5 } }, { dtype = "int64" })
    local attention_mask = ember.tensor({ { 0, 0, 1 }, { 1, 1, 1 } }, { dtype = "int64" })
    local function message(mask)
      local ok, err = pcall(generate.generate, fake, p, { max_new_tokens = 2, prompt_padding_mask = mask })
      assert.is_false(ok)
      return tostring(err)
    end
    -- an unpadded batch: every row all "padding"
    local msg = message(ember.ones({ 2, 3 }, { dtype = "bool" }))
    assert.truthy(msg:find("prompt_padding_mask row 1 is all padding: a row needs at least one token", 1, true), msg)
    assert.truthy(msg:find("attention_mask:eq(0)", 1, true), msg)
    -- a left-padded one: tokens, then "padding"
    msg = message(attention_mask:bool())
    assert.truthy(msg:find("row 1 has padding after a token (position 3)", 1, true), msg)
    assert.truthy(msg:find("attention_mask:eq(0)", 1, true), msg)
    -- turned, it runs
    assert.are.same({ 2, 5 }, generate.generate(fake, p, { max_new_tokens = 2,
      prompt_padding_mask = attention_mask:eq(0) }).shape)
  end)
end)

describe("generate with models.Llama (float64)", function()
  local Llama = require("ember.models").Llama
  local function llama(extra)
    ember.manual_seed(0)
    local c = { vocab_size = 40, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 2,
                num_attention_heads = 4, num_key_value_heads = 2 }
    for k, v in pairs(extra or {}) do c[k] = v end
    return Llama(c):to("float64")
  end

  it("GQA and Mistral's sliding window past the window: a left-padded batch gives each prompt's tokens alone, "
    .. "cached == uncached", function()
    for _, extra in ipairs { {}, { model_type = "mistral", sliding_window = 4 } } do
      local m = llama(extra)
      local batch = ember.tensor({ { 5, 9, 2, 7, 3 }, { 1, 1, 1, 11, 4 } }, { dtype = "int64" })
      local mask = batch:eq(1)
      local out, la = generate.generate(m, batch, { max_new_tokens = 20, prompt_padding_mask = mask, return_logits = true })
      local un, lb = generate.generate(m, batch, { max_new_tokens = 20, prompt_padding_mask = mask, use_cache = false,
        return_logits = true })
      assert.is_true(out:equal(un))
      for i = 1, #la do assert.is_true((la[i] - lb[i]):abs():max():item() < 1e-12) end
      local alone = generate.generate(m, ember.tensor({ { 11, 4 } }, { dtype = "int64" }), { max_new_tokens = 20 })
      assert.is_true(out[2]:narrow(1, 4, 22):equal(alone[1]), extra.model_type or "llama")
      -- the padding is no part of a row's ids for stop sequences either
      local stopped = generate.generate(m, batch, { max_new_tokens = 20, prompt_padding_mask = mask,
        stop = { { 1, 11, 4, alone[1][3]:item() } } })
      assert.is_true(stopped[2]:narrow(1, 4, 22):equal(alone[1]))
      -- the cache keeps kv_heads = 2 heads
      local cache = {}
      ember.no_grad(function() m:decode(batch, { cache = cache, key_padding_mask = mask }) end)
      assert.are.same({ 2, 2, 5, 4 }, cache[1].k.shape)
    end
  end)
end)

describe("a cache of another architecture", function()
  it("is refused both ways between models.Llama and nn.TransformerDecoder (each took the other's as a fresh cache)",
    function()
    local TinyLM = require "tests.lua.helpers.tiny_lm"
    local Llama = require("ember.models").Llama
    ember.manual_seed(0)
    local llama = Llama { vocab_size = 11, hidden_size = 8, intermediate_size = 16, num_hidden_layers = 2,
                          num_attention_heads = 2 }:to("float64")
    local tiny = TinyLM { cross = false }
    local ids, nxt = ember.tensor({ { 1, 2, 3 } }, { dtype = "int64" }), ember.tensor({ { 4 } }, { dtype = "int64" })
    ember.no_grad(function()
      local tc, lc = {}, {}
      tiny:decode(ids, { cache = tc, start = 1 })
      llama:decode(ids, { cache = lc })
      local ok, err = pcall(llama.decode, llama, nxt, { cache = tc })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("forward_cached: this cache was filled by another module", 1, true), tostring(err))
      ok, err = pcall(tiny.decode, tiny, nxt, { cache = lc, start = 4 })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("TransformerDecoderLayer.forward: this cache was filled by another module", 1,
        true), tostring(err))
      -- each model's own cache goes on
      assert.are.same({ 1, 1, 11 }, tiny:decode(nxt, { cache = tc, start = 4 }).shape)
      assert.are.same({ 1, 1, 11 }, llama:decode(nxt, { cache = lc }).shape)
    end)
    local layer = require("ember.nn").TransformerDecoderLayer(8, 2, { cross = false, dropout = 0 })
    local ok, err = pcall(layer.forward, layer, ember.randn(1, 2, 8), nil, { cache = 5 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("TransformerDecoderLayer.forward: cache must be a table", 1, true), tostring(err))
  end)
end)

describe("Llama.from_pretrained and generation_config.json", function()
  it("takes eos_token_id and pad_token_id from generation_config.json over config.json's, as transformers", function()
    local Llama = require("ember.models").Llama
    local tmpdir = require "tests.lua.helpers.tmpdir"
    ember.manual_seed(4)
    local m = Llama { vocab_size = 13, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 1,
                      num_attention_heads = 4, eos_token_id = 12 }
    local ids = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "int64" })
    local free = require("ember.generate").generate(m, ids, { max_new_tokens = 6 })
    local first = free[1][4]:item()
    local dir = tmpdir()
    m:save_pretrained(dir)
    -- Llama 3 Instruct's layout: config.json has one eos, generation_config.json a list (0-based ids)
    local f = assert(io.open(dir .. "/generation_config.json", "w"))
    f:write(('{"bos_token_id": 0, "eos_token_id": [11, %d], "pad_token_id": 9, "do_sample": true}'):format(first - 1))
    f:close()
    local out = Llama.from_pretrained(dir):generate(ids, { max_new_tokens = 6 })
    -- row 1 stops at its first token; row 2 goes on while row 1 emits pad_token_id + 1
    assert.is_true(out.shape[2] > 4, "row 2 stopped at once: pick another seed")
    assert.are.equal(first, out[1][4]:item())
    for j = 5, out.shape[2] do assert.are.equal(10, out[1][j]:item()) end
    -- greedy still (do_sample is not taken): row 2 as without eos until it stops
    assert.is_true(out[2]:narrow(1, 1, 4):equal(free[2]:narrow(1, 1, 4)))
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("generate's KV cache", function()
  it("reserves at most 2048 new positions: a large max_new_tokens cut short by eos does not hold its whole cache",
    function()
    local TinyLM = require "tests.lua.helpers.tiny_lm"
    ember.manual_seed(5)
    local m = TinyLM { cross = false, rope = true, positions = "none" }
    local p = ember.tensor({ { 3, 4, 5 } }, { dtype = "int64" })
    local first = generate.generate(m, p, { max_new_tokens = 1 })[1][4]:item()
    local out = generate.generate(m, p, { max_new_tokens = 100000, eos_id = first })
    assert.are.same({ 1, 4 }, out.shape)
    assert.are.equal(3 + 2048, m.last_cache[1].self.capacity)
    -- below it, the whole run at once (prompt + max_new_tokens)
    generate.generate(m, p, { max_new_tokens = 100, eos_id = first })
    assert.are.equal(103, m.last_cache[1].self.capacity)
  end)
end)

describe("generate.pick", function()
  it("takes float logits [B, V] only, and says so (sampling [V] or [B, L, V] failed inside Lua)", function()
    for _, c in ipairs {
      { ember.randn(10), "got float32 [10]" },
      { ember.randn(2, 3, 10), "got float32 [2, 3, 10]" },
      { ember.tensor({ { 1, 2 } }, { dtype = "int64" }), "got int64 [1, 2]" },
      { "x", "got string" },
    } do
      for _, strategy in ipairs { "greedy", "sample" } do
        local ok, err = pcall(generate.pick, c[1], { strategy = strategy })
        assert.is_false(ok)
        assert.truthy(tostring(err):find("generate.pick: logits must be a float tensor [B, V]", 1, true), tostring(err))
        assert.truthy(tostring(err):find(c[2], 1, true), tostring(err))
      end
    end
  end)
end)
