-- ember.models.Llama loads the Llama family's Hugging Face folders: Llama
-- 3.1/3.2 (rope_scaling "llama3", tied embeddings), older rope scalings
-- ("linear" spelt `type`, "dynamic" NTK, "yarn" with its attention factor),
-- Llama's attention_bias, Qwen2/Qwen2.5 (q, k, v biases; a sliding window
-- from max_window_layers on), Qwen3 (head_dim apart from hidden_size /
-- heads, q_norm/k_norm) and Mistral (sliding_window).
--
-- tests/gen_llama_family.py writes each folder (config.json as the Hub's
-- files spell it, model.safetensors) from a minimal PyTorch decoder with
-- transformers' semantics of each variant, and its logits and greedy
-- continuation (with a KV cache, as transformers' generate). Here:
-- from_pretrained(folder) has the file's names exactly; logits in float32
-- (max |error| <= 1e-4, the reference is float64 on the same float32
-- weights) and float64 (<= 1e-10); greedy tokens equal (KV cache, and for
-- all but "dynamic" also without it: dynamic NTK rotates a cached key as
-- the call that made it, as transformers' cache, so the two differ past
-- max_position_embeddings); chunked cached decoding equals the full forward
-- where the window slides; the comparisons fail when the variant's part is
-- dropped; save_pretrained round trips; each variant trains (every
-- parameter gets a gradient) and runs in bfloat16; the rotary tables are
-- not rebuilt per layer; bad configs are refused at the caller's line. nn.MultiHeadAttention's head_dim option: shapes, the old
-- init draws unchanged, a float64 gradcheck.
local ember = require "ember"
local nn = require "ember.nn"
local generate = require "ember.generate"
local checkpoint = require "ember.checkpoint"
local compare = require "tests.lua.helpers.parity"
local gradcheck = require "tests.lua.helpers.gradcheck"
local tmpdir = require "tests.lua.helpers.tmpdir"

local Llama = require("ember.models").Llama
local fixtures = dofile("tests/fixtures/llama_family.lua")
local T, raises_here = compare.T, compare.raises_here
local F32_TOL, F64_TOL = 1e-4, 1e-10
local NAMES = { "llama31", "llama_linear_bias", "llama_dynamic", "llama_yarn", "qwen2", "qwen2_sliding", "qwen3", "mistral" }

local function max_abs(a, b) return (a:double() - b:double()):abs():max():item() end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function logits(m, ids) return ember.no_grad(function() return m(ids) end) end

describe("models.Llama.from_pretrained loads the Llama family and matches PyTorch", function()
  it("every case of the generator is tested here", function()
    local seen = {}
    for name in pairs(fixtures.cases) do seen[#seen + 1] = name end
    table.sort(seen)
    local want = {}
    for i, n in ipairs(NAMES) do want[i] = n end
    table.sort(want)
    assert.are.same(want, seen)
  end)

  for _, name in ipairs(NAMES) do
    local case = fixtures.cases[name]

    it(name .. ": the state dict has the file's names; logits in float32 and float64", function()
      local m = Llama.from_pretrained(case.folder)
      local file = checkpoint.load_tensors(case.folder .. "/model.safetensors")
      assert.are.same(compare.sorted_keys(file), compare.sorted_keys(m:state_dict()))
      local cfg = ember._json_decode(read(case.folder .. "/config.json"))
      assert.are.equal(cfg.model_type, m.config.model_type)
      assert.are.equal(cfg.head_dim or cfg.hidden_size // cfg.num_attention_heads, m.config.head_dim)
      local ids, want = T(case.ids), T(case.logits)
      local got = logits(m, ids)
      assert.are.equal("float32", got.dtype)
      local e = max_abs(got, want)
      assert(e <= F32_TOL, ("%s float32 logits: max |error| %.3g > %g"):format(name, e, F32_TOL))
      assert(2 * F32_TOL < case.min_greedy_gap / 10, "tolerance too close to the greedy gap")
      m:to("float64")
      e = max_abs(logits(m, ids), want)
      assert(e <= F64_TOL, ("%s float64 logits: max |error| %.3g > %g"):format(name, e, F64_TOL))
    end)

    it(name .. ": greedy generation with the KV cache" .. (name ~= "llama_dynamic" and " and without" or ""), function()
      local m = Llama.from_pretrained(case.folder)
      local ids, want = T(case.ids), T(case.generated)
      for _, cached in ipairs(name == "llama_dynamic" and { true } or { true, false }) do
        local got = generate.generate(m, ids, { max_new_tokens = fixtures.new_tokens, use_cache = cached })
        assert.are.same(want:totable(), got:totable(), name .. " use_cache = " .. tostring(cached))
      end
    end)
  end

  it("cached decoding in chunks equals the full forward where the window slides (mistral, qwen2_sliding)", function()
    for _, name in ipairs { "mistral", "qwen2_sliding", "qwen3", "llama31" } do
      local case = fixtures.cases[name]
      local m = Llama.from_pretrained(case.folder):to("float64")
      local ids = T(case.generated) -- 13 tokens, past the windows of 4 and 3
      local full = logits(m, ids)
      local cache, parts, at = {}, {}, 1
      for _, n in ipairs { 5, 1, 4, 1, 2 } do
        parts[#parts + 1] = ember.no_grad(function() return m(ids:narrow(2, at, n), { cache = cache }) end)
        at = at + n
      end
      assert(max_abs(ember.cat(parts, 2), full) < 1e-10, name)
    end
  end)

  it("the comparisons can fail: without the variant's part the logits move past the tolerance", function()
    local function err(name, overrides)
      local case = fixtures.cases[name]
      return max_abs(logits(Llama.from_pretrained(case.folder, overrides), T(case.ids)), T(case.logits))
    end
    assert(err("llama31", { rope_scaling = { rope_type = "default" } }) > 1e-2, "llama3 scaling")
    assert(err("llama_linear_bias", { rope_scaling = { type = "linear", factor = 1.5 } }) > 1e-2, "linear factor")
    assert(err("llama_dynamic", { max_position_embeddings = 7 }) > 1e-2, "dynamic past max")
    assert(err("llama_yarn", { rope_scaling = { rope_type = "yarn", factor = 4, attention_factor = 1 } }) > 1e-2,
      "yarn attention factor")
    assert(err("mistral", { sliding_window = 7 }) > 1e-2, "sliding window")
    assert(err("qwen2_sliding", { use_sliding_window = false }) > 1e-2, "qwen2 sliding layers")
    assert(err("qwen2_sliding", { max_window_layers = 0 }) > 1e-2, "qwen2 max_window_layers")
    -- layer_types (newer configs) names each layer instead of max_window_layers
    assert(err("qwen2_sliding", { layer_types = { "full_attention", "sliding_attention" } }) <= F32_TOL, "layer_types")
    assert(err("qwen2_sliding", { layer_types = { "sliding_attention", "full_attention" } }) > 1e-2, "layer_types swapped")
  end)

  it("rotary tables: a scaled one is built once; dynamic past the max, one per call for every layer", function()
    local info = nn.MultiHeadAttention.rope_cache_info
    local ids = T(fixtures.cases.llama31.ids)
    local m = Llama.from_pretrained(fixtures.cases.llama31.folder)
    logits(m, ids)
    local b = info().builds
    logits(m, ids)
    assert.are.equal(b, info().builds)
    m = Llama.from_pretrained(fixtures.cases.llama_dynamic.folder) -- 2 layers, 7 positions past max 5
    b = info().builds
    logits(m, ids)
    assert.are.equal(b + 1, info().builds)
  end)

  it("every variant trains: each parameter gets a gradient (gradient checkpointing on), and runs in bfloat16", function()
    for _, name in ipairs(NAMES) do
      local case = fixtures.cases[name]
      local m = Llama.from_pretrained(case.folder):train():gradient_checkpointing_enable()
      local ids = T(case.generated)
      local V = m.config.vocab_size
      local out = m(ids:narrow(2, 1, 12))
      nn.CrossEntropyLoss()(out:reshape(-1, V), ids:narrow(2, 2, 12):reshape(-1)):backward()
      for pname, p in pairs(m:named_parameters()) do
        assert(p.grad ~= nil and p.grad:abs():sum():item() > 0, name .. ": no gradient for " .. pname)
      end
      local lb = logits(m:eval():to("bfloat16"), T(case.ids))
      assert.are.equal("bfloat16", lb.dtype)
      assert(max_abs(lb, T(case.logits)) < 1, name .. " bfloat16")
    end
  end)

  it("transformers 5's rope_parameters (rope_theta inside) gives the same model", function()
    local case = fixtures.cases.llama31
    local cfg = ember._json_decode(read(case.folder .. "/config.json"))
    local rp = cfg.rope_scaling
    rp.rope_theta, cfg.rope_scaling, cfg.rope_theta = cfg.rope_theta, nil, nil
    cfg.rope_parameters = rp
    local dir = tmpdir()
    write(dir .. "/config.json", ember._json_encode(cfg))
    assert(os.execute(("cp '%s/model.safetensors' '%s/'"):format(case.folder, dir)))
    local m = Llama.from_pretrained(dir)
    assert.are.equal(500000.0, m.config.rope_theta)
    assert(max_abs(logits(m, T(case.ids)), T(case.logits)) <= F32_TOL)
  end)

  it("save_pretrained writes the variant's config.json; from_pretrained reads back the same logits", function()
    for _, name in ipairs { "llama31", "llama_linear_bias", "qwen2_sliding", "qwen3", "mistral" } do
      local case = fixtures.cases[name]
      local m = Llama.from_pretrained(case.folder)
      local dir = tmpdir()
      m:save_pretrained(dir)
      local cfg = ember._json_decode(read(dir .. "/config.json"))
      local orig = ember._json_decode(read(case.folder .. "/config.json"))
      assert.are.equal(m.config.head_dim, cfg.head_dim)
      for _, k in ipairs { "model_type", "sliding_window", "use_sliding_window", "max_window_layers",
                           "attention_bias" } do
        assert.are.equal(orig[k], cfg[k], name .. " " .. k)
      end
      assert.are.same(orig.architectures, cfg.architectures)
      assert.are.same(orig.rope_scaling, cfg.rope_scaling)
      local back = Llama.from_pretrained(dir)
      assert.is_true(logits(back, T(case.ids)):equal(logits(m, T(case.ids))), name)
    end
  end)

  it("a config it cannot compute is refused at the caller's line, naming the key", function()
    local base = { vocab_size = 10, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 1,
                   num_attention_heads = 4 }
    local function with(t)
      local c = {}
      for a, b in pairs(base) do c[a] = b end
      for a, b in pairs(t) do c[a] = b end
      return c
    end
    raises_here(function() Llama(with { rope_scaling = { type = "linear" } }) end,
      "Llama: config.rope_scaling of rope_type 'linear' needs factor")
    raises_here(function() Llama(with { rope_scaling = { rope_type = "longrope", factor = 2 } }) end,
      "Llama: config.rope_scaling: unknown rope_type 'longrope' (supported rope_type: default, linear, dynamic, llama3, yarn)")
    raises_here(function() Llama(with { rope_scaling = { factor = 2 } }) end, "config.rope_scaling: no rope_type (or type)")
    raises_here(function() Llama(with { rope_scaling = { rope_type = "linear", factor = 0.5 } }) end,
      "config.rope_scaling.factor must be a number >= 1, got 0.5")
    raises_here(function() Llama(with { rope_scaling = { rope_type = "linear", factor = 2, low_freq_factor = 1 } }) end,
      "unknown key 'low_freq_factor' for rope_type 'linear'")
    raises_here(function()
      Llama(with { rope_scaling = { rope_type = "llama3", factor = 8, low_freq_factor = 4, high_freq_factor = 1,
                                    original_max_position_embeddings = 64 } })
    end, "config.rope_scaling.high_freq_factor must be a number > low_freq_factor, got 1")
    raises_here(function() Llama(with { rope_scaling = { rope_type = "llama3", factor = 8 } }) end,
      "rope_type 'llama3' needs low_freq_factor")
    raises_here(function() Llama(with { rope_scaling = "linear" }) end, "config.rope_scaling must be a table")
    raises_here(function() Llama(with { head_dim = 7 }) end, "Llama: config.head_dim must be an even positive integer")
    raises_here(function() Llama(with { model_type = "gemma" }) end,
      "config.model_type 'gemma' is not supported (supported: llama, mistral, qwen2, qwen3)")
    raises_here(function() Llama(with { sliding_window = 4 }) end, "config.sliding_window is for model_type mistral")
    raises_here(function() Llama(with { model_type = "mistral", attention_bias = true }) end,
      "model_type 'mistral' has no attention biases")
    raises_here(function() Llama(with { model_type = "qwen2", layer_types = { "full_attention", "x" } }) end,
      "config.layer_types must list num_hidden_layers (1) names")
    raises_here(function() Llama(with { rope_interleaved = true }) end, "config.rope_interleaved must be false here")
    -- SmolLM2's configs (nanotron's keys) load
    assert.are.equal(16, Llama(with { is_llama_config = true, rope_interleaved = false }).config.hidden_size)
    -- the same through a folder, named by from_pretrained
    local dir = tmpdir()
    local cfg = ember._json_decode(read(fixtures.cases.llama31.folder .. "/config.json"))
    cfg.rope_scaling.factor = nil
    write(dir .. "/config.json", ember._json_encode(cfg))
    raises_here(function() Llama.from_pretrained(dir) end,
      "Llama.from_pretrained: config.rope_scaling of rope_type 'llama3' needs factor")
    cfg.rope_scaling.factor, cfg.rope_scaling.rope_type = 8, "su"
    write(dir .. "/config.json", ember._json_encode(cfg))
    raises_here(function() Llama.from_pretrained(dir) end, "Llama.from_pretrained: config.rope_scaling: unknown rope_type 'su'")
    cfg.rope_scaling.rope_type, cfg.head_dim = "llama3", 9
    write(dir .. "/config.json", ember._json_encode(cfg))
    raises_here(function() Llama.from_pretrained(dir) end, "Llama.from_pretrained: config.head_dim must be an even")
    -- transformers' loading options are named as such (they were "unknown config key", listing the config's keys)
    raises_here(function() Llama.from_pretrained(fixtures.cases.mistral.folder, { device_map = "auto" }) end,
      "Llama.from_pretrained: 'device_map' is an option of transformers' from_pretrained, not a config key: load, "
        .. "then move the model")
    raises_here(function() Llama.from_pretrained(fixtures.cases.mistral.folder, { attn_implementation = "sdpa" }) end,
      "'attn_implementation' is an option of transformers' from_pretrained, not a config key")
    -- torch_dtype = "auto" on a float16 folder says that the float16 came from config.json
    cfg = ember._json_decode(read(fixtures.cases.mistral.folder .. "/config.json"))
    cfg.torch_dtype = "float16"
    write(dir .. "/config.json", ember._json_encode(cfg))
    raises_here(function() Llama.from_pretrained(dir, { torch_dtype = "auto" }) end,
      'got "auto", and config.json\'s torch_dtype is "float16" (ember has no float16: bfloat16 is its half '
        .. 'precision; give torch_dtype = "bfloat16" or "float32")')
  end)

  it("the Hub's config.json files of released checkpoints pass the checks (as written, their sizes)", function()
    -- from_pretrained checks the config before it looks for the weights: a folder with only config.json
    -- gets as far as the missing model.safetensors
    local check = require("ember.models._llama_config").check
    local CONFIGS = {
      ["Llama-3.2-1B"] = [[{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
        "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
        "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0,
        "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256}]],
      ["Qwen2.5-0.5B-Instruct"] = [[{"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896,
        "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 32768,
        "max_window_layers": 21, "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
        "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
        "use_sliding_window": false, "vocab_size": 151936}]],
      ["Qwen3-0.6B"] = [[{"architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
        "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960,
        "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28,
        "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
        "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
        "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936}]],
      ["Mistral-7B-v0.1"] = [[{"architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
        "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
        "use_cache": true, "vocab_size": 32000}]],
    }
    local want = {
      ["Llama-3.2-1B"] = { head_dim = 64, rope = "llama3", window = nil, qkv_bias = false },
      ["Qwen2.5-0.5B-Instruct"] = { head_dim = 64, window = nil, qkv_bias = true },
      ["Qwen3-0.6B"] = { head_dim = 128, window = nil, qkv_bias = false, qk_norm = true },
      ["Mistral-7B-v0.1"] = { head_dim = 128, window = 4096, qkv_bias = false },
    }
    for name, text in pairs(CONFIGS) do
      local dir = tmpdir()
      write(dir .. "/config.json", text)
      raises_here(function() Llama.from_pretrained(dir) end, "has no model.safetensors")
      local c = check(ember._json_decode(text), "test")
      local w = want[name]
      assert.are.equal(w.head_dim, c.head_dim, name)
      assert.are.equal(w.rope, c.rope_scaling and c.rope_scaling.rope_type, name)
      assert.are.equal(w.window, c.windows[1], name)
      assert.are.equal(w.qkv_bias, c.qkv_bias, name)
      assert.are.equal(w.qk_norm == true, c.qk_norm, name)
    end
  end)

  it("the model_type says the architecture: q_norm weights in a 'llama' folder are refused, naming them", function()
    local case = fixtures.cases.qwen3
    local cfg = ember._json_decode(read(case.folder .. "/config.json"))
    cfg.model_type, cfg.use_sliding_window, cfg.max_window_layers = "llama", nil, nil
    local dir = tmpdir()
    write(dir .. "/config.json", ember._json_encode(cfg))
    assert(os.execute(("cp '%s/model.safetensors' '%s/'"):format(case.folder, dir)))
    raises_here(function() Llama.from_pretrained(dir) end, "model.layers.0.self_attn.k_norm.weight")
  end)
end)

describe("nn.MultiHeadAttention's head_dim option", function()
  it("q_proj [heads * head_dim, d_model], k/v [kv_heads * head_dim, d_model], out_proj [d_model, heads * head_dim]", function()
    local mha = nn.MultiHeadAttention { d_model = 10, heads = 4, kv_heads = 2, head_dim = 6, rope = true }
    local function dims(t) return table.concat({ table.unpack(t.shape) }, "x") end
    assert.are.equal("24x10", dims(mha.q_proj.weight))
    assert.are.equal("12x10", dims(mha.k_proj.weight))
    assert.are.equal("10x24", dims(mha.out_proj.weight))
    local x = ember.randn(2, 5, 10)
    assert.are.equal("2x5x10", dims(mha(x, { causal = true })))
    local cache = {}
    local a = mha:forward_cached(x:narrow(2, 1, 3), cache)
    local b = mha:forward_cached(x:narrow(2, 4, 2), cache)
    assert(max_abs(ember.cat({ a, b }, 2), mha(x, { causal = true })) < 1e-5)
    assert.truthy(tostring(mha):find("head_dim=6", 1, true))
  end)

  it("head_dim = d_model / heads given explicitly is the module without it, draw for draw", function()
    ember.manual_seed(3)
    local a = nn.MultiHeadAttention { d_model = 8, heads = 2, kv_heads = 1 }
    ember.manual_seed(3)
    local b = nn.MultiHeadAttention { d_model = 8, heads = 2, kv_heads = 1, head_dim = 4 }
    for k, v in pairs(a:state_dict()) do assert.is_true(v:equal(b:state_dict()[k]), k) end
  end)

  it("float64 gradcheck with head_dim != d_model / heads, RoPE, GQA", function()
    local mha = nn.MultiHeadAttention { d_model = 6, heads = 2, kv_heads = 1, head_dim = 4, rope = true, dtype = "float64" }
    local x = ember.randn({ 2, 3, 6 }, { dtype = "float64" })
    gradcheck.check(function(t) return mha(t, { causal = true }) end, { x })
  end)

  it("bad head_dim: an error at the caller's line", function()
    raises_here(function() nn.MultiHeadAttention { d_model = 8, heads = 2, head_dim = 0 } end,
      "MultiHeadAttention: head_dim must be a positive integer")
    raises_here(function() nn.MultiHeadAttention { d_model = 8, heads = 2, head_dim = 3, rope = true } end,
      "rope needs an even head dim, got head_dim = 3")
  end)
end)

describe("Qwen3's q_norm/k_norm: gradients reach them (float64 gradcheck)", function()
  it("the norms' weights and the input", function()
    ember.manual_seed(4)
    local m = Llama { model_type = "qwen3", vocab_size = 7, hidden_size = 6, intermediate_size = 8, num_hidden_layers = 1,
                      num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, initializer_range = 0.5 }
    m:to("float64")
    local attn = m.model.layers[1].self_attn
    local x = ember.randn({ 1, 3, 6 }, { dtype = "float64" })
    local qw, kw = attn.q_norm.weight, attn.k_norm.weight
    gradcheck.check(function(t, a, b)
      attn.q_norm.weight, attn.k_norm.weight = a, b
      return attn(t, { causal = true })
    end, { x, (qw + 0.3 * ember.randn_like(qw)):detach(), (kw - 0.2 * ember.randn_like(kw)):detach() })
  end)
end)
