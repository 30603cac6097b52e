-- What a new user coming from PyTorch 1.13 / Hugging Face tries first with
-- ember's modern-model library (issue 27): ember.models, GQA and the KV
-- cache, generate, the convolution/pooling/normalisation modules, nn.init
-- and checkpointing. Each block is a defect found by probing ember as such
-- a user; the test fails without its fix.
local ember = require "ember"
local nn = require "ember.nn"
local raises_here = require("tests.lua.helpers.parity").raises_here

describe("a KV cache filled by one attention module is refused by another", function()
  local function mha()
    return nn.MultiHeadAttention{ d_model = 16, heads = 4, kv_heads = 2, causal = true }:eval()
  end

  it("self-attention: same shapes, other weights (it used the other model's keys silently)", function()
    local a, b = mha(), mha()
    local x = ember.randn(2, 5, 16)
    ember.no_grad(function()
      local cache = {}
      a:forward_cached(x, cache)
      raises_here(function() b:forward_cached(x:narrow(2, 1, 1), cache) end,
        "MultiHeadAttention.forward_cached: this cache was filled by another module")
      -- its own module goes on with it
      assert.are.equal(6, (a:forward_cached(x:narrow(2, 1, 1), cache) and cache.len))
    end)
  end)

  it("cross-attention: a memory cached by another module is not used as this one's keys", function()
    local a, b = mha(), mha()
    local x, mem = ember.randn(2, 1, 16), ember.randn(2, 3, 16)
    ember.no_grad(function()
      local cache = {}
      a:forward_cached(x, cache, { memory = mem })
      raises_here(function() b:forward_cached(x, cache, { memory = mem }) end,
        "this cache was filled by another module")
    end)
  end)

  it("a Llama's cache given to another Llama of the same config", function()
    local Llama = require("ember.models").Llama
    local cfg = { vocab_size = 11, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2,
                  num_attention_heads = 4, num_key_value_heads = 2 }
    local m1, m2 = Llama(cfg):eval(), Llama(cfg):eval()
    local ids = ember.tensor({ { 1, 2, 3 } }, { dtype = "int64" })
    ember.no_grad(function()
      local cache = {}
      m1(ids, { cache = cache })
      raises_here(function() m2(ids:narrow(2, 1, 1), { cache = cache }) end, "filled by another module")
    end)
  end)
end)

-- the PyTorch 1.13 numbers of the blocks below (tests/gen_nn_fixtures.py, probe_models_cases)
local fixtures = dofile("tests/fixtures/nn_probe_models.lua")
local parity = require "tests.lua.helpers.parity"

describe("pooling with ceil_mode (PyTorch's option; it was refused)", function()
  local F64 = "float64"
  local makers = {
    MaxPool2d = nn.MaxPool2d, AvgPool2d = nn.AvgPool2d, MaxPool1d = nn.MaxPool1d, AvgPool1d = nn.AvgPool1d,
  }
  for _, name in ipairs { "MaxPool2d_ceil", "MaxPool2d_ceil_pad_dilated", "MaxPool2d_ceil_window_past_input",
                          "AvgPool2d_ceil_pad", "AvgPool2d_ceil_exclude_pad", "AvgPool2d_ceil_divisor",
                          "MaxPool2d_ceil_last_window_dropped", "MaxPool1d_ceil", "AvgPool1d_ceil", "AvgPool1d_ceil_exclude_pad",
                          "AvgPool1d_ceil_last_window_dropped" } do
    it(name .. ": values and input gradient as PyTorch's, float64", function()
      local c = parity.case(fixtures, name)
      local m = makers[c.config.module](c.config.kernel_size, c.config.opts)
      parity.module(m, c)
      assert.are.equal(F64, m(parity.T(c.inputs.x)).dtype)
    end)
  end

  it("float64 gradcheck of the ceil_mode windows (the overhang's -inf / divisor)", function()
    local gradcheck = require "tests.lua.helpers.gradcheck"
    local x = ember.randn({ 1, 2, 6, 7 }, { dtype = "float64" })
    local avg = nn.AvgPool2d(3, { stride = 2, padding = 1, ceil_mode = true })
    local mx = nn.MaxPool2d(3, { stride = 2, ceil_mode = true })
    gradcheck.check(function(t) return avg(t) end, { x })
    gradcheck.check(function(t) return mx(t) end, { ember.randn({ 1, 2, 6, 7 }, { dtype = "float64" }) })
  end)

  it("prints as PyTorch's (ceil_mode shown when set); a non-boolean is refused", function()
    assert.are.equal("MaxPool2d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=true)",
      tostring(nn.MaxPool2d(3, { stride = 2, ceil_mode = true })))
    assert.are.equal("AvgPool1d(kernel_size=4, stride=3, padding=2, ceil_mode=true, count_include_pad=true)",
      tostring(nn.AvgPool1d(4, { stride = 3, padding = 2, ceil_mode = true })))
    raises_here(function() local _ = nn.MaxPool2d(2, { ceil_mode = 1 }) end, "MaxPool2d: ceil_mode must be a boolean")
  end)
end)

describe("Conv1d/Conv2d take padding_mode reflect, replicate and circular (PyTorch's; refused before)", function()
  for _, name in ipairs { "Conv2d_reflect", "Conv2d_replicate_groups_dilated", "Conv2d_circular",
                          "Conv2d_same_reflect", "Conv1d_circular_stride", "Conv1d_reflect_unbatched" } do
    it(name .. ": values and gradients as PyTorch's, float64 and float32", function()
      local c = parity.case(fixtures, name)
      local cfg = c.config
      local make = nn[cfg.module]
      local opts = {}
      for k, v in pairs(cfg.opts) do opts[k] = v end
      opts.dtype = "float64"
      parity.module(make(cfg.in_channels, cfg.out_channels, cfg.kernel_size, opts), c)
      opts.dtype = nil
      parity.module_float32(make(cfg.in_channels, cfg.out_channels, cfg.kernel_size, opts), c, { tol = 1e-5 })
    end)
  end

  it("a dim of size 1 that is not padded (a {1, 3} kernel over one row) with reflect padding", function()
    local y = nn.Conv2d(2, 3, { 1, 3 }, { padding = { 0, 1 }, padding_mode = "reflect" })(ember.randn(1, 2, 1, 5))
    assert.are.same({ 1, 3, 1, 5 }, y.shape)
    y = nn.Conv2d(2, 3, { 3, 1 }, { padding = { 1, 0 }, padding_mode = "reflect" })(ember.randn(1, 2, 5, 1))
    assert.are.same({ 1, 3, 5, 1 }, y.shape)
  end)

  it("float64 gradcheck through each padding_mode", function()
    local gradcheck = require "tests.lua.helpers.gradcheck"
    for _, mode in ipairs { "reflect", "replicate", "circular" } do
      local conv = nn.Conv2d(2, 2, 3, { padding = { 1, 2 }, padding_mode = mode, dtype = "float64" })
      gradcheck.check(function(x, w) conv.weight = w return conv(x) end,
        { ember.randn({ 1, 2, 4, 5 }, { dtype = "float64" }), conv.weight:detach():clone() })
    end
  end)

  it("prints padding_mode as PyTorch; bad modes and too much reflect padding are errors naming the module", function()
    assert.are.equal("Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), padding_mode=circular)",
      tostring(nn.Conv2d(3, 4, 3, { padding = 1, padding_mode = "circular" })))
    raises_here(function() local _ = nn.Conv1d(3, 4, 3, { padding_mode = "mirror" }) end,
      'Conv1d: padding_mode must be "zeros", "reflect", "replicate" or "circular", got "mirror"')
    raises_here(function() local _ = nn.ConvTranspose2d(3, 4, 3, { padding_mode = "reflect" }) end,
      'ConvTranspose2d: only padding_mode "zeros" is supported')
    local conv = nn.Conv2d(3, 4, 3, { padding = 3, padding_mode = "reflect" })
    raises_here(function() conv(ember.randn(1, 3, 3, 8)) end,
      'Conv2d.forward: padding_mode="reflect" pads 3 and 3, more than the 3 elements along dim 3')
  end)
end)

describe("nn.init as a PyTorch user calls it", function()
  local init = nn.init

  -- the mean of N(mean, std^2) truncated to [a, b]
  local function truncated_mean(mean, std, a, b)
    local function pdf(z) return math.exp(-z * z / 2) / math.sqrt(2 * math.pi) end
    local function cdf(z) return (1 + ember.erf(ember.tensor(z / math.sqrt(2), { dtype = "float64" })):item()) / 2 end
    local za, zb = (a - mean) / std, (b - mean) / std
    return mean + std * (pdf(za) - pdf(zb)) / (cdf(zb) - cdf(za))
  end

  it("trunc_normal_ on an interval in a tail (PyTorch's inverse-CDF draw takes it; rejection gave up)", function()
    ember.manual_seed(11)
    for _, c in ipairs { { 0, 1, 3, 4 }, { 1, 2, -9, -7 }, { 0, 1, 6, 7 }, { 0, 0.02, 0.05, 0.1 }, { 0, 1, -2, 2 } } do
      local t = init.trunc_normal_(ember.empty({ 20000 }, { dtype = "float64" }), table.unpack(c))
      assert.is_true(t:min():item() >= c[3] and t:max():item() <= c[4])
      local want = truncated_mean(table.unpack(c))
      local got = t:mean():item()
      assert(math.abs(got - want) < 0.02 * c[2], ("trunc_normal_(%g, %g, %g, %g): mean %g, want %g"):format(
        c[1], c[2], c[3], c[4], got, want))
    end
    local f = init.trunc_normal_(ember.empty({ 1000 }), 0, 1, 3, 4)
    assert.are.equal("float32", f.dtype)
    assert.is_true(f:min():item() >= 3 and f:max():item() <= 4)
  end)

  it("takes PyTorch's keyword arguments as a table, as the kaiming functions do", function()
    ember.manual_seed(3)
    local t = ember.empty({ 200, 300 }, { dtype = "float64" })
    local function std(x) return x:std():item() end
    assert(math.abs(std(init.trunc_normal_(t, { std = 0.02 })) - 0.02) < 0.002)
    assert.is_true(t:abs():max():item() <= 2)
    init.trunc_normal_(t, { mean = 1, std = 1, a = 0.5, b = 1.5 })
    assert.is_true(t:min():item() >= 0.5 and t:max():item() <= 1.5)
    init.normal_(t, { mean = 2, std = 0.5 })
    assert(math.abs(t:mean():item() - 2) < 0.01 and math.abs(std(t) - 0.5) < 0.01)
    init.uniform_(t, { a = -0.1, b = 0.1 })
    assert.is_true(t:min():item() >= -0.1 and t:max():item() <= 0.1 and t:min():item() < -0.09)
    local bound = 2 * math.sqrt(6 / 500)
    init.xavier_uniform_(t, { gain = 2 })
    assert.is_true(t:abs():max():item() <= bound and t:abs():max():item() > 0.95 * bound)
    assert(math.abs(std(init.xavier_normal_(t, { gain = 3 })) - 3 * math.sqrt(2 / 500)) < 0.01)
    local o = init.orthogonal_(ember.empty({ 3, 5 }, { dtype = "float64" }), { gain = 2 })
    assert.is_true(ember.allclose(o:matmul(o:t()), ember.eye(3, { dtype = "float64" }) * 4, 1e-10, 1e-10))
    init.constant_(t, { val = 0.25 })
    assert.are.equal(0.25, t:max():item())
    raises_here(function() init.trunc_normal_(t, { sd = 0.02 }) end,
      "nn.init.trunc_normal_: unknown option 'sd' (mean, std, a, b)")
    raises_here(function() init.xavier_uniform_(t, { gain = "2" }) end, "nn.init.xavier_uniform_: gain must be a number")
  end)
end)

describe("generate refuses prompts it would continue wrongly", function()
  local generate = require "ember.generate"
  local Llama = require("ember.models").Llama
  local model = Llama{ vocab_size = 11, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 1,
                       num_attention_heads = 4, num_key_value_heads = 2 }
  local prompt = ember.tensor({ { 3, 4, 1 }, { 5, 6, 7 } }, { dtype = "int64" })

  it("right padding (the next token would follow the pads: Hugging Face warns, ember continued silently)", function()
    local right = ember.tensor({ { false, false, true }, { false, false, false } })
    raises_here(function() generate.generate(model, prompt, { max_new_tokens = 2, prompt_padding_mask = right }) end,
      "generate: prompt_padding_mask row 1 has padding after a token (position 3): pad prompts on the left")
    local gap = ember.tensor({ { true, false, true }, { false, false, false } })
    raises_here(function() generate.generate(model, prompt, { prompt_padding_mask = gap, use_cache = false }) end,
      "row 1 has padding after a token (position 3)")
    -- left padding is what it takes
    local left = ember.tensor({ { true, false, false }, { false, false, false } })
    assert.are.same({ 2, 5 }, generate.generate(model, prompt, { max_new_tokens = 2, prompt_padding_mask = left }).shape)
  end)

  it("an empty prompt is named as such (the message spoke of the model's logits)", function()
    raises_here(function() generate.generate(model, ember.zeros({ 1, 0 }, { dtype = "int64" })) end,
      "generate: prompt must hold at least one token per row (a BOS id), got int64 [1, 0]")
  end)
end)

describe("a wrong input dtype is named by the module the user called", function()
  it("Conv2d/Conv1d: another float dtype than the weight, or an integer input (ember.conv2d was named)", function()
    local conv = nn.Conv2d(3, 4, 3)
    raises_here(function() conv(ember.randn(1, 3, 5, 5, { dtype = "float64" })) end,
      "Conv2d.forward: the input is float64 but the module's weight is float32")
    raises_here(function() conv(ember.randn(1, 3, 5, 5):bfloat16()) end,
      "Conv2d.forward: the input is bfloat16 but the module's weight is float32")
    raises_here(function() conv(ember.ones(1, 3, 5, 5, { dtype = "int64" })) end,
      "Conv2d.forward: expected a floating-point input, got int64")
    raises_here(function() nn.Conv1d(3, 4, 3)(ember.ones(2, 3, 5, { dtype = "int64" })) end,
      "Conv1d.forward: expected a floating-point input, got int64")
    -- under autocast a bfloat16 input meets the float32 weight in bfloat16 products, as before
    local y = ember.autocast("bfloat16", function() return conv(ember.randn(1, 3, 5, 5):bfloat16()) end)
    assert.are.equal("bfloat16", y.dtype)
  end)

  it("BatchNorm2d, GroupNorm, AdaptiveAvgPool2d: an integer input (ember.mean was named)", function()
    local x = ember.ones(2, 4, 3, 3, { dtype = "int64" })
    raises_here(function() nn.BatchNorm2d(4)(x) end, "BatchNorm2d.forward: expected a floating-point input, got int64")
    raises_here(function() nn.GroupNorm(2, 4)(x) end, "GroupNorm.forward: expected a floating-point input, got int64")
    raises_here(function() nn.AdaptiveAvgPool2d(2)(x) end,
      "AdaptiveAvgPool2d.forward: expected a floating-point input, got int64")
  end)
end)

describe("Llama: activation checkpointing per decoder layer (Hugging Face's gradient_checkpointing_enable)", function()
  local Llama = require("ember.models").Llama
  local cfg = { vocab_size = 17, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2,
                num_attention_heads = 4, num_key_value_heads = 2, tie_word_embeddings = true }

  local function grads(on)
    ember.manual_seed(5)
    local m = Llama(cfg)
    if on then assert.are.equal(m, m:gradient_checkpointing_enable()) end
    -- count the MLP's runs: a checkpointed layer runs it again in the backward
    local runs, mlp = 0, m.model.layers[1].mlp
    local f = mlp.forward
    mlp.forward = function(...) runs = runs + 1 return f(...) end
    local ids = ember.tensor({ { 1, 5, 9, 2, 4 }, { 7, 3, 3, 8, 16 } }, { dtype = "int64" })
    local pad = ember.tensor({ { true, false, false, false, false }, { false, false, false, false, false } })
    local logits = m(ids, { key_padding_mask = pad })
    logits:pow(2):mean():backward()
    local out = {}
    for k, p in pairs(m:named_parameters()) do out[k] = p.grad end
    return out, runs, m
  end

  it("recomputes each layer in the backward; gradients equal the run without, bit for bit", function()
    local g0, runs0 = grads(false)
    local g1, runs1, m = grads(true)
    assert.are.equal(1, runs0)
    assert.are.equal(2, runs1)
    for k, g in pairs(g0) do assert.is_true(g:equal(g1[k]), k) end
    -- eval, no_grad and the KV cache run the layers once, as without it
    m:gradient_checkpointing_disable()
    assert.is_false(m.model.gradient_checkpointing)
    local r = require("ember.generate").generate(m:gradient_checkpointing_enable(),
      ember.tensor({ { 1, 2 } }, { dtype = "int64" }), { max_new_tokens = 3 })
    assert.are.same({ 1, 5 }, r.shape)
  end)
end)

describe("Transformer layers: boolean options take booleans", function()
  it("checkpoint = \"yes\" or norm_first = 1 were taken as true silently", function()
    raises_here(function() nn.TransformerEncoderLayer(16, 4, { checkpoint = "yes" }) end,
      "nn.TransformerEncoderLayer: checkpoint must be a boolean, got string")
    raises_here(function() nn.TransformerDecoderLayer(16, 4, { norm_first = 1 }) end,
      "nn.TransformerDecoderLayer: norm_first must be a boolean, got number")
    raises_here(function() nn.TransformerEncoder(16, 4, 2, { checkpoint = "no" }) end, "checkpoint must be a boolean")
    assert.is_true(nn.TransformerEncoderLayer(16, 4, { checkpoint = true, norm_first = false }).checkpoint)
  end)
end)

describe("Llama.from_pretrained: a Hugging Face model folder (config.json and the safetensors)", function()
  local Llama = require("ember.models").Llama
  local tmpdir = require "tests.lua.helpers.tmpdir"
  local function write(path, text)
    local f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
  end
  -- config.json as transformers writes it for a LlamaForCausalLM (null, nested lists, escapes)
  local CONFIG = [[{
  "_name_or_path": "tiny-llama\/test \"model\"",
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": [1, 2],
  "hidden_act": "silu", "hidden_size": 16, "initializer_range": 0.02, "intermediate_size": 24,
  "max_position_embeddings": 2048, "mlp_bias": false, "model_type": "llama", "num_attention_heads": 4,
  "num_hidden_layers": 2, "num_key_value_heads": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": null, "rope_theta": 500000.0, "tie_word_embeddings": %s, "torch_dtype": "bfloat16",
  "transformers_version": "4.44.0", "use_cache": true, "vocab_size": 19
}]]
  local cfg = { vocab_size = 19, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2, num_attention_heads = 4,
                num_key_value_heads = 2, rms_norm_eps = 1e-5, rope_theta = 500000.0 }
  local ids = ember.tensor({ { 1, 5, 9, 2 }, { 7, 3, 3, 18 } }, { dtype = "int64" })

  it("one model.safetensors, untied and tied: the config's sizes, eps and theta; the same logits", function()
    for _, tied in ipairs { false, true } do
      ember.manual_seed(8)
      local c = {}
      for k, v in pairs(cfg) do c[k] = v end
      c.tie_word_embeddings = tied
      local ref = Llama(c):eval()
      local dir = tmpdir()
      ref:save(dir .. "/model.safetensors")
      write(dir .. "/config.json", CONFIG:format(tostring(tied)))
      local m = Llama.from_pretrained(dir)
      assert.is_false(m.training)
      assert.are.equal(1e-5, m.config.rms_norm_eps)
      assert.are.equal(500000.0, m.config.rope_theta)
      assert.are.equal(tied, m.config.tie_word_embeddings)
      assert.is_true(m(ids):equal(ref(ids)))
      -- overrides win over config.json's
      assert.are.equal(1e-6, Llama.from_pretrained(dir .. "/", { rms_norm_eps = 1e-6 }).config.rms_norm_eps)
    end
  end)

  it("a sharded checkpoint through model.safetensors.index.json", function()
    ember.manual_seed(9)
    local ref = Llama(cfg):eval()
    local dir = tmpdir()
    local sd = ref:state_dict()
    local shards, map = { {}, {} }, {}
    for k, v in pairs(sd) do
      local i = k:find("layers.1.", 1, true) and 2 or 1
      shards[i][k] = v
      map[#map + 1] = ('"%s": "model-0000%d-of-00002.safetensors"'):format(k, i)
    end
    for i = 1, 2 do
      require("ember.checkpoint").save_tensors(("%s/model-0000%d-of-00002.safetensors"):format(dir, i), shards[i])
    end
    write(dir .. "/model.safetensors.index.json",
      '{"metadata": {"total_size": 1234}, "weight_map": {' .. table.concat(map, ", ") .. "}}")
    write(dir .. "/config.json", CONFIG:format("false"))
    assert.is_true(Llama.from_pretrained(dir)(ids):equal(ref(ids)))
  end)

  it("overrides win; a missing folder, file or bad JSON is an error naming the file at the caller's line", function()
    local dir = tmpdir()
    raises_here(function() Llama.from_pretrained(dir) end, "Llama.from_pretrained: cannot read '" .. dir .. "/config.json'")
    write(dir .. "/config.json", '{"hidden_size": 16,}')
    raises_here(function() Llama.from_pretrained(dir) end, "Llama.from_pretrained: '" .. dir .. "/config.json': bad JSON")
    write(dir .. "/config.json", CONFIG:format("false"))
    raises_here(function() Llama.from_pretrained(dir) end, "has no model.safetensors, pytorch_model.bin or their sharded index")
    write(dir .. "/pytorch_model.bin", "PK")
    raises_here(function() Llama.from_pretrained(dir) end, "cannot read '" .. dir .. "/pytorch_model.bin'")
    os.remove(dir .. "/pytorch_model.bin")
    write(dir .. "/config.json", CONFIG:format("false"):gsub('"rope_scaling": null', '"rope_scaling": {"rope_type": "llama3"}'))
    raises_here(function() Llama.from_pretrained(dir) end, "config.rope_scaling of rope_type 'llama3' needs factor")
  end)
end)

describe("ModuleList and Sequential indices as a PyTorch user writes them", function()
  it("list[0] is an error saying indices are 1-based (it gave nil: 'attempt to call a nil value' later)", function()
    local layers = nn.ModuleList { nn.Linear(2, 2), nn.ReLU() }
    raises_here(function() return layers[0](ember.randn(1, 2)) end,
      "ModuleList: index 0: indices are 1-based (list[1] is the first, list[-1] the last;")
    local seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    raises_here(function() return seq[0] end, "Sequential: index 0: indices are 1-based (seq[1] is the first, seq[-1] the last;")
    -- ipairs still ends at the end
    local n = 0
    for _ in ipairs(layers) do n = n + 1 end
    assert.are.equal(2, n)
    assert.is_nil(layers[3])
  end)

  it("seq[-1] is the last module, as PyTorch's model[-1] and as ModuleList's (it gave nil)", function()
    local seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert.are.equal(seq[3], seq[-1])
    assert.are.equal(seq[1], seq[-3])
    assert.is_nil(seq[-4])
    assert.is_nil(seq[4])
  end)
end)

describe("modules whose arguments are all optional take PyTorch's keywords as a table", function()
  it("nn.Flatten{start_dim = 2}, nn.Softmax{dim = -1}, nn.GELU{approximate = 'tanh'}, ... (refused: 'got table')", function()
    local x = ember.randn(2, 3, 4, 5)
    assert.are.same({ 2, 3, 20 }, nn.Flatten{ start_dim = 3 }(x).shape)
    assert.are.same({ 2, 12, 5 }, nn.Flatten{ start_dim = 2, end_dim = 3 }(x).shape)
    assert.are.same({ 2, 60 }, nn.Flatten{}(x).shape)
    assert.is_true(nn.Softmax{ dim = 2 }(x):equal(nn.Softmax(2)(x)))
    assert.is_true(nn.LogSoftmax{ dim = -1 }(x):equal(nn.LogSoftmax(-1)(x)))
    assert.are.equal("tanh", nn.GELU{ approximate = "tanh" }.approximate)
    assert.are.equal(0.2, nn.LeakyReLU{ negative_slope = 0.2, inplace = true }.negative_slope)
    assert.are.equal(0.5, nn.ELU{ alpha = 0.5 }.alpha)
    local h = nn.Hardtanh{ min_val = -2, max_val = 3 }
    assert.are.same({ -2, 3 }, { h.min_val, h.max_val })
    assert.are.same({ 2, 3, 2, 10 }, nn.Unflatten{ dim = 3, unflattened_size = { 2, 10 } }(ember.randn(2, 3, 20)).shape)
    raises_here(function() local _ = nn.Flatten{ start = 2 } end, "nn.Flatten: unknown option 'start' (options: end_dim, start_dim)")
    raises_here(function() local _ = nn.Softmax{ axis = 1 } end, "nn.Softmax: unknown option 'axis'")
  end)
end)

describe("Module:isinstance, for PyTorch's init pattern model.apply(fn) with isinstance(m, nn.Linear)", function()
  it("walks the class chain (a subclass is an instance of its parent); a list is any of them", function()
    local Llama = require("ember.models").Llama
    local m = Llama{ vocab_size = 11, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 1,
                     num_attention_heads = 4 }
    local attn = m.model.layers[1].self_attn
    assert.is_true(attn:isinstance(nn.MultiHeadAttention))
    assert.is_true(attn:isinstance(nn.Module))
    assert.is_false(attn:isinstance(nn.Linear))
    assert.is_true(m.lm_head:isinstance({ nn.Conv2d, nn.Linear }))
    -- Hugging Face's _init_weights, written as a PyTorch user would
    local n = 0
    m:apply(function(mod)
      if mod:isinstance(nn.Linear) then
        nn.init.zeros_(mod.weight)
        n = n + 1
      elseif mod:isinstance(nn.Embedding) then
        nn.init.ones_(mod.weight)
      end
    end)
    assert.are.equal(8, n) -- q, k, v, o, gate, up, down and lm_head
    raises_here(function() attn:isinstance("Linear") end, "isinstance: expected a module class")
  end)
end)

describe("Llama:save writes the metadata transformers requires", function()
  it("{format = 'pt'} as save_pretrained does (transformers 4.3x-4.4x fail on a file without it); the user's kept", function()
    local Llama = require("ember.models").Llama
    local m = Llama{ vocab_size = 11, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 1, num_attention_heads = 4 }
    local dir = require "tests.lua.helpers.tmpdir"()
    m:save(dir .. "/a.safetensors")
    local _, meta = require("ember.checkpoint").load_tensors(dir .. "/a.safetensors")
    assert.are.same({ format = "pt" }, meta)
    m:save(dir .. "/b.safetensors", { note = "run 3" })
    _, meta = require("ember.checkpoint").load_tensors(dir .. "/b.safetensors")
    assert.are.same({ format = "pt", note = "run 3" }, meta)
  end)
end)

describe("Llama:save_pretrained(folder): what from_pretrained and transformers read", function()
  it("config.json with LlamaConfig's keys and model.safetensors; from_pretrained gives the same logits", function()
    local Llama = require("ember.models").Llama
    ember.manual_seed(12)
    local m = Llama{ vocab_size = 13, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2,
                     num_attention_heads = 4, num_key_value_heads = 1, rms_norm_eps = 1e-5, rope_theta = 500000.0,
                     tie_word_embeddings = true }
    local dir = require "tests.lua.helpers.tmpdir"() .. "/out model" -- made if missing, spaces and all
    assert.are.equal(m, m:save_pretrained(dir))
    local f = assert(io.open(dir .. "/config.json"))
    local cfg = ember._json_decode(f:read("a"))
    f:close()
    assert.are.same({ "LlamaForCausalLM" }, cfg.architectures)
    assert.are.equal("llama", cfg.model_type)
    assert.are.equal("silu", cfg.hidden_act)
    assert.are.equal(1e-5, cfg.rms_norm_eps)
    assert.are.equal(1, cfg.num_key_value_heads)
    assert.is_true(cfg.tie_word_embeddings)
    assert.are.equal("float32", cfg.torch_dtype)
    local ids = ember.tensor({ { 1, 5, 9, 2 } }, { dtype = "int64" })
    assert.is_true(Llama.from_pretrained(dir)(ids):equal(m:eval()(ids)))
  end)
end)

describe("generate: min_new_tokens, as Hugging Face's (no eos before it)", function()
  local generate = require "ember.generate"
  local Llama = require("ember.models").Llama

  it("the eos ids cannot be picked before min_new_tokens new tokens; then greedy as before", function()
    ember.manual_seed(21)
    local m = Llama{ vocab_size = 9, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 1,
                     num_attention_heads = 4 }
    local prompt = ember.tensor({ { 1, 2, 3 } }, { dtype = "int64" })
    -- the first greedy token as eos: without min_new_tokens generation stops at once
    local first = generate.generate(m, prompt, { max_new_tokens = 1 })[1][4]:item()
    local stopped = generate.generate(m, prompt, { max_new_tokens = 6, eos_id = first })
    assert.are.same({ 1, 4 }, stopped.shape)
    local out, logits = generate.generate(m, prompt, { max_new_tokens = 6, eos_id = first, min_new_tokens = 3,
                                                       return_logits = true })
    local row = out[1]:totable()
    assert.is_true(#row >= 6)
    for j = 4, 6 do assert.are_not.equal(first, row[j]) end
    -- the tokens picked are the best of the others
    local l1 = logits[1][1]:clone()
    l1[first] = -math.huge
    assert.are.equal(l1:argmax():item(), row[4])
    raises_here(function() generate.generate(m, prompt, { min_new_tokens = -1 }) end,
      "generate: min_new_tokens must be an integer >= 0, got -1")
  end)
end)

describe("empty batches and impossible sizes", function()
  it("GroupNorm of an empty batch is empty, as PyTorch's (ember.reshape failed on [0, G, -1])", function()
    local gn = nn.GroupNorm(1, 3)
    assert.are.same({ 0, 3, 4 }, gn(ember.randn(0, 3, 4)).shape)
    assert.are.same({ 0, 3, 2, 2 }, nn.GroupNorm(3, 3)(ember.randn(0, 3, 2, 2)).shape)
  end)

  it("BatchNorm and InstanceNorm of an empty batch are empty, as PyTorch's (training counts the batch, stats unchanged)", function()
    local bn = nn.BatchNorm2d(3)
    local x = ember.randn(0, 3, 4, 4):requires_grad_()
    local y = bn(x)
    assert.are.same({ 0, 3, 4, 4 }, y.shape)
    y:sum():backward()
    assert.are.equal(1, bn.num_batches_tracked:item())
    assert.is_true(bn.running_mean:equal(ember.zeros(3)) and bn.running_var:equal(ember.ones(3)))
    assert.are.same({ 0, 3 }, nn.BatchNorm1d(3)(ember.randn(0, 3)).shape)
    assert.are.same({ 0, 3, 4, 4 }, nn.BatchNorm2d(3, { track_running_stats = false }):eval()(ember.randn(0, 3, 4, 4)).shape)
    assert.are.same({ 0, 3, 4, 4 }, nn.InstanceNorm2d(3)(ember.randn(0, 3, 4, 4)).shape)
    -- one value per channel is still refused, as PyTorch
    raises_here(function() bn(ember.randn(1, 3, 1, 1)) end, "BatchNorm2d.forward: expected more than 1 value per channel")
  end)

  it("RMSNorm over two dims of an empty batch on the composed route (mixed dtypes): empty too", function()
    assert.are.same({ 0, 2, 4 }, nn.RMSNorm({ 2, 4 })(ember.randn(0, 2, 4):bfloat16()).shape)
    assert.are.same({ 0, 2, 4 }, nn.RMSNorm({ 2, 4 }, { dtype = "float64" })(ember.randn(0, 2, 4)).shape)
  end)

  it("a constructor whose parameters cannot be allocated fails at the caller's line (it named _conv.lua)", function()
    raises_here(function() local _ = nn.Conv2d(1, 1, 1000000) end, "cannot allocate a tensor of shape [1, 1, 1000000, 1000000]")
    raises_here(function() local _ = nn.Linear(1000000, 10000000) end, "cannot allocate a tensor of shape [10000000, 1000000]")
  end)
end)

describe("Llama: checkpoints that carry rotary_emb.inv_freq (older transformers saved the buffer)", function()
  local Llama = require("ember.models").Llama
  local ck = require "ember.checkpoint"
  local cfg = { vocab_size = 13, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2, num_attention_heads = 4,
                rope_theta = 10000.0 }

  local function with_inv_freq(theta)
    ember.manual_seed(4)
    local m = Llama(cfg):eval()
    local sd = m:state_dict()
    local hd = 4
    local inv = {}
    for i = 0, hd / 2 - 1 do inv[#inv + 1] = 1 / theta ^ (2 * i / hd) end
    for l = 0, 1 do sd[("model.layers.%d.self_attn.rotary_emb.inv_freq"):format(l)] = ember.tensor(inv) end
    local path = os.tmpname()
    ck.save_tensors(path, sd)
    return m, path
  end

  it("load as Hugging Face does (it ignores them: ember refused the unexpected keys)", function()
    local m, path = with_inv_freq(10000.0)
    local ids = ember.tensor({ { 1, 2, 3 } }, { dtype = "int64" })
    assert.is_true(Llama.from_safetensors(path, cfg)(ids):equal(m(ids)))
    os.remove(path)
  end)

  it("a buffer that disagrees with rope_theta is an error naming both (the file says which theta it was trained with)", function()
    local _, path = with_inv_freq(500000.0)
    raises_here(function() Llama.from_safetensors(path, cfg) end,
      "rotary_emb.inv_freq' is RoPE with rope_theta = 500000, but the config's rope_theta is 10000")
    os.remove(path)
  end)
end)

describe("nn.AdaptiveMaxPool2d and nn.AdaptiveMaxPool1d (PyTorch's; missing beside the adaptive average)", function()
  local makers = { AdaptiveMaxPool2d = function(c) return nn.AdaptiveMaxPool2d(c.config.output_size) end,
                   AdaptiveMaxPool1d = function(c) return nn.AdaptiveMaxPool1d(c.config.output_size) end }
  for _, name in ipairs { "AdaptiveMaxPool2d_3x5", "AdaptiveMaxPool2d_1_unbatched", "AdaptiveMaxPool2d_upsample",
                          "AdaptiveMaxPool1d_4" } do
    it(name .. ": values and input gradient as PyTorch's", function()
      local c = parity.case(fixtures, name)
      parity.module(makers[c.config.module](c), c)
    end)
  end

  it("gradcheck, printing, errors naming the module", function()
    local gradcheck = require "tests.lua.helpers.gradcheck"
    local m = nn.AdaptiveMaxPool2d({ 2, 3 })
    gradcheck.check(function(x) return m(x) end, { ember.randn({ 1, 2, 5, 7 }, { dtype = "float64" }) })
    assert.are.equal("AdaptiveMaxPool2d(output_size=(2, 3))", tostring(m))
    assert.are.equal("AdaptiveMaxPool1d(output_size=4)", tostring(nn.AdaptiveMaxPool1d(4)))
    raises_here(function() local _ = nn.AdaptiveMaxPool2d(0) end, "AdaptiveMaxPool2d: output_size must be a positive integer")
    raises_here(function() local _ = nn.AdaptiveMaxPool2d(2, { return_indice = true }) end,
      "AdaptiveMaxPool2d: unknown option 'return_indice'") -- return_indices works (76b5468)
    raises_here(function() m(ember.randn(4, 4)) end, "AdaptiveMaxPool2d.forward: expected an input [N, C, H, W] or [C, H, W]")
    raises_here(function() nn.AdaptiveMaxPool1d(2)(ember.randn(1, 2, 3, 4)) end,
      "AdaptiveMaxPool1d.forward: expected an input [N, C, L] or [C, L]")
  end)
end)

describe("Llama's call options: Hugging Face's names say what to write instead", function()
  it("labels (the loss) and past_key_values (the cache)", function()
    local Llama = require("ember.models").Llama
    local m = Llama{ vocab_size = 11, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 1, num_attention_heads = 4 }
    local ids = ember.tensor({ { 1, 2, 3 } }, { dtype = "int64" })
    raises_here(function() m(ids, { labels = ids }) end,
      "Llama.forward: unknown option 'labels': ember's Llama returns the logits; Hugging Face's loss is")
    raises_here(function() m(ids, { past_key_values = {} }) end,
      "Llama.forward: unknown option 'past_key_values': ember's KV cache is the option cache")
  end)
end)

describe("adaptive pools: PyTorch's None in output_size (keep that dim) as false or nil", function()
  it("{false, 3} and {nil, 3} keep H, {2, false} W; printed as PyTorch prints None; {2} is still refused", function()
    local x = ember.randn(2, 3, 5, 7, { dtype = "float64" })
    local a = nn.AdaptiveAvgPool2d({ false, 3 })
    assert.are.same({ 2, 3, 5, 3 }, a(x).shape)
    assert.is_true(a(x):equal(nn.AdaptiveAvgPool2d({ 5, 3 })(x)))
    assert.are.same({ 2, 3, 2, 7 }, nn.AdaptiveMaxPool2d({ 2, false })(x).shape)
    assert.are.same({ 2, 3, 5, 3 }, nn.AdaptiveMaxPool2d({ nil, 3 })(x).shape)
    assert.are.equal("AdaptiveAvgPool2d(output_size=(None, 3))", tostring(a))
    raises_here(function() local _ = nn.AdaptiveAvgPool2d({ 0, 3 }) end, "AdaptiveAvgPool2d: output_size must be")
    raises_here(function() local _ = nn.AdaptiveAvgPool2d({ 2 }) end, "AdaptiveAvgPool2d: output_size must be")
  end)
end)

describe("nn.FeedForward (gated) loads Hugging Face's and Meta's MLP names, as its doc says", function()
  it("gate_proj/up_proj/down_proj and w1/w3/w2 go to linear1/linear3/linear2 (they were 'unexpected')", function()
    local w1, w3, w2 = ember.randn(6, 4), ember.randn(6, 4), ember.randn(4, 6)
    local x = ember.randn(2, 4)
    local want = (x:matmul(w1:t()):silu() * x:matmul(w3:t())):matmul(w2:t())
    for _, names in ipairs { { "gate_proj", "up_proj", "down_proj" }, { "w1", "w3", "w2" } } do
      local ff = nn.FeedForward(4, 6, { activation = "swiglu", bias = false })
      ff:load_state_dict({ [names[1] .. ".weight"] = w1, [names[2] .. ".weight"] = w3, [names[3] .. ".weight"] = w2 })
      assert.is_true(ember.allclose(ff(x), want, 1e-5, 1e-5), names[1])
    end
    -- inside a model, at any depth
    local m = nn.Sequential(nn.FeedForward(4, 6, { activation = "swiglu", bias = false }))
    m:load_state_dict({ ["0.gate_proj.weight"] = w1, ["0.up_proj.weight"] = w3, ["0.down_proj.weight"] = w2 })
    assert.is_true(ember.allclose(m(x), want, 1e-5, 1e-5))
  end)
end)

describe("Llama:generate, as Hugging Face's model.generate", function()
  it("is ember.generate on the model; its errors at the caller's line", function()
    local Llama = require("ember.models").Llama
    ember.manual_seed(30)
    local m = Llama{ vocab_size = 13, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 1, num_attention_heads = 4 }
    local ids = ember.tensor({ { 1, 2, 3 } }, { dtype = "int64" })
    assert.is_true(m:generate(ids, { max_new_tokens = 5 }):equal(require("ember.generate").generate(m, ids, { max_new_tokens = 5 })))
    raises_here(function() m:generate(ids, { top_q = 1 }) end, "generate: unknown option 'top_q'")
  end)
end)

describe("Llama:generate stops at the config's eos_token_id, as Hugging Face's generation_config", function()
  local Llama = require("ember.models").Llama
  local cfg = { vocab_size = 13, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 1, num_attention_heads = 4 }

  it("eos_token_id (Hugging Face's 0-based id) is eos_id = id + 1 unless the call gives one", function()
    ember.manual_seed(31)
    local m = Llama(cfg)
    local ids = ember.tensor({ { 1, 2, 3 } }, { dtype = "int64" })
    local free = m:generate(ids, { max_new_tokens = 6 })
    local first = free[1][4]:item()
    local c = {}
    for k, v in pairs(cfg) do c[k] = v end
    c.eos_token_id = first - 1 -- as config.json writes it
    local m2 = Llama(c)
    m2:load_state_dict(m:state_dict())
    assert.are.same({ 1, 4 }, m2:generate(ids, { max_new_tokens = 6 }).shape)
    -- a call's eos_id wins over the config's
    assert.is_true(m2:generate(ids, { max_new_tokens = 6, eos_id = 13 }):equal(
      require("ember.generate").generate(m, ids, { max_new_tokens = 6, eos_id = 13 })))
    c.eos_token_id = { 12, first - 1 } -- a list, as Llama 3's
    assert.are.same({ 1, 4 }, Llama(c):load_state_dict(m:state_dict()):generate(ids, { max_new_tokens = 6 }).shape)
    c.eos_token_id = -1
    raises_here(function() Llama(c) end, "Llama: config.eos_token_id must be a token id >= 0")
  end)
end)

describe("nn.Embedding names itself for bad ids (the error named ember.embedding; a number crashed in Lua)", function()
  it("out of range (0-based ids from PyTorch), a number, a float tensor", function()
    local emb = nn.Embedding(11, 4)
    raises_here(function() emb(ember.tensor({ { 0, 2 } }, { dtype = "int64" })) end,
      "Embedding.forward: id 0 at {1, 1} is out of range 1..11 (1-based")
    raises_here(function() emb(5) end, "Embedding.forward: expected an int64 tensor of ids, got number")
    raises_here(function() emb(ember.tensor({ 1, 2 })) end, "Embedding.forward: ids must be int64 (1-based), got float32")
    local Llama = require("ember.models").Llama
    local m = Llama{ vocab_size = 11, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 1, num_attention_heads = 4 }
    raises_here(function() m(ember.tensor({ { 12 } }, { dtype = "int64" })) end, "Embedding.forward: id 12 at {1, 1} is out of range 1..11")
  end)
end)

describe("activation and norm modules given something that is not a tensor", function()
  it("name themselves (ReLU, GELU, LayerNorm, Dropout failed as 'attempt to index a number value')", function()
    for name, m in pairs { ReLU = nn.ReLU(), GELU = nn.GELU(), LayerNorm = nn.LayerNorm(4), Dropout = nn.Dropout(0.1) } do
      raises_here(function() m(5) end, name .. ".forward: expected a tensor, got number")
      raises_here(function() m({}) end, name .. ".forward: expected a tensor, got table")
    end
  end)
end)

describe("generate: top_k = 0 is no top-k filtering, as Hugging Face's (its nucleus examples pass top_k=0)", function()
  it("samples as without top_k (it was refused: 'top_k must be a positive integer')", function()
    local generate = require "ember.generate"
    local logits = ember.tensor({ { 2.0, 1.0, 0.5, 0.0, -1.0 } }):expand(64, 5):contiguous()
    ember.manual_seed(40)
    local a = generate.pick(logits, { strategy = "sample", top_k = 0, top_p = 0.9 })
    ember.manual_seed(40)
    local b = generate.pick(logits, { strategy = "sample", top_p = 0.9 })
    assert.is_true(a:equal(b))
    raises_here(function() generate.pick(logits, { strategy = "sample", top_k = -1 }) end,
      "generate: top_k must be an integer >= 0 (0: no top-k filtering), got -1")
  end)
end)

describe("generate: temperature = 0 with greedy decoding is allowed (ignored), as Hugging Face's", function()
  it("greedy takes it (it was refused); sampling refuses it and points at greedy", function()
    local generate = require "ember.generate"
    local logits = ember.tensor({ { 0.5, 2.0, -1.0 } })
    assert.are.equal(2, generate.pick(logits, { temperature = 0 })[1][1]:item())
    raises_here(function() generate.pick(logits, { strategy = "sample", temperature = 0 }) end,
      "generate: temperature must be > 0 when sampling, got 0 (for greedy decoding: strategy = \"greedy\")")
    raises_here(function() generate.pick(logits, { temperature = -1 }) end, "generate: temperature must be")
  end)
end)

describe("ViT{checkpoint = true}: its encoder layers checkpointed (the layers' option was out of reach)", function()
  it("recomputes each layer in the backward; gradients equal the run without, bit for bit", function()
    local ViT = require("ember.models").ViT
    local function run(ck)
      ember.manual_seed(50)
      local m = ViT{ image_size = 8, patch_size = 4, in_channels = 1, num_classes = 3, hidden_dim = 16, num_layers = 2,
                     num_heads = 2, mlp_dim = 32, dropout = 0.1, checkpoint = ck }
      local runs, ff = 0, m.layers[1].ff
      local f = ff.forward
      ff.forward = function(...) runs = runs + 1 return f(...) end
      ember.manual_seed(51)
      m(ember.randn(2, 1, 8, 8)):pow(2):sum():backward()
      local g = {}
      for k, p in pairs(m:named_parameters()) do g[k] = p.grad end
      return g, runs
    end
    local g0, r0 = run(nil)
    local g1, r1 = run(true)
    assert.are.same({ 1, 2 }, { r0, r1 })
    for k, g in pairs(g0) do assert.is_true(g:equal(g1[k]), k) end
  end)
end)
