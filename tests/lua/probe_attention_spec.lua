-- What a new user of the attention side tries first, and what once went
-- wrong there: Lua variants written with Lua's math library and with
-- PyTorch's spellings (math.max of three values, math.log(x, 2),
-- math.fmod, ember.pow / fmod / remainder / floor_divide, & | ~ on
-- masks), each held to the same rule written densely in float64 on both
-- routes (fused and composed); functions that cannot be traced refused by
-- name, at the user's line.
local ember = require "ember"
local parity = require "tests.lua.helpers.parity"

local D = { dtype = "float64" }
local B, H, L, d = 1, 2, 7, 4

local n_defined = 0
local function define(score)
  n_defined = n_defined + 1
  local name = "probe_attn_" .. n_defined
  ember.attention_variant { name = name, score = function(s, b, h, q, k, ctx) return s + score(q, k) end }
  return name
end

-- The variant's output against softmax(q k^T / sqrt(d) + bias) v, bias[i][j] = rule(i, j)
-- computed by plain Lua; the largest difference over the fused and composed routes.
local function error_of(name, rule)
  ember.manual_seed(3)
  local q, k, v = ember.randn(B, H, L, d, D), ember.randn(B, H, L, d, D), ember.randn(B, H, L, d, D)
  local bias = ember.zeros(1, 1, L, L, D)
  for i = 1, L do for j = 1, L do bias[1][1][i][j] = rule(i, j) end end
  local ref = (q:matmul(k:transpose(-1, -2)) / math.sqrt(d) + bias):softmax(-1):matmul(v)
  local att = ember.Attention { attention = name, heads = H, head_dim = d, dtype = "float64" }
  local err = 0
  for _, kernel in ipairs { "auto", "composed" } do
    local out = att(q, k, v, { kernel = kernel ~= "auto" and kernel or nil })
    err = math.max(err, (out - ref):abs():max():item())
  end
  return err
end

describe("Lua variants written with Lua's math library", function()
  local cases = {
    { "math.max of three values", function(q, k) return math.max(q - k, 0, k - 5) end },
    { "math.min of three values", function(q, k) return math.min(q, k, 4) end },
    { "x:max(a, b)", function(q, k) return (q - k):max(0, 2) * 0.5 end,
      function(q, k) return math.max(q - k, 0, 2) * 0.5 end },
    { "math.log with a base", function(q, k) return math.log(k, 2) end },
    { "math.fmod", function(q, k) return math.fmod(k - q, 3) end },
    { "math.fmod of floats", function(q, k) return math.fmod(k - q - 0.5, 2) end },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " means what Lua computes", function()
      assert.is_true(error_of(define(c[2]), c[3] or c[2]) < 1e-12)
    end)
  end

  it("math functions that cannot be traced are refused by name at the user's line", function()
    parity.raises_here(function() define(function(q, k) return math.sin(q - k) end) end,
      "math.sin cannot be traced")
  end)
end)

describe("Lua variants written with PyTorch's spellings", function()
  local cases = {
    { "ember.fmod (sign of the dividend)", function(q, k) return ember.fmod(q - k, -3) end,
      function(q, k) return math.fmod(q - k, -3) end },
    { "ember.remainder (sign of the divisor)", function(q, k) return ember.remainder(q - k - 3, 4) end,
      function(q, k) return (q - k - 3) % 4 end },
    { "ember.floor_divide", function(q, k) return ember.floor_divide(q - k - 3, 2) end,
      function(q, k) return (q - k - 3) // 2 end },
    { "ember.pow", function(q, k) return ember.pow(k, 0.5) end, function(q, k) return k ^ 0.5 end },
    { "& on masks", function(q, k) return ember.where(k:le(q) & (q - k):lt(3), 1, 0) end,
      function(q, k) return (k <= q and q - k < 3) and 1 or 0 end },
    { "| on masks", function(q, k) return ember.where(k:le(2) | k:ge(q), 1, 0) end,
      function(q, k) return (k <= 2 or k >= q) and 1 or 0 end },
    { "~ on a mask", function(q, k) return ember.where(~k:le(q), 1, 0) end,
      function(q, k) return k > q and 1 or 0 end },
    { "a ~ b (xor) on masks", function(q, k) return ember.where(k:le(q) ~ k:le(3), 1, 0) end,
      function(q, k) return ((k <= q) ~= (k <= 3)) and 1 or 0 end },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " as in PyTorch", function()
      assert.is_true(error_of(define(c[2]), c[3]) < 1e-12)
    end)
  end

  it("& on integers is refused (bitwise operations cannot be traced)", function()
    parity.raises_here(function() define(function(q, k) return (q - k) & 1 end) end,
      "'&' on traced values is the logical and of booleans")
  end)

  it("an ember function that is not traced says what is", function()
    parity.raises_here(function() define(function(q, k) return ember.sin(q - k) end) end,
      "traced values, not tensors: traced are")
    parity.raises_here(function() define(function(q, k) return ember.add(q, k) end) end,
      "traced values, not tensors: traced are")
  end)
end)

describe("Transformer layers given a variant's options", function()
  local nn = require "ember.nn"
  -- nn.MultiHeadAttention takes them directly (README: {attention = "softcap2", cap = 20}),
  -- the layers under attention_options: the error says so instead of only "unknown option"
  it("say where the option goes", function()
    parity.raises_here(function() nn.TransformerEncoderLayer(16, 4, { attention = "softcap", cap = 5 }) end,
      "nn.TransformerEncoderLayer: 'cap' is an option of attention 'softcap': give it as attention_options = {cap = ...}")
    parity.raises_here(function() nn.TransformerDecoderLayer(16, 4, { cross_attention = "softcap", cap = 5 }) end,
      "give it as cross_attention_options = {cap = ...}")
    parity.raises_here(function() nn.TransformerEncoderLayer(16, 4, { attention = "softcap", capp = 5 }) end,
      "nn.TransformerEncoderLayer: unknown option 'capp'")
  end)

  it("take them under attention_options", function()
    local layer = nn.TransformerEncoderLayer(16, 4, { attention = "softcap", attention_options = { cap = 5 } })
    assert.are.equal(5, layer.self_attn:options().cap)
  end)

  -- the stacks checked their options first, with the plain "unknown option"
  it("say where the option goes in the stacks too (TransformerEncoder, TransformerDecoder, Transformer)", function()
    parity.raises_here(function() nn.TransformerEncoder(16, 4, 2, { attention = "softcap", cap = 5 }) end,
      "nn.TransformerEncoder: 'cap' is an option of attention 'softcap': give it as attention_options = {cap = ...}")
    parity.raises_here(function() nn.TransformerDecoder(16, 4, 2, { cross_attention = "softcap", cap = 5 }) end,
      "nn.TransformerDecoder: 'cap' is an option of attention 'softcap': give it as cross_attention_options = {cap = ...}")
    parity.raises_here(function() nn.Transformer(16, 4, { attention = "softcap", cap = 5 }) end,
      "nn.Transformer: 'cap' is an option of attention 'softcap': give it as attention_options = {cap = ...}")
    parity.raises_here(function() nn.TransformerEncoder(16, 4, 2, { attention = "softcap", final_norm = true, capp = 5 }) end,
      "nn.TransformerEncoder: unknown option 'capp' (options: ")
    local enc = nn.TransformerEncoder(16, 4, 2, { attention = "softcap", attention_options = { cap = 5 }, final_norm = true })
    assert.are.equal(5, enc.layers[2].self_attn:options().cap)
  end)
end)

describe("MultiHeadAttention.forward_cached on a new module", function()
  local nn = require "ember.nn"
  -- a new module is in training mode; without dropout that changes nothing, so
  -- decoding needs no :eval() (it once refused every module in training mode)
  it("decodes without :eval() when nothing is random, equal to the causal pass", function()
    ember.manual_seed(5)
    local m = nn.MultiHeadAttention(16, 4, { attention = "softcap" })
    assert.is_true(m.training)
    local x = ember.randn(2, 6, 16)
    local cache = {}
    local steps = { m:forward_cached(x:narrow(2, 1, 4), cache) }
    for t = 5, 6 do steps[#steps + 1] = m:forward_cached(x:narrow(2, t, 1), cache) end
    assert.is_true((ember.cat(steps, 2) - m(x, { causal = true })):abs():max():item() < 1e-5)
  end)

  it("still asks for :eval() where training mode is random", function()
    local x = ember.randn(1, 3, 16)
    parity.raises_here(function() nn.MultiHeadAttention(16, 4, { dropout = 0.1 }):forward_cached(x, {}) end,
      "call :eval() first (the module drops attention weights with p = 0.1")
    parity.raises_here(function()
      nn.MultiHeadAttention(16, 4, { attention = "linear", feature_map = "favor", redraw = true }):forward_cached(x, {})
    end, "redraws its features")
  end)
end)

describe("A variant's definition", function()
  -- the trial trace at the definition once skipped these: the variant was registered and
  -- the error came at the first module built with it
  it("refuses params that ember.Attention would refuse, where it is defined", function()
    parity.raises_here(function()
      ember.attention_variant { name = "probe_params_number", params = function() return 3 end,
        score = function(s) return s end }
    end, "attention variant 'probe_params_number': params must return a list of {name=, tensor=, learned=}, got number")
    parity.raises_here(function()
      ember.attention_variant { name = "probe_params_int",
        params = function() return { { name = "t", tensor = ember.ones(2, { dtype = "int64" }), learned = true } } end,
        score = function(s, b, h, q, k, ctx) return s + ctx.t[h] end }
    end, "learned table 't' must be a float tensor, got int64")
    assert.is_nil(require("ember.variant").get("probe_params_int"))
  end)

  it("says a sink has no k when its fourth parameter is used as one", function()
    parity.raises_here(function()
      ember.attention_variant { name = "probe_sink_k", sink = function(b, h, q, k, ctx) return k end }
    end, "a sink has no k")
  end)
end)

describe("Attention over nothing", function()
  local nn = require "ember.nn"
  -- an empty key set or query set gave a bare zeros tensor outside the graph (the
  -- user's backward failed: "does not require grad"), and an empty batch was an error
  for _, name in ipairs { "standard", "softcap", "relpos" } do
    it(name .. ": no keys, no queries or no batch give zeros inside the graph (zero gradients)", function()
      local att = ember.Attention { attention = name, heads = 4, head_dim = 3, dtype = "float64" }
      local function case(B, Lq, Lk, Hkv)
        local q = ember.randn(B, 4, Lq, 3, D):requires_grad_()
        local k = ember.randn(B, Hkv, Lk, 3, D):requires_grad_()
        local v = ember.randn(B, Hkv, Lk, 3, D):requires_grad_()
        local out = att(q, k, v)
        assert.are.same({ B, 4, Lq, 3 }, { table.unpack(out.shape) })
        assert.is_true(out.requires_grad)
        out:sum():backward()
        for _, t in ipairs { q, k, v } do
          assert.are.same({ table.unpack(t.shape) }, { table.unpack(t.grad.shape) })
          if t.grad:numel() > 0 then assert.are.equal(0, t.grad:abs():max():item()) end
        end
        if out:numel() > 0 then assert.are.equal(0, out:abs():max():item()) end
      end
      case(2, 5, 0, 4)
      case(2, 5, 0, 2) -- grouped kv heads
      case(2, 0, 6, 4)
      case(0, 5, 5, 4)
    end)
  end

  it("an empty batch goes through MultiHeadAttention and sdpa", function()
    assert.are.same({ 0, 5, 8 }, { table.unpack(nn.MultiHeadAttention(8, 2)(ember.randn(0, 5, 8)).shape) })
    local q = ember.randn(0, 2, 5, 4)
    assert.are.same({ 0, 2, 5, 4 }, { table.unpack(ember.scaled_dot_product_attention(q, q, q).shape) })
  end)
end)

describe("Attention over nothing, composed route of a Lua variant", function()
  -- the dense evaluation broadcast a per-head table against an empty [B, H, Lq, 0]
  -- score and failed inside ember.expand
  for _, name in ipairs { "example_lua", "t5_lua", "sinks" } do
    it(name .. " with kernel = composed and need_weights: zeros and zero gradients", function()
      local att = ember.Attention { attention = name, heads = 2, head_dim = 4, dtype = "float64" }
      for _, shape in ipairs { { 1, 5, 0 }, { 1, 0, 5 }, { 0, 5, 5 } } do
        local B, Lq, Lk = shape[1], shape[2], shape[3]
        local q = ember.randn(B, 2, Lq, 4, D):requires_grad_()
        local k, v = ember.randn(B, 2, Lk, 4, D):requires_grad_(), ember.randn(B, 2, Lk, 4, D)
        for _, o in ipairs { { kernel = "composed" }, { need_weights = true } } do
          local out, w = att(q, k, v, o)
          assert.are.same({ B, 2, Lq, 4 }, { table.unpack(out.shape) })
          if w then assert.are.same({ B, 2, Lq, Lk }, { table.unpack(w.shape) }) end
          q.grad, k.grad = nil, nil
          out:sum():backward()
          if q.grad:numel() > 0 then assert.are.equal(0, q.grad:abs():max():item()) end
        end
      end
    end)
  end

  it("document with an empty row of ids", function()
    local att = ember.Attention { attention = "document", heads = 2, head_dim = 4, dtype = "float64" }
    local q, k = ember.randn(1, 2, 5, 4, D), ember.randn(1, 2, 0, 4, D)
    local out = att(q, k, k, { kernel = "composed", variant_inputs = { doc = ember.ones(1, 0, { dtype = "int64" }) } })
    assert.are.same({ 1, 2, 5, 4 }, { table.unpack(out.shape) })
  end)
end)

describe("Options a Hugging Face user passes", function()
  local Llama = require("ember.models").Llama
  local generate = require "ember.generate"
  local nn = require "ember.nn"
  local model = Llama { vocab_size = 20, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 1,
    num_attention_heads = 2 }
  local ids = ember.tensor({ { 5, 9, 2 } }, { dtype = "int64" })

  -- Llama.forward/decode and forward_cached ignored unknown options: an attention_mask
  -- (HF's way to mask padding) was silently dropped and the padding attended to
  it("Llama refuses an unknown option, and says what attention_mask is here", function()
    parity.raises_here(function() model(ids, { attention_mask = ember.ones(1, 3, { dtype = "int64" }) }) end,
      "Llama.forward: unknown option 'attention_mask': ember takes key_padding_mask, true = padding")
    parity.raises_here(function() model(ids, { foo = 1 }) end, "Llama.forward: unknown option 'foo'")
    parity.raises_here(function() model:decode(ids, { foo = 1 }) end, "Llama.decode: unknown option 'foo'")
  end)

  it("forward_cached refuses an unknown option (need_weights included: a step returns none)", function()
    local m = nn.MultiHeadAttention(8, 2)
    parity.raises_here(function() m:forward_cached(ember.randn(1, 2, 8), {}, { need_weights = true }) end,
      "MultiHeadAttention.forward_cached: unknown option 'need_weights'")
  end)

  it("generate names its own spelling of Hugging Face's options", function()
    parity.raises_here(function() generate.generate(model, ids, { do_sample = true }) end,
      "unknown option 'do_sample'; Hugging Face's do_sample is strategy = \"sample\" here")
    parity.raises_here(function() generate.generate(model, ids, { attention_mask = ids }) end,
      "prompt_padding_mask = attention_mask:eq(0)")
    parity.raises_here(function() generate.generate(model, ids, { eos_token_id = 3 }) end,
      "Hugging Face's eos_token_id is eos_id here")
  end)
end)

describe("generate with a model of the user's own", function()
  local generate = require "ember.generate"
  local ids = ember.tensor({ { 5, 9, 2 } }, { dtype = "int64" })
  local function model(f) return { decode = function(_, x) return f(x) end } end

  -- a decode of the wrong shape failed inside ember.cat or Lua ("attempt to index a nil
  -- value"); NaN or all -inf logits were sampled silently (the last token every time)
  it("says what decode must return", function()
    parity.raises_here(function() generate.generate(model(function(x) return ember.randn(1, 7) end), ids) end,
      "generate: model:decode must return float logits [B=1, L=3, V], got float32 [1, 7]")
    parity.raises_here(function() generate.generate(model(function() return nil end), ids) end,
      "got nil")
  end)

  it("takes a decode that returns the last position only", function()
    local out = generate.generate(model(function(x) return ember.randn(x.shape[1], 1, 7) end), ids,
      { max_new_tokens = 2 })
    assert.are.same({ 1, 5 }, { table.unpack(out.shape) })
  end)

  it("refuses NaN logits and rows with nothing to sample", function()
    local nan = model(function(x) return ember.full({ x.shape[1], x.shape[2], 7 }, 0 / 0) end)
    parity.raises_here(function() generate.generate(nan, ids) end, "generate: the model's logits hold NaN at new token 1")
    local dead = model(function(x) return ember.full({ x.shape[1], x.shape[2], 7 }, -math.huge) end)
    parity.raises_here(function() generate.generate(dead, ids, { strategy = "sample" }) end,
      "generate: row 1 has no token to sample: its logits are all -inf or NaN")
  end)
end)

describe("A score function that makes NaN or +inf", function()
  -- the fused route refused it; the composed route (need_weights, kernel = composed)
  -- returned NaN silently
  it("is refused on both routes, naming the same position", function()
    ember.attention_variant { name = "probe_bad_score",
      score = function(s, b, h, q, k, ctx)
        return s + 1 / ember.where(ember.logical_and(h:eq(2), ember.logical_and(q:eq(3), k:eq(2))), 0, 1)
      end }
    local att = ember.Attention { attention = "probe_bad_score", heads = 2, head_dim = 4 }
    local q = ember.randn(2, 2, 5, 4)
    local at = "the score function gave +inf at b=1 h=2 q=3 k=2"
    parity.raises_here(function() att(q, q, q) end, at)
    parity.raises_here(function() att(q, q, q, { kernel = "composed" }) end, at)
    parity.raises_here(function() att(q, q, q, { need_weights = true }) end, at)
  end)
end)

describe("A float attn_mask that requires grad (a learned bias)", function()
  local gradcheck = require "tests.lua.helpers.gradcheck"
  local nn = require "ember.nn"
  -- the kernels take masks as constants: the mask was detached silently, so a bias
  -- trained through it never learned (PyTorch gives it its gradient)
  it("gets its gradient through scaled_dot_product_attention (GQA, a fully masked row)", function()
    ember.manual_seed(2)
    local q, k, v = ember.randn(2, 4, 3, 5, D), ember.randn(2, 2, 6, 5, D), ember.randn(2, 2, 6, 4, D)
    local bias = ember.randn(1, 4, 3, 6, D)
    bias[1][2][3] = -math.huge -- row 3 of head 2 sees nothing: output 0, gradient 0
    bias[1][1][1][2] = -math.huge
    gradcheck.check(function(qq, b)
      return ember.scaled_dot_product_attention(qq, k, v, { attn_mask = b, enable_gqa = true })
    end, { q, bias }, { wrt = { 1 } })
    local b = bias:clone():requires_grad_()
    local out = ember.scaled_dot_product_attention(q, k, v, { attn_mask = b, enable_gqa = true })
    out:sum():backward()
    assert.are.equal(0, b.grad[1][2][3]:abs():max():item())
    assert.are.equal(0, out[1][2][3]:abs():max():item())
    -- finite elements: finite differences (the -inf ones are held by the equality below)
    local fin = ember.randn(1, 4, 3, 6, D)
    gradcheck.check(function(bb)
      return ember.scaled_dot_product_attention(q, k, v, { attn_mask = bb, enable_gqa = true })
    end, { fin })
  end)

  it("gets its gradient through nn.MultiHeadAttention with key padding and causal", function()
    ember.manual_seed(4)
    local m = nn.MultiHeadAttention { d_model = 8, heads = 4, kv_heads = 2, dtype = "float64" }
    local x = ember.randn(2, 5, 8, D)
    local kpm = ember.tensor({ { false, false, false, false, true }, { false, false, false, false, false } })
    for _, causal in ipairs { false, true } do
      gradcheck.check(function(b) return m(x, { attn_mask = b, key_padding_mask = kpm, causal = causal }) end,
        { ember.randn(4, 5, 5, D) })
    end
  end)

  it("is refused by a variant that takes masks as constants", function()
    local m = nn.MultiHeadAttention(8, 2, { attention = "softcap" })
    parity.raises_here(function() m(ember.randn(1, 5, 8), { attn_mask = ember.zeros(5, 5):requires_grad_() }) end,
      "MultiHeadAttention.forward: attn_mask requires grad, but attention 'softcap' takes masks as constants")
  end)
end)

describe("Unbatched MultiHeadAttention with a Lua variant's per-call tensors", function()
  local nn = require "ember.nn"
  -- an unbatched query [L, E] took key_padding_mask [L] but refused doc [L]
  -- ("indexes 'doc' with 2 indices, got a 1-d tensor")
  it("takes them unbatched, as the batched call with a batch of one", function()
    ember.manual_seed(6)
    local m = nn.MultiHeadAttention(8, 2, { attention = "document" })
    local x, doc = ember.randn(5, 8), ember.tensor({ 1, 1, 2, 2, 2 }, { dtype = "int64" })
    local y = m(x, { variant_inputs = { doc = doc } })
    local ref = m(x:unsqueeze(1), { variant_inputs = { doc = doc:unsqueeze(1) } })[1]
    assert.are.equal(0, (y - ref):abs():max():item())
    -- prefix_lm's prefix [B] as a 0-d tensor
    local p = nn.MultiHeadAttention(8, 2, { attention = "prefix_lm" })
    local n = ember.tensor(2, { dtype = "int64" })
    assert.are.equal(0, (p(x, { variant_inputs = { prefix = n } })
      - p(x:unsqueeze(1), { variant_inputs = { prefix = n:view(1) } })[1]):abs():max():item())
  end)
end)

describe("Llama from a sharded checkpoint", function()
  local Llama = require("ember.models").Llama
  local tmpdir = require "tests.lua.helpers.tmpdir"
  -- Hugging Face's larger checkpoints come in shards; from_safetensors/load took one file only
  it("loads a list of shard files as the one file", function()
    ember.manual_seed(8)
    local dir = tmpdir()
    local full = Llama { vocab_size = 30, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 2,
      num_attention_heads = 4, num_key_value_heads = 2 }
    full:save(dir .. "/model.safetensors")
    local a, b, i = {}, {}, 0
    for name, t in pairs(full:state_dict()) do
      i = i + 1
      if i % 2 == 0 then a[name] = t else b[name] = t end
    end
    local ck = require "ember.checkpoint"
    local shards = { dir .. "/model-00001-of-00002.safetensors", dir .. "/model-00002-of-00002.safetensors" }
    ck.save_tensors(shards[1], a)
    ck.save_tensors(shards[2], b)
    local m = Llama.from_safetensors(shards, { num_attention_heads = 4 })
    local ids = ember.tensor({ { 4, 6, 8 } }, { dtype = "int64" })
    assert.are.equal(0, (m(ids) - full:eval()(ids)):abs():max():item())
    parity.raises_here(function() Llama.from_safetensors({ shards[1], shards[1] }, { num_attention_heads = 4 }) end,
      "is in both")
  end)
end)

describe("FlexAttention's closures over tensors", function()
  -- score_mod in PyTorch may index a tensor it closes over (bias[h, q, k]); here that
  -- failed with "'#' of a traced value cannot be traced", and a Lua table of slopes
  -- with "cannot trace '*' on a nil", neither saying what to do
  it("are refused saying to declare the tensor in params or inputs", function()
    local bias, slopes = ember.randn(2, 16, 16), { 0.5, 0.25 }
    parity.raises_here(function()
      ember.attention_variant { name = "probe_upvalue", score = function(s, b, h, q, k) return s + bias[h][q][k] end }
    end, "a tensor from outside the function cannot be indexed with a traced value: give it in params")
    parity.raises_here(function()
      ember.attention_variant { name = "probe_lua_table", score = function(s, b, h, q, k) return s - slopes[h] * (q - k) end }
    end, "the Lua table 'slopes' was indexed with a traced value: Lua looks the key up as it is, so the read would be nil (and `t[k] or x` silently x at every position); give the numbers as a tensor in params")
  end)
end)

describe("scaled_dot_product_attention with a learned mask against PyTorch", function()
  -- tests/fixtures/attention_sdpa.lua, made by tests/gen_sdpa_fixtures.py (torch's math attention)
  local fixtures = dofile("tests/fixtures/attention_sdpa.lua")
  for _, c in ipairs(fixtures.cases) do
    it(c.name .. ": out and the gradients of q, k, v and the mask", function()
      local q, k, v, m = parity.T(c.q), parity.T(c.k), parity.T(c.v), parity.T(c.mask)
      for _, t in ipairs { q, k, v, m } do t:requires_grad_() end
      local out = ember.scaled_dot_product_attention(q, k, v, { attn_mask = m, scale = c.scale,
        enable_gqa = q.shape[2] ~= k.shape[2] })
      ;(out * parity.T(c.grad_out)):sum():backward()
      parity.check("out", out, parity.T(c.out), 1e-12)
      parity.check("dq", q.grad, parity.T(c.dq), 1e-12)
      parity.check("dk", k.grad, parity.T(c.dk), 1e-12)
      parity.check("dv", v.grad, parity.T(c.dv), 1e-12)
      parity.check("dmask", m.grad, parity.T(c.dmask), 1e-12)
    end)
  end
end)

describe("generate with a decode that ignores the cache", function()
  local generate = require "ember.generate"
  local nn = require "ember.nn"
  -- the simplest decode a user writes (no cache) was given only the new token from the
  -- second step on, silently: generations differed from use_cache = false
  it("gives it the whole sequence at every step, as use_cache = false does", function()
    ember.manual_seed(0)
    local emb, layer, head = nn.Embedding(30, 16), nn.TransformerEncoderLayer(16, 4, { dim_feedforward = 32, dropout = 0 }),
      nn.Linear(16, 30)
    local calls = {}
    local model = { decode = function(_, ids, o)
      calls[#calls + 1] = ids.shape[2]
      return head(layer(emb(ids), { causal = true, key_padding_mask = o.key_padding_mask }))
    end }
    local prompt = ember.tensor({ { 1, 1, 7, 9 }, { 3, 5, 7, 9 } }, { dtype = "int64" })
    local pad = ember.tensor({ { true, true, false, false }, { false, false, false, false } })
    local a = generate.generate(model, prompt, { max_new_tokens = 6, prompt_padding_mask = pad })
    assert.are.same({ 4, 5, 6, 7, 8, 9 }, calls)
    local b = generate.generate(model, prompt, { max_new_tokens = 6, prompt_padding_mask = pad, use_cache = false })
    assert.is_true(ember.equal(a, b))
  end)
end)

describe("generate's error", function()
  local generate = require "ember.generate"
  -- generate switches the model to eval mode; an error left it there
  it("leaves a training model in training mode", function()
    local Llama = require("ember.models").Llama
    local m = Llama { vocab_size = 10, hidden_size = 8, intermediate_size = 16, num_hidden_layers = 1,
      num_attention_heads = 2 }
    assert.is_true(m.training)
    parity.raises_here(function() generate.generate(m, ember.tensor({ { 11 } }, { dtype = "int64" })) end,
      "out of range")
    assert.is_true(m.training)
  end)
end)

describe("Lua variants in bfloat16", function()
  -- attention_bf16_spec holds the declared variants to the float32 kernel; the Lua
  -- variants' traced programs take the same path, held here to the same bounds
  -- (its header derives them): out 2^-8 max|v|, gradients 2^-5 of their largest
  local bf16_pair = require "tests.lua.helpers.bf16_pair"
  local bfround = bf16_pair.round
  local doc = ember.ones(2, 70, { dtype = "int64" })
  doc:narrow(2, 30, 41):fill_(2)
  local cases = { { "softcap" }, { "sinks" }, { "example_lua" }, { "alibi_lua" }, { "sliding_sinks" }, { "t5_lua" },
    { "document", { doc = doc } }, { "prefix_lm", { prefix = ember.tensor({ 5, 40 }, { dtype = "int64" }) } } }
  for _, c in ipairs(cases) do
    it(c[1] .. " agrees with float32 on the same rounded inputs and tables", function()
      ember.manual_seed(1)
      local a32, abf = bf16_pair.make { attention = c[1], heads = 3, head_dim = 16 }
      local q, k, v = bfround(ember.randn(2, 3, 70, 16)), bfround(ember.randn(2, 3, 70, 16)), bfround(ember.randn(2, 3, 70, 16))
      local g = bfround(ember.randn(2, 3, 70, 16))
      local function run(a, dt)
        local t = {}
        for i, x in ipairs { q, k, v } do t[i] = x:to(dt):detach():clone():requires_grad_() end
        local out = a(t[1], t[2], t[3], { causal = true, variant_inputs = c[2] })
        ;(out:float() * g):sum():backward()
        local gs = { t[1].grad:float(), t[2].grad:float(), t[3].grad:float() }
        for _, p in ipairs(a:parameters()) do gs[#gs + 1] = p.grad:float() end
        return out:float(), gs
      end
      local o32, g32 = run(a32, "float32")
      local obf, gbf = run(abf, "bfloat16")
      assert.is_true((o32 - obf):abs():max():item() <= 2 ^ -8 * v:abs():max():item())
      for i = 1, #g32 do
        assert.is_true((g32[i] - gbf[i]):abs():max():item() <= 2 ^ -5 * g32[i]:abs():max():item(), "gradient " .. i)
      end
    end)
  end
end)

describe("forward_cached's cross-attention memory", function()
  local nn = require "ember.nn"
  -- a memory of another batch size was reported by the inner ember.Attention with
  -- the projected head shapes
  it("is checked against the step's batch and kdim", function()
    local m = nn.MultiHeadAttention(8, 2)
    parity.raises_here(function() m:forward_cached(ember.randn(2, 1, 8), {}, { memory = ember.randn(3, 4, 8) }) end,
      "MultiHeadAttention.forward_cached: memory must be [B=2, Lm, kdim=8], got [3, 4, 8]")
  end)
end)

describe("A variant that fails to trace for one module's options", function()
  local nn = require "ember.nn"
  -- MultiHeadAttention stripped every position from the message: the line in the
  -- variant's function that failed was lost (ember.Attention kept it)
  it("names the line in the variant's function as well as the module's line", function()
    local fn_line
    ember.attention_variant { name = "probe_opt_trace", options = { { name = "mode", type = "string", default = "a", choices = "a|b" } },
      score = function(s, b, h, q, k, ctx)
        if ctx.options.mode == "a" then return s end
        fn_line = debug.getinfo(1, "l").currentline + 1
        return s + q:foo()
      end }
    local ok, err = pcall(function() nn.MultiHeadAttention(8, 2, { attention = "probe_opt_trace", mode = "b" }) end)
    assert.is_false(ok)
    local here = debug.getinfo(1, "S").short_src -- relative or absolute, as busted was given it
    assert.truthy(err:find("attention variant 'probe_opt_trace' (" .. here .. ":" .. fn_line .. ")", 1, true), err)
    parity.raises_here(function() nn.MultiHeadAttention(8, 2, { attention = "probe_opt_trace", mode = "b" }) end,
      "traced values have no field 'foo'")
  end)
end)

describe("generate's ids and counts", function()
  local generate = require "ember.generate"
  local Llama = require("ember.models").Llama
  ember.manual_seed(21)
  local model = Llama { vocab_size = 40, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 1,
    num_attention_heads = 2 }
  local ids = ember.tensor({ { 5, 9, 2 }, { 1, 2, 3 } }, { dtype = "int64" })

  -- a list of eos ids (Hugging Face's eos_token_id may be one, Llama 3's are two)
  -- failed in ember.eq; eos_id = 0 (never an id here), a negative or fractional
  -- max_new_tokens and a string pad_id were taken silently
  it("takes a list of eos ids: a row that emits any of them is done", function()
    local free = generate.generate(model, ids, { max_new_tokens = 6 })
    local e1, e2 = free[1][4]:item(), free[2][4]:item() -- each row's first new token
    local out = generate.generate(model, ids, { max_new_tokens = 6, eos_id = { e2, e1 } })
    assert.are.same({ 2, 4 }, { table.unpack(out.shape) }) -- both rows done after one step
    assert.is_true(ember.equal(out, free:narrow(2, 1, 4)))
    -- a row done early is padded with the first eos id while the other goes on
    local one = generate.generate(model, ids, { max_new_tokens = 6, eos_id = { e1 } })
    if e2 ~= e1 then
      for j = 5, one.shape[2] do assert.are.equal(e1, one[1][j]:item()) end
    end
  end)

  it("refuses ids that are not 1-based integers and counts that are not counts", function()
    parity.raises_here(function() generate.generate(model, ids, { eos_id = 0 }) end,
      "generate: eos_id must be a token id (an integer >= 1: ids are 1-based) or a list of them, got 0")
    parity.raises_here(function() generate.generate(model, ids, { pad_id = "x" }) end, "generate: pad_id must be a token id")
    parity.raises_here(function() generate.generate(model, ids, { max_new_tokens = -1 }) end,
      "generate: max_new_tokens must be an integer >= 0, got -1")
    parity.raises_here(function() generate.generate(model, ids, { max_new_tokens = 2.5 }) end,
      "max_new_tokens must be an integer >= 0, got 2.5")
  end)
end)

describe("scaled_dot_product_attention's scale", function()
  local gradcheck = require "tests.lua.helpers.gradcheck"
  -- the kernel reads scale <= 0 as "the default", so scale = 0 (uniform weights in
  -- PyTorch) and a negative scale silently became 1/sqrt(E)
  it("is used as given when 0 or negative (values and gradients)", function()
    ember.manual_seed(12)
    local q, k, v = ember.randn(1, 2, 3, 4, D), ember.randn(1, 2, 5, 4, D), ember.randn(1, 2, 5, 4, D)
    for _, sc in ipairs { 0, -0.5 } do
      local want = (q:matmul(k:transpose(-1, -2)) * sc):softmax(-1):matmul(v)
      local got = ember.scaled_dot_product_attention(q, k, v, { scale = sc })
      assert.is_true((got - want):abs():max():item() < 1e-12, "scale " .. sc)
      gradcheck.check(function(a, b) return ember.scaled_dot_product_attention(a, b, v, { scale = sc, is_causal = true }) end,
        { q:clone(), k:clone() })
    end
  end)
end)

describe("ViT's call options", function()
  -- an unknown one was named by the inner TransformerEncoderLayer.forward
  it("are checked by ViT.forward itself", function()
    local vit = require("ember.models").ViT { image_size = 8, patch_size = 4, in_channels = 1, num_classes = 5,
      hidden_dim = 16, num_layers = 1, num_heads = 2, mlp_dim = 32 }
    parity.raises_here(function() vit(ember.randn(1, 1, 8, 8), { foo = 1 }) end, "ViT.forward: unknown option 'foo'")
  end)
end)

describe("CrossAttentionVLM's need_weights", function()
  -- an options table (MultiHeadAttention's form) was taken as need_weights = true
  -- whatever it held
  it("is a boolean or {need_weights = ...}; anything else is named", function()
    ember.manual_seed(3)
    local m = require("ember.models").CrossAttentionVLM { d_model = 32, heads = 4 }
    local im, q = ember.rand(1, 3, 75, 75), ember.randint(1, 3, { 1, 2, 2 })
    local _, w = m(im, q, { need_weights = true })
    local _, w2 = m(im, q, true)
    assert.are.equal(0, (w - w2):abs():max():item())
    parity.raises_here(function() m(im, q, { foo = 1 }) end, "CrossAttentionVLM.forward: unknown option 'foo'")
    parity.raises_here(function() m(im, q, 1) end, "CrossAttentionVLM.forward: need_weights must be a boolean")
  end)
end)

describe("ember.Attention's scale", function()
  local gradcheck = require "tests.lua.helpers.gradcheck"
  -- the core reads scale <= 0 as "the default": scale = 0 gave the same as no
  -- scale on the fused route (the composed route of a Lua variant used it)
  it("is used as given when 0 or negative, on both routes of a Lua variant (values and gradients)", function()
    ember.manual_seed(13)
    local q, k, v = ember.randn(1, 2, 3, 4, D), ember.randn(1, 2, 5, 4, D), ember.randn(1, 2, 5, 4, D)
    local std = ember.Attention { attention = "standard", heads = 2, head_dim = 4, dtype = "float64" }
    local cap = ember.Attention { attention = "softcap", heads = 2, head_dim = 4, dtype = "float64", cap = 2 }
    local default = (q:matmul(k:transpose(-1, -2)) / 2):softmax(-1):matmul(v)
    assert.is_true((std(q, k, v) - default):abs():max():item() < 1e-12, "nil is 1/sqrt(head_dim)")
    for _, sc in ipairs { 0, -0.5 } do
      local s = q:matmul(k:transpose(-1, -2)) * sc
      local want = s:softmax(-1):matmul(v)
      assert.is_true((std(q, k, v, { scale = sc }) - want):abs():max():item() < 1e-12, "standard, scale " .. sc)
      local capped = ((s / 2):tanh() * 2):softmax(-1):matmul(v)
      for _, kernel in ipairs { "auto", "composed" } do
        local got = cap(q, k, v, { scale = sc, kernel = kernel ~= "auto" and kernel or nil })
        assert.is_true((got - capped):abs():max():item() < 1e-12, ("softcap %s, scale %s"):format(kernel, sc))
      end
      gradcheck.check(function(a, b) return std(a, b, v, { scale = sc, causal = true }) end, { q:clone(), k:clone() })
      gradcheck.check(function(a, b) return cap(a, b, v, { scale = sc }) end, { q:clone(), k:clone() })
    end
    assert.is_true((std(q, k, v, { scale = 0 }) - v:mean(3, true)):abs():max():item() < 1e-12, "0: uniform weights")
  end)

  it("is refused when 0 or negative by a variant that reads it itself, and when not a number", function()
    local lin = ember.Attention { attention = "linear", heads = 1, head_dim = 4, feature_map = "favor" }
    local q = ember.randn(1, 1, 3, 4)
    parity.raises_here(function() lin(q, q, q, { scale = 0 }) end,
      "Attention.forward: variant 'linear' reads the scale itself and needs scale > 0, got 0")
    local std = ember.Attention { attention = "standard", heads = 1, head_dim = 4 }
    parity.raises_here(function() std(q, q, q, { scale = 0 / 0 }) end, "Attention.forward: scale must be a number, got nan")
  end)
end)

describe("A Lua variant's per-call inputs", function()
  local nn = require "ember.nn"
  -- a float tensor given for the int64 ids of "document" ran, its 1.5 compared as a float
  it("are refused in a dtype other than the declared one, naming the variant, the input and both dtypes", function()
    local mha = nn.MultiHeadAttention(8, 2, { attention = "document" })
    local x = ember.randn(1, 4, 8)
    parity.raises_here(function() mha(x, { variant_inputs = { doc = ember.tensor({ { 1, 1.5, 2, 2 } }) } }) end,
      "Attention.forward: variant 'document' declares its input 'doc' int64 (or bool, read as 0/1), got float32")
    local att = ember.Attention { attention = "document", heads = 2, head_dim = 4, dtype = "float64" }
    local q = ember.randn(1, 2, 4, 4, D)
    parity.raises_here(function() att(q, q, q, { variant_inputs = { doc = ember.tensor({ { 1, 1, 2, 2 } }, D) } }) end,
      "got float64")
    local ids = ember.tensor({ { 1, 1, 2, 2 } }, { dtype = "int64" })
    local want = att(q, q, q, { variant_inputs = { doc = ids }, kernel = "composed" })
    assert.is_true((att(q, q, q, { variant_inputs = { doc = ids } }) - want):abs():max():item() < 1e-12)
    local same = att(q, q, q, { variant_inputs = { doc = ember.tensor({ { true, true, false, false } }) } })
    local ones = ember.tensor({ { 1, 1, 0, 0 } }, { dtype = "int64" })
    assert.is_true((same - att(q, q, q, { variant_inputs = { doc = ones } })):abs():max():item() < 1e-12, "bool as 0/1")
  end)

  it("declared float are refused as int64 or bool", function()
    ember.attention_variant { name = "probe_float_input", inputs = { w = { ndim = 2, dtype = "float" } },
      score = function(s, b, h, q, k, ctx) return s + ctx.w[q][k] end }
    local att = ember.Attention { attention = "probe_float_input", heads = 1, head_dim = 4 }
    local q = ember.randn(1, 1, 3, 4)
    parity.raises_here(function() att(q, q, q, { variant_inputs = { w = ember.ones({ 3, 3 }, { dtype = "int64" }) } }) end,
      "Attention.forward: variant 'probe_float_input' declares its input 'w' float (float32, float64 or bfloat16), got int64")
    local w = ember.randn(3, 3)
    local want = (q:matmul(q:transpose(-1, -2)) / 2 + w):softmax(-1):matmul(q)
    assert.is_true((att(q, q, q, { variant_inputs = { w = w } }) - want):abs():max():item() < 1e-5)
  end)
end)

describe("scripts/check_plugin.lua on a Lua variant with a float per-call input", function()
  -- it made every per-call input int64 ones, which ember.Attention now refuses for a float one
  it("gives the input in the dtype the variant declares", function()
    local tmpdir = require "tests.lua.helpers.tmpdir"
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/probe_float_w.lua", "w"))
    f:write [[
return { name = "probe_float_w", description = "a per-call float bias per key",
  inputs = { w = { ndim = 2, dtype = "float" } },
  score = function(s, b, h, q, k, ctx) return s + ctx.w[b][k] end }
]]
    f:close()
    local build = os.getenv("EMBER_BUILD_DIR") or "build"
    local p = assert(io.popen(("EMBER_PLUGIN_PATH=%s/plugins:%s %s/bin/ember scripts/check_plugin.lua probe_float_w --quick 2>&1")
      :format(build, dir, build)))
    local out = p:read("a")
    local ok = p:close()
    os.execute("rm -rf '" .. dir .. "'")
    assert(ok and out:find(" 0 failed", 1, true), out)
  end)
end)

describe("A Lua variant named as a loaded C plugin", function()
  -- the loader said "a attention plugin named 'standard' ..."
  it("is refused in English, at the user's line", function()
    parity.raises_here(function() ember.attention_variant { name = "standard", score = function(s) return s end } end,
      "ember.attention_variant: an attention plugin named 'standard' is already loaded from ")
  end)
end)
