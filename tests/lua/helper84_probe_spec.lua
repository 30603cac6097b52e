-- Probes of ember.models and generate as a Hugging Face user writes them,
-- and of an attention variant dropped into the plugin folder (helper-84):
-- what broke, kept fixed.
local ember = require "ember"
local generate = require "ember.generate"

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
      assert.truthy(err:find("helper84_probe_spec.lua:" .. line .. ": generate: top_p must be a number in [0, 1]",
        1, true), err)
    end
  end)
end)

describe("an attention option out of its range", function()
  -- A Lua variant's option with only a `min` (as plugins/README.md's
  -- softcap2) said "must be in [1e-06, 1e+300], got 0 ()": the stand-in
  -- for the missing bound and the empty help were printed.
  it("names the one bound it has, and no empty help", function()
    ember.attention_variant { name = "h84_capped", options = { { name = "cap", type = "float", default = 30, min = 1e-6 } },
      score = function(s, b, h, q, k, ctx) return ctx.options.cap * ember.tanh(s / ctx.options.cap) end }
    ember.attention_variant { name = "h84_upper", options = { { name = "m", type = "int", default = 1, max = 5,
      help = "a multiplier" } }, score = function(s, b, h, q, k, ctx) return s * ctx.options.m end }
    local nn = require "ember.nn"
    local ok, err = pcall(nn.MultiHeadAttention, { d_model = 16, heads = 2, attention = "h84_capped", cap = 0 })
    assert.is_false(ok)
    assert.truthy(err:find("attention 'h84_capped': option 'cap' must be >= 1e-06, got 0", 1, true), err)
    assert.falsy(err:find("(", 1, true), err)
    ok, err = pcall(nn.MultiHeadAttention, { d_model = 16, heads = 2, attention = "h84_upper", m = 6 })
    assert.is_false(ok)
    assert.truthy(err:find("attention 'h84_upper': option 'm' must be <= 5, got 6 (a multiplier)", 1, true), err)
    -- both bounds: as before
    ok, err = pcall(nn.MultiHeadAttention, { d_model = 16, heads = 2, attention = "local", window_left = -1 })
    assert.is_false(ok)
    assert.truthy(err:find("option 'window_left' must be in [0, 1e+12], got -1 (sliding:", 1, true), err)
  end)
end)

describe("generate's ids checked before they reach the model", function()
  local P = ember.tensor({ { 3, 4, 5 }, { 8, 9, 10 } }, { dtype = "int64" })

  local function refused(m, opts, pattern)
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() return m:generate(P, opts) end)
    assert.is_false(ok)
    assert.truthy(err:find("helper84_probe_spec.lua:" .. line .. ": generate: ", 1, true), err)
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

describe("a head count that does not divide the width", function()
  -- ViT{num_heads = 3} and CrossAttentionVLM{heads = 3} of a width 64
  -- failed inside their layers, naming MultiHeadAttention and its d_model.
  it("is refused by the model, naming its own config keys, at the user's line", function()
    local models = require "ember.models"
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(models.ViT, { image_size = 28, patch_size = 7, num_classes = 10, hidden_dim = 64,
      num_layers = 1, num_heads = 3, mlp_dim = 32 })
    assert.is_false(ok)
    assert.truthy(err:find("helper84_probe_spec.lua:" .. line .. ": ViT: config.hidden_dim (64) must be divisible "
      .. "by num_heads (3)", 1, true), err)
    line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(models.CrossAttentionVLM, { d_model = 64, heads = 3 })
    assert.is_false(ok)
    assert.truthy(err:find("helper84_probe_spec.lua:" .. line .. ": CrossAttentionVLM: config.d_model (64) must be "
      .. "divisible by heads (3)", 1, true), err)
  end)
end)
