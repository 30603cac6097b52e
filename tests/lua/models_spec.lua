-- ember.models: reference models built from ember.nn.
--
-- Llama: a safetensors file in Hugging Face's layout, written by
-- tests/gen_llama_fixtures.py from a minimal PyTorch Llama (RMSNorm,
-- rotate_half RoPE, GQA by repeat_interleave, SwiGLU), loads by name; the
-- logits match the reference (float32: max |error| <= 1e-4 on logits of
-- magnitude ~10-30, computed in float64 by the reference from the same
-- float32 weights; float64 copy: <= 1e-10), and greedy generation (KV cache
-- and full recompute) gives the reference's tokens exactly. The generator
-- records the smallest top-1/top-2 logit gap of its greedy steps, and the
-- spec checks that the float32 tolerance is far below it. Tied embeddings
-- (a second file, without lm_head.weight; MQA), bad files and configs.
--
-- ViT: shapes and names, the Conv2d patch embedding equal to a Linear on
-- row-major patches, one training step, a float64 gradcheck, bad input.
-- CrossAttentionVLM: the Sort-of-CLEVR model (scripts/sort_of_clevr.lua
-- uses it; its --smoke run is scripts_spec's): shapes, names, a step, errors;
-- and its stem = "conv" (the script's default, from the pixels): shapes,
-- state-dict keys, gradients to every parameter, the given parts refused.
local ember = require "ember"
local generate = require "ember.generate"
local checkpoint = require "ember.checkpoint"
local compare = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/llama_tiny.lua")
local T, raises_here = compare.T, compare.raises_here
local F32_TOL, F64_TOL = 1e-4, 1e-10

local function max_abs(a, b) return (a:double() - b:double()):abs():max():item() end

local keys = compare.sorted_keys

-- The config from_safetensors needs beyond the shapes (as config.json gives it).
local function given(case)
  return { num_attention_heads = case.config.num_attention_heads, rms_norm_eps = case.config.rms_norm_eps,
           rope_theta = case.config.rope_theta }
end

local function load(case) return ember.models.Llama.from_safetensors(case.file, given(case)) end

local function tmpfile()
  local p = os.tmpname()
  os.remove(p)
  return p .. ".safetensors"
end

describe("ember.models.Llama matches a PyTorch Llama (Hugging Face layout)", function()
  for _, name in ipairs({ "untied", "tied" }) do
    local case = fixtures[name]

    it(name .. ": from_safetensors reads the sizes and the state dict has the file's names exactly", function()
      local m = load(case)
      for k, v in pairs(case.config) do assert.are.equal(v, m.config[k], "config." .. k) end
      local file = checkpoint.load_tensors(case.file)
      assert.are.same(keys(file), keys(m:state_dict()))
      assert.are.equal(not case.config.tie_word_embeddings, file["lm_head.weight"] ~= nil)
      assert.is_false(m.training)
    end)

    it(name .. ": logits, float32 (tol 1e-4) and float64 (tol 1e-10)", function()
      local m = load(case)
      local ids, want = T(case.ids), T(case.logits)
      local got = ember.no_grad(function() return m(ids) end)
      assert.are.same(want.shape, got.shape)
      assert.are.equal("float32", got.dtype)
      local e = max_abs(got, want)
      assert(e <= F32_TOL, ("float32 logits: max |error| %.3g > %g"):format(e, F32_TOL))
      -- the tolerance cannot flip a greedy choice of the reference
      assert(2 * F32_TOL < case.min_greedy_gap / 10, "tolerance too close to the greedy gap")
      m:to("float64")
      got = ember.no_grad(function() return m(ids) end)
      e = max_abs(got, want)
      assert(e <= F64_TOL, ("float64 logits: max |error| %.3g > %g"):format(e, F64_TOL))
    end)

    it(name .. ": greedy generation of 8 tokens, with the KV cache and without", function()
      local m = load(case)
      local ids, want = T(case.ids), T(case.generated)
      for _, cached in ipairs({ true, false }) do
        local got = generate.generate(m, ids, { max_new_tokens = fixtures.new_tokens, strategy = "greedy",
          use_cache = cached })
        assert.are.same(want:totable(), got:totable(), "use_cache = " .. tostring(cached))
      end
    end)
  end

  it("a left-padded batch: each row generates what it generates alone (RoPE is relative)", function()
    local case = fixtures.untied
    local m = load(case)
    local ids = T(case.ids)
    local short = ids[{ { 2, 2 }, { 3, 7 } }]                    -- row 2 without its first two tokens
    local alone = generate.generate(m, short, { max_new_tokens = 6 })
    local padded = ember.cat({ ember.ones({ 1, 2 }, { dtype = "int64" }), short }, 2)
    local batch = ember.cat({ ids:narrow(1, 1, 1), padded }, 1)
    local pad = ember.zeros({ 2, 7 }, { dtype = "bool" })
    pad[2][1], pad[2][2] = true, true
    for _, cached in ipairs({ true, false }) do
      local got = generate.generate(m, batch, { max_new_tokens = 6, prompt_padding_mask = pad, use_cache = cached })
      assert.are.same(alone:totable()[1], got[{ { 2, 2 }, { 3, 13 } }]:totable()[1], "use_cache = " .. tostring(cached))
      assert.are.same(T(case.generated):narrow(2, 1, 13):totable()[1], got:totable()[1])
    end
  end)

  it("the comparisons can fail: a wrong rope_theta or eps changes the logits beyond the tolerance", function()
    local case = fixtures.untied
    for _, change in ipairs({ { rope_theta = 10000.0 }, { rms_norm_eps = 1e-1 } }) do
      local cfg = given(case)
      for k, v in pairs(change) do cfg[k] = v end
      local m = ember.models.Llama.from_safetensors(case.file, cfg)
      local got = ember.no_grad(function() return m(T(case.ids)) end)
      assert(max_abs(got, T(case.logits)) > 100 * F32_TOL, next(change))
    end
    -- and q_proj's rows in Meta's interleaved layout (pairs (0,1), (2,3), ... instead of
    -- rotate_half's (0, d/2), (1, d/2+1), ...) give other logits: the loader must not permute
    local m = load(case)
    ember.no_grad(function()
      local w = m.model.layers[1].self_attn.q_proj.weight
      local hd, H = 8, 4
      -- interleave: row order (x0, x4, x1, x5, ...) of each head
      local inter = {}
      for h = 0, H - 1 do
        for i = 0, hd // 2 - 1 do
          inter[#inter + 1] = h * hd + i + 1
          inter[#inter + 1] = h * hd + hd // 2 + i + 1
        end
      end
      w:copy_(w:index_select(1, ember.tensor(inter, "int64")))
    end)
    local got = ember.no_grad(function() return m(T(case.ids)) end)
    assert(max_abs(got, T(case.logits)) > 100 * F32_TOL)
  end)

  it("tied: the output weight is the embedding (one parameter, gradients from both uses)", function()
    local m = load(fixtures.tied)
    assert.is_nil(m.lm_head)
    assert.are.equal(m.model.embed_tokens.weight, m:output_weight())
    local n = 0
    for _, name in ipairs(m:parameter_names()) do
      assert.is_nil(name:find("lm_head", 1, true))
      n = n + 1
    end
    assert.are.equal(2 + 9 * fixtures.tied.config.num_hidden_layers, n) -- embedding, final norm, 9 per block
    m:train()
    local ids = T(fixtures.tied.ids)
    local logits = m(ids:narrow(2, 1, 3))
    -- only the head's use reaches rows that are not among the input ids
    logits:sum():backward()
    local g = m.model.embed_tokens.weight.grad
    assert(g ~= nil and g:abs():sum():item() > 0)
    local untied = ember.models.Llama(fixtures.tied.config)
    assert.is_nil(untied.lm_head)
    local c = {}
    for k, v in pairs(fixtures.tied.config) do c[k] = v end
    c.tie_word_embeddings = false
    assert.is_not_nil(ember.models.Llama(c).lm_head)
  end)

  it("a file with a tensor missing or misshapen: an error naming the key, the model unchanged", function()
    local case = fixtures.untied
    local file = checkpoint.load_tensors(case.file)
    local path = tmpfile()
    local copy = {}
    for k, v in pairs(file) do copy[k] = v end
    copy["model.layers.1.mlp.up_proj.weight"] = nil
    checkpoint.save_tensors(path, copy)
    raises_here(function() load({ file = path, config = case.config }) end, "missing model.layers.1.mlp.up_proj.weight")
    copy["model.layers.1.mlp.up_proj.weight"] = file["model.layers.1.mlp.up_proj.weight"]
    copy["model.layers.1.self_attn.k_proj.weight"] = file["model.layers.1.self_attn.k_proj.weight"]:narrow(1, 1, 8):contiguous()
    checkpoint.save_tensors(path, copy)
    raises_here(function() load({ file = path, config = case.config }) end,
      "'model.layers.1.self_attn.k_proj.weight' has shape [8, 32] in the state dict, the module expects [16, 32]")
    -- into an existing model: nothing copied
    local m = load(case)
    local before = m.model.norm.weight:clone()
    raises_here(function() m:load(path) end, "model.layers.1.self_attn.k_proj.weight")
    assert.is_true(before == m.model.norm.weight)
    copy["model.layers.1.self_attn.k_proj.weight"] = file["model.layers.1.self_attn.k_proj.weight"]
    copy["model.embed_tokens.weight"] = nil
    checkpoint.save_tensors(path, copy)
    raises_here(function() load({ file = path, config = case.config }) end, "no tensor 'model.embed_tokens.weight'")
    copy["model.embed_tokens.weight"] = file["model.embed_tokens.weight"]
    copy["model.layers.0.mlp.extra"] = file["model.norm.weight"]
    checkpoint.save_tensors(path, copy)
    raises_here(function() load({ file = path, config = case.config }) end, "unexpected model.layers.0.mlp.extra")
    os.remove(path)
    raises_here(function() load({ file = path, config = case.config }) end, "cannot read")
    raises_here(function() ember.models.Llama.from_safetensors(case.file, {}) end, "num_attention_heads")
    raises_here(function()
      ember.models.Llama.from_safetensors(case.file, { num_attention_heads = 4, hidden_size = 64 })
    end, "config.hidden_size = 64, but")
  end)

  it("bad configs: errors at the caller's line naming the key", function()
    local Llama = ember.models.Llama
    local base = { vocab_size = 10, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 1,
                   num_attention_heads = 4 }
    local function with(k, v)
      local c = {}
      for a, b in pairs(base) do c[a] = b end
      c[k] = v
      return c
    end
    raises_here(function() Llama(with("num_key_value_head", 2)) end, "unknown config key 'num_key_value_head'")
    raises_here(function() Llama(with("num_key_value_heads", 3)) end, "num_key_value_heads must be a positive integer dividing")
    raises_here(function() Llama(with("vocab_size", nil)) end, "config.vocab_size must be a positive integer")
    raises_here(function() Llama(with("hidden_act", "gelu")) end, "config.hidden_act must be silu")
    raises_here(function() Llama(with("rope_scaling", { type = "linear" })) end, "rope_scaling of rope_type 'linear' needs factor")
    raises_here(function() Llama(base)(ember.tensor({ { 1, 2 } }, "float32")) end, "ids must be int64 [B, L]")
    -- config.json keys that do not change the computation are accepted
    local m = Llama(with("max_position_embeddings", 2048))
    assert.are.equal(10, m.config.vocab_size)
  end)

  it("save writes Hugging Face's names; the file loads back to the same logits", function()
    local m = ember.models.Llama({ vocab_size = 20, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2,
      num_attention_heads = 4, num_key_value_heads = 2 })
    local path = tmpfile()
    m:save(path)
    local _, _, names = checkpoint.load_tensors(path)
    assert.are.equal("model.embed_tokens.weight", names[1])
    assert.are.equal("lm_head.weight", names[#names])
    local back = ember.models.Llama.from_safetensors(path, { num_attention_heads = 4 })
    os.remove(path)
    local ids = ember.tensor({ { 3, 1, 20, 7 } }, "int64")
    assert.is_true(ember.no_grad(function() return m(ids) == back(ids) end))
  end)

  it("trains: one AdamW step lowers the loss on a batch, every parameter gets a gradient", function()
    ember.manual_seed(5)
    local m = ember.models.Llama({ vocab_size = 20, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2,
      num_attention_heads = 4, num_key_value_heads = 1, initializer_range = 0.2 })
    local opt = ember.optim.AdamW(m:parameters(), { lr = 1e-2 })
    local ids = ember.randint(1, 21, { 4, 9 })
    local function loss()
      local logits = m(ids:narrow(2, 1, 8))
      return ember.nn.CrossEntropyLoss()(logits:reshape(-1, 20), ids:narrow(2, 2, 8):reshape(-1))
    end
    local l0 = loss()
    l0:backward()
    for name, p in pairs(m:named_parameters()) do assert(p.grad ~= nil, name .. " has no gradient") end
    opt:step()
    assert(loss():item() < l0:item())
  end)
end)

describe("ember.models.Llama with a variant written in Lua", function()
  local models = require "ember.models"
  local function cfg(extra)
    local c = { vocab_size = 20, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 2,
                num_attention_heads = 4, num_key_value_heads = 2 }
    for k, v in pairs(extra) do c[k] = v end
    return c
  end

  it("prefix_lm (causal = false): the prefix sees itself both ways, the rest is causal; generate takes its inputs", function()
    ember.manual_seed(3)
    local m = models.Llama(cfg { attention = "prefix_lm", causal = false })
    local n = ember.tensor({ 3 }, { dtype = "int64" })
    local vi = { variant_inputs = { prefix = n } }
    local x = ember.tensor({ { 3, 5, 7, 2, 6 } }, { dtype = "int64" })
    local y = ember.tensor({ { 3, 5, 9, 2, 6 } }, { dtype = "int64" }) -- position 3 (in the prefix) changed
    local z = ember.tensor({ { 3, 5, 7, 8, 6 } }, { dtype = "int64" }) -- position 4 (after it) changed
    local lx = m(x, vi)
    assert.is_true((lx:narrow(2, 1, 1) - m(y, vi):narrow(2, 1, 1)):abs():max():item() > 0)
    assert.are.equal(0, (lx:narrow(2, 1, 3) - m(z, vi):narrow(2, 1, 3)):abs():max():item())
    -- cached generation equals uncached, with the inputs as a table or a function of the call
    local a = generate.generate(m, x, { max_new_tokens = 4, variant_inputs = { prefix = n } })
    local b = generate.generate(m, x, { max_new_tokens = 4, use_cache = false,
      variant_inputs = function(start, L) assert(start >= 1 and L >= 1); return { prefix = n } end })
    assert.is_true(ember.equal(a, b))
    -- and the whole generated sequence's logits agree with the cached steps' choice
    assert.are.same({ 1, 9 }, a.shape)
  end)

  it("the default (causal) with the standard variant is unchanged; bad keys are errors", function()
    ember.manual_seed(4)
    local m = models.Llama(cfg {})
    local x = ember.tensor({ { 3, 5, 7 } }, { dtype = "int64" })
    local l = m(x)
    local w = m(ember.tensor({ { 3, 5, 9 } }, { dtype = "int64" }))
    assert.are.equal(0, (l:narrow(2, 1, 2) - w:narrow(2, 1, 2)):abs():max():item())
    assert.truthy(select(2, pcall(models.Llama, cfg { causal = "no" })):find("config.causal must be a boolean", 1, true))
    assert.truthy(select(2, pcall(models.Llama, cfg { attention = 3 })):find("config.attention must be", 1, true))
    assert.truthy(select(2, pcall(generate.generate, m, x, { variant_inputs = 3 })):find(
      "variant_inputs must be a table", 1, true))
  end)
end)

describe("ember.models.ViT", function()
  local gradcheck = require "tests.lua.helpers.gradcheck"
  local function sz(t)
    local o = {}
    for i = 1, t.ndim do o[i] = t.shape[i] end
    return o
  end
  local function tiny(extra)
    local c = { image_size = { 4, 6 }, patch_size = 2, in_channels = 2, num_classes = 3, hidden_dim = 4, num_layers = 1,
                num_heads = 2, mlp_dim = 8 }
    for k, v in pairs(extra or {}) do c[k] = v end
    return ember.models.ViT(c)
  end

  it("shapes, names, cls and mean pooling", function()
    local m = ember.models.ViT({ image_size = 8, patch_size = 4, in_channels = 3, num_classes = 5, hidden_dim = 16,
      num_layers = 2, num_heads = 4, mlp_dim = 32 })
    local x = ember.randn(6, 3, 8, 8)
    assert.are.same({ 6, 5 }, sz(m(x)))
    assert.are.same({ 6, 5, 16 }, sz(m:features(x)))
    local names = m:parameter_names()
    assert.are.same({ "class_token", "pos_embedding", "conv_proj.weight", "conv_proj.bias" },
      { names[1], names[2], names[3], names[4] })
    assert.are.same({ 1, 5, 16 }, sz(m.pos_embedding))
    assert.are.equal("layers.1.self_attn.q_proj.weight", names[4 + 16 + 1])
    assert.are.same({ "head.weight", "head.bias" }, { names[#names - 1], names[#names] })
    local mean = ember.models.ViT({ image_size = 8, patch_size = 4, in_channels = 3, num_classes = 5, hidden_dim = 16,
      num_layers = 1, num_heads = 4, mlp_dim = 32, pool = "mean" })
    assert.are.same({ 6, 5 }, sz(mean(x)))
  end)

  it("the patch embedding is a Linear on row-major patches (conv_proj's weight reshaped)", function()
    local m = tiny({ dtype = "float64" })
    m.layers = ember.nn.ModuleList() -- no layers: features = norm(cat(cls, patches W^T + b) + pos)
    local x = ember.randn({ 3, 2, 4, 6 }, { dtype = "float64" })
    -- [B, C, h, p, w, p] -> [B, h, w, C, p, p] -> [B, h*w, C*p*p]
    local patches = x:reshape(3, 2, 2, 2, 3, 2):permute(1, 3, 5, 2, 4, 6):reshape(3, 6, 8)
    local w = m.conv_proj.weight:reshape(4, 8)
    local tokens = patches:matmul(w:transpose(1, 2)) + m.conv_proj.bias
    local want = m.norm(ember.cat({ m.class_token:expand(3, 1, 4), tokens }, 2) + m.pos_embedding)
    local got = m:features(x)
    assert(max_abs(got, want) < 1e-12, "features differ from the patch Linear")
    -- and the check can fail: column-major patches give other tokens
    local wrong = x:reshape(3, 2, 2, 2, 3, 2):permute(1, 5, 3, 2, 4, 6):reshape(3, 6, 8)
    local bad = m.norm(ember.cat({ m.class_token:expand(3, 1, 4), wrong:matmul(w:transpose(1, 2)) + m.conv_proj.bias }, 2)
      + m.pos_embedding)
    assert(max_abs(got, bad) > 1e-3)
  end)

  it("one AdamW step lowers the loss", function()
    ember.manual_seed(3)
    local m = tiny()
    local opt = ember.optim.AdamW(m:parameters(), { lr = 1e-2 })
    local x, y = ember.randn(8, 2, 4, 6), ember.randint(1, 4, { 8 })
    local crit = ember.nn.CrossEntropyLoss()
    local l0 = crit(m(x), y)
    l0:backward()
    for name, p in pairs(m:named_parameters()) do assert(p.grad ~= nil, name .. " has no gradient") end
    opt:step()
    assert(crit(m(x), y):item() < l0:item())
  end)

  it("float64 gradcheck: input, class token, positions, patch embedding, head", function()
    ember.manual_seed(11)
    local m = tiny({ dtype = "float64" })
    ember.no_grad(function() m.head.weight:copy_(ember.randn({ 3, 4 }, { dtype = "float64" })) end) -- not zero
    local x = ember.randn({ 2, 2, 4, 6 }, { dtype = "float64" })
    gradcheck.check(function(xx) return m(xx) end, { x, m.class_token, m.pos_embedding, m.conv_proj.weight,
      m.layers[1].self_attn.q_proj.weight, m.head.weight }, { name = "ViT" })
  end)

  it("bad configs and inputs: errors naming ViT at the caller's line", function()
    raises_here(function() tiny({ image_size = 5 }) end, "must be a multiple of the patch size")
    raises_here(function() tiny({ hidden = 4 }) end, "unknown config key 'hidden'")
    raises_here(function() tiny({ pool = "max" }) end, "config.pool must be")
    raises_here(function() tiny()(ember.randn(1, 3, 4, 6)) end, "ViT.forward: images must be [B, 2, 4, 6], got [1, 3, 4, 6]")
  end)
end)

describe("ember.models.CrossAttentionVLM (the Sort-of-CLEVR demo's model)", function()
  local soc = require("ember.data").sort_of_clevr
  local scenes = soc.generate { n_images = 4, seed = 3 }
  local img = soc.render(scenes)
  local q, a = scenes.questions:narrow(2, 1, 5), scenes.answers:narrow(2, 1, 5) -- 5 questions per image
  local slopes = { -1000, 1000, 0, 0 }

  it("logits per question, the script's state-dict names, attention weights", function()
    ember.manual_seed(0)
    local m = ember.models.CrossAttentionVLM({ distance_slopes = slopes, subject_slopes = slopes })
    local logits, w, mask, at = m(img, q, true)
    assert.are.same({ 20, #soc.ANSWERS }, { logits.shape[1], logits.shape[2] })
    assert.are.same({ 20, 4, 2, soc.N_OBJECTS }, { w.shape[1], w.shape[2], w.shape[3], w.shape[4] })
    assert.are.equal(soc.N_OBJECTS, mask.shape[2])
    assert.are.equal(mask.shape[3], at.shape[2])
    local names = m:parameter_names()
    assert.are.equal("pixel.1.weight", names[1])
    assert.are.equal("head.3.bias", names[#names])
    local sd = m:state_dict()
    for _, k in ipairs({ "pix_value.weight", "object_embed.weight", "img1.self_attn.q_proj.weight", "q_embed.weight",
                         "q_pos.weight", "cross2.ff.linear1.weight", "norm.weight" }) do
      assert(sd[k] ~= nil, "no " .. k)
    end
    assert.is_nil(sd.pix_key) -- colour slots have no learned keys
    assert.are.equal(179658, m:num_parameters()) -- the script's default model (its log says so)
    local learned = ember.models.CrossAttentionVLM({ slots = "learned", relative = true })
    assert(learned:state_dict()["pix_key.weight"] ~= nil and learned:state_dict()["rel_embed.1.weight"] ~= nil)
  end)

  it("the distance biases route by distance: the nearest-object head of the image layers changes the tokens", function()
    ember.manual_seed(0)
    local with = ember.models.CrossAttentionVLM({ distance_slopes = slopes })
    ember.manual_seed(0)
    local without = ember.models.CrossAttentionVLM({})
    local a1 = ember.no_grad(function() return with:encode_image(img) end)
    local a2 = ember.no_grad(function() return without:encode_image(img) end)
    assert(max_abs(a1, a2) > 1e-3)
  end)

  it("one AdamW step lowers the loss", function()
    ember.manual_seed(1)
    local m = ember.models.CrossAttentionVLM({ distance_slopes = slopes, subject_slopes = slopes, image_layers = 1,
      cross_layers = 1 })
    local opt = ember.optim.AdamW(m:parameters(), { lr = 3e-3 })
    local l0 = ember.cross_entropy(m(img, q), a:reshape(-1))
    l0:backward()
    opt:step()
    assert(ember.cross_entropy(m(img, q), a:reshape(-1)):item() < l0:item())
  end)

  it("bad configs: errors at the caller's line", function()
    raises_here(function() ember.models.CrossAttentionVLM({ distance_slopes = { 1, 2 } }) end,
      "config.distance_slopes must list one slope per head (4), got 2 slopes")
    raises_here(function() ember.models.CrossAttentionVLM({ slots = "pixels" }) end, "config.slots must be")
    raises_here(function() ember.models.CrossAttentionVLM({ d_modle = 8 }) end, "unknown config key 'd_modle'")
    -- a variant that reads per-call tensors: refused when built, not at the first forward
    raises_here(function() ember.models.CrossAttentionVLM({ attention = "document" }) end,
      "attention 'document' needs per-call tensors (doc), which this model's forward does not take")
    local m = ember.models.CrossAttentionVLM({ stem = "conv", d_model = 32, heads = 4 })
    local q = ember.ones(2, 3, 2, { dtype = "int64" })
    raises_here(function() m(ember.rand(2, 3, 64, 64), q) end,
      "CrossAttentionVLM.forward: images must be [B, 3, 75, 75] (image_size 75), got [2, 3, 64, 64]")
    raises_here(function() m(ember.rand(2, 3, 75, 75), ember.ones(2, 3, { dtype = "int64" })) end,
      "CrossAttentionVLM.forward: questions must be int64 [B=2, Q, 2]")
  end)
end)

describe("ember.models.CrossAttentionVLM{stem = \"conv\"} (Sort-of-CLEVR from pixels)", function()
  local soc = require("ember.data").sort_of_clevr
  local scenes = soc.generate { n_images = 4, seed = 3 }
  local img = soc.render(scenes)
  local q, a = scenes.questions:narrow(2, 1, 5), scenes.answers:narrow(2, 1, 5) -- 5 questions per image

  it("logits per question, 5x5 = 25 image tokens from four stride-2 convolutions, names, a heat map", function()
    ember.manual_seed(0)
    local m = ember.models.CrossAttentionVLM({ stem = "conv" })
    local logits, w, mask, at = m(img, q, true)
    assert.are.same({ 20, #soc.ANSWERS }, { logits.shape[1], logits.shape[2] })
    assert.are.same({ 20, 4, 2, 25 }, { w.shape[1], w.shape[2], w.shape[3], w.shape[4] })
    assert.is_nil(mask)
    assert.is_nil(at)
    local tok = ember.no_grad(function() return m:encode_conv(img) end)
    assert.are.same({ 4, 25, 64 }, { tok.shape[1], tok.shape[2], tok.shape[3] })
    local sd = m:state_dict()
    for _, k in ipairs({ "stem.1.weight", "stem.2.running_mean", "stem.10.weight", "token_embed.weight",
                         "img1.self_attn.q_proj.weight", "q_embed.weight", "q_pos.weight", "cross2.ff.linear1.weight",
                         "norm.weight", "head.3.bias" }) do
      assert(sd[k] ~= nil, "no " .. k)
    end
    for k in pairs(sd) do -- none of the pixel stem's given parts
      assert(not (k:find("^pix") or k:find("^object_embed") or k:find("^slot") or k:find("slopes")), k)
    end
    assert.are.same({ 24, 5, 3, 3 }, { sd["stem.1.weight"].shape[1], sd["stem.1.weight"].shape[2],
                                       sd["stem.1.weight"].shape[3], sd["stem.1.weight"].shape[4] })
    local heat = m:attention_heat(w[1])
    assert.are.same({ soc.SIZE, soc.SIZE }, { heat.shape[1], heat.shape[2] })
    assert(math.abs(heat[1][1]:item() - w[1]:mean(1):mean(1)[1]:item()) < 1e-6) -- pixel (1, 1) is cell 1's
    -- three convolutions: 75 -> 38 -> 19 -> 10, 100 tokens
    local m3 = ember.models.CrossAttentionVLM({ stem = "conv", stem_channels = { 8, 8, 8 } })
    local _, w3 = m3(img, q, true)
    assert.are.equal(100, w3.shape[4])
  end)

  it("backward reaches every parameter, one AdamW step lowers the loss; eval mode uses BatchNorm's running statistics", function()
    ember.manual_seed(1)
    local m = ember.models.CrossAttentionVLM({ stem = "conv", image_layers = 1, cross_layers = 1 })
    local opt = ember.optim.AdamW(m:parameters(), { lr = 3e-3 })
    local l0 = ember.cross_entropy(m(img, q), a:reshape(-1))
    l0:backward()
    for i, p in ipairs(m:parameters()) do
      assert(p.grad ~= nil and p.grad:abs():sum():item() > 0, "no gradient for " .. m:parameter_names()[i])
    end
    opt:step()
    assert(ember.cross_entropy(m(img, q), a:reshape(-1)):item() < l0:item())
    local train_out = ember.no_grad(function() return m(img, q) end)
    m:eval()
    local eval_out = ember.no_grad(function() return m(img, q) end)
    assert(max_abs(train_out, eval_out) > 1e-4) -- batch statistics against running ones
  end)

  it("condition = true: the question modulates the image tokens (FiLM), one set of tokens per question", function()
    ember.manual_seed(5)
    local m = ember.models.CrossAttentionVLM({ stem = "conv", condition = true, image_layers = 1, cross_layers = 1 })
    local tok = ember.no_grad(function() return m:encode_conv(img, q) end)
    assert.are.same({ 20, 25, 64 }, { tok.shape[1], tok.shape[2], tok.shape[3] })
    -- with the FiLM projection at zero the tokens are the unconditioned ones, for every question
    ember.no_grad(function() m.film.weight:zero_(); m.film.bias:zero_() end)
    local plain = ember.no_grad(function() return m:encode_conv(img) end)
    local zeroed = ember.no_grad(function() return m:encode_conv(img, q) end)
    assert(max_abs(zeroed:view(4, 5, 25, 64), plain:unsqueeze(2):expand(4, 5, 25, 64)) < 1e-6)
    -- questions about the same image get different tokens once the projection is not zero
    ember.no_grad(function() m.film.weight:copy_(ember.randn(128, 64) * 0.1) end)
    local cond = ember.no_grad(function() return m:encode_conv(img, q) end):view(4, 5, 25, 64)
    assert(max_abs(cond:select(2, 1), cond:select(2, 2)) > 1e-3)
    -- the logits' shape is the plain model's; the gradient reaches the FiLM projection
    local logits = m(img, q)
    assert.are.same({ 20, #soc.ANSWERS }, { logits.shape[1], logits.shape[2] })
    ember.cross_entropy(logits, a:reshape(-1)):backward()
    assert(m.film.weight.grad:abs():sum():item() > 0)
    assert(m:state_dict()["film.weight"] ~= nil)
    raises_here(function() ember.models.CrossAttentionVLM({ condition = true }) end,
      "config.condition is for stem = \"conv\"")
    raises_here(function() ember.models.CrossAttentionVLM({ stem = "conv", condition = "yes" }) end,
      "config.condition must be a boolean, got yes")
  end)

  it("the image matters: the logits change with the picture", function()
    ember.manual_seed(2)
    local m = ember.models.CrossAttentionVLM({ stem = "conv" }):eval()
    local other = soc.render(soc.generate { n_images = 4, seed = 4 })
    local l1 = ember.no_grad(function() return m(img, q) end)
    local l2 = ember.no_grad(function() return m(other, q) end)
    assert(max_abs(l1, l2) > 1e-4)
  end)

  it("bad configs: the pixel stem's given parts are refused, errors at the caller's line", function()
    raises_here(function() ember.models.CrossAttentionVLM({ stem = "cnn" }) end,
      "config.stem must be \"pixels\" or \"conv\", got cnn")
    for _, k in ipairs({ "distance_slopes", "subject_slopes" }) do
      raises_here(function() ember.models.CrossAttentionVLM({ stem = "conv", [k] = { -1000, 1000, 0, 0 } }) end,
        "config." .. k .. " is for stem = \"pixels\"")
    end
    raises_here(function() ember.models.CrossAttentionVLM({ stem = "conv", slots = "learned" }) end,
      "config.slots is for stem = \"pixels\"")
    raises_here(function() ember.models.CrossAttentionVLM({ stem = "conv", relative = true }) end,
      "config.relative is for stem = \"pixels\"")
    raises_here(function() ember.models.CrossAttentionVLM({ stem = "conv", stem_channels = {} }) end,
      "config.stem_channels must list the channels of each convolution")
    raises_here(function() ember.models.CrossAttentionVLM({ stem = "conv", stem_channels = { 8, 0 } }) end,
      "config.stem_channels must hold positive integers, got 0")
    raises_here(function() ember.models.CrossAttentionVLM({ stem_channels = { 8 } }) end,
      "config.stem_channels is for stem = \"conv\"")
    local m = ember.models.CrossAttentionVLM({ stem = "conv" })
    raises_here(function() m(ember.rand(2, 1, 75, 75), q:narrow(1, 1, 2)) end, "CrossAttentionVLM.forward: images must be [B, 3, 75, 75]")
  end)
end)
