-- ember.models as a Hugging Face user configures, loads and saves them:
-- Llama with tie_word_embeddings and a state dict that lists lm_head.weight
-- too, save_pretrained's bos_token_id, from_pretrained's torch_dtype; a
-- head count that does not divide the width, named by the model's own
-- config keys; nn.CrossAttentionBlock's shape errors.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local raises_here = parity.raises_here

-- the message of a failed call, or nil
local err_of = parity.error_of

describe("models.Llama with tie_word_embeddings", function()
  local Llama = require("ember.models").Llama
  local cfg = { vocab_size = 20, hidden_size = 8, intermediate_size = 16, num_hidden_layers = 1,
                num_attention_heads = 2, tie_word_embeddings = true }

  it("load_state_dict takes a state dict that lists the tied weight under lm_head.weight too", function()
    -- PyTorch's state_dict() of a tied LlamaForCausalLM holds both names; was:
    -- 'Llama.load_state_dict: names do not match the module: unexpected lm_head.weight'
    ember.manual_seed(1)
    local src = Llama(cfg)
    local sd = src:state_dict()
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]:clone()
    local m = Llama(cfg)
    m:load_state_dict(sd)
    local ids = ember.tensor({ { 3, 7, 2 } }, { dtype = "int64" })
    assert.is_true(m(ids):equal(src(ids)))
    assert.is_not_nil(sd["lm_head.weight"]) -- the caller's table is left as it was
  end)

  it("an lm_head.weight that differs from the embedding is an error naming both", function()
    local sd = Llama(cfg):state_dict()
    sd["lm_head.weight"] = ember.randn(20, 8)
    assert.matches("models_hf_config_spec.lua:%d+: Llama.load_state_dict: lm_head.weight differs from "
      .. "model.embed_tokens.weight, but tie_word_embeddings is set", err_of(function() Llama(cfg):load_state_dict(sd) end))
  end)
end)

describe("models.Llama save_pretrained", function()
  it("keeps config.json's bos_token_id (was dropped: transformers then read its own default)", function()
    local Llama = require("ember.models").Llama
    local m = Llama{ vocab_size = 20, hidden_size = 8, intermediate_size = 16, num_hidden_layers = 1,
                     num_attention_heads = 2, bos_token_id = 7, eos_token_id = 9 }
    local dir = os.tmpname()
    os.remove(dir)
    m:save_pretrained(dir)
    local f = io.open(dir .. "/config.json")
    local cfg = ember._json_decode(f:read("a"))
    f:close()
    os.remove(dir .. "/config.json")
    os.remove(dir .. "/model.safetensors")
    os.remove(dir)
    assert.are.equal(7, cfg.bos_token_id)
    assert.are.equal(9, cfg.eos_token_id)
    assert.matches("config.bos_token_id must be a token id >= 0", err_of(function()
      Llama{ vocab_size = 20, hidden_size = 8, intermediate_size = 16, num_hidden_layers = 1, num_attention_heads = 2,
             bos_token_id = -1 }
    end))
  end)
end)

describe("Llama.from_pretrained's torch_dtype (transformers' from_pretrained(dir, torch_dtype=...))", function()
  local Llama = require("ember.models").Llama
  local dir = "tests/fixtures/llama_family/llama31" -- config.json says torch_dtype float32
  local ids = ember.tensor({ { 3, 9, 27, 4 } }, { dtype = "int64" })

  it("loads the parameters in that dtype (it was read as a config key and ignored)", function()
    local want = Llama.from_pretrained(dir):to("bfloat16")
    for _, o in ipairs { { torch_dtype = "bfloat16" }, { dtype = "bfloat16" }, { torch_dtype = "torch.bfloat16" } } do
      local m = Llama.from_pretrained(dir, o)
      local n = 0
      for name, p in m:named_parameters() do
        n = n + 1
        assert.are.equal("bfloat16", p.dtype, name)
      end
      assert(n > 0)
      assert.is_true(rawequal(m:output_weight(), m.model.embed_tokens.weight), "tied embeddings stay tied")
      assert.is_true(m(ids):equal(want(ids)))
      assert.is_false(m.training)
    end
    assert.are.equal("float64", Llama.from_pretrained(dir, { torch_dtype = "float64" }).model.norm.weight.dtype)
    -- "auto": config.json's
    assert.are.equal("float32", Llama.from_pretrained(dir, { torch_dtype = "auto" }).model.norm.weight.dtype)
  end)

  it("refuses float16, another name and two that disagree, at the user's line", function()
    raises_here(function() Llama.from_pretrained(dir, { torch_dtype = "float16" }) end, "ember has no float16")
    raises_here(function() Llama.from_pretrained(dir, { torch_dtype = "int64" }) end,
      "torch_dtype must be \"bfloat16\", \"float32\", \"float64\" or \"auto\"")
    raises_here(function() Llama.from_pretrained(dir, { torch_dtype = "bfloat16", dtype = "float32" }) end, "disagree")
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
    assert.truthy(err:find("models_hf_config_spec.lua:" .. line .. ": ViT: config.hidden_dim (64) must be divisible "
      .. "by num_heads (3)", 1, true), err)
    line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(models.CrossAttentionVLM, { d_model = 64, heads = 3 })
    assert.is_false(ok)
    assert.truthy(err:find("models_hf_config_spec.lua:" .. line .. ": CrossAttentionVLM: config.d_model (64) must be "
      .. "divisible by heads (3)", 1, true), err)
  end)
end)

describe("nn.CrossAttentionBlock", function()
  it("CrossAttentionBlock's shape errors name its text and image, not the attention's query and key", function()
    local parity = require "tests.lua.helpers.parity"
    local blk = nn.CrossAttentionBlock(16, 4, { self_attention = true })
    parity.raises_here(function() blk(ember.randn(2, 3, 16), ember.randn(2, 9, 8)) end,
      "CrossAttentionBlock.forward: image must be [B=2, Li, image_dim=16], got [2, 9, 8] (image tokens of another "
      .. "width: nn.CrossAttentionBlock(d_model, heads, {image_dim = n}))")
    parity.raises_here(function() blk(ember.randn(2, 3, 16), ember.randn(3, 9, 16)) end,
      "CrossAttentionBlock.forward: image must be [B=2, Li, image_dim=16], got [3, 9, 16]")
    parity.raises_here(function() blk(ember.randn(3, 16), ember.randn(2, 9, 16)) end,
      "CrossAttentionBlock.forward: text must be [B, Lt, d_model=16], got [3, 16]")
    local wide = nn.CrossAttentionBlock(16, 4, { image_dim = 8 })
    assert.is_true(wide(ember.randn(2, 3, 16), ember.randn(2, 9, 8)).shape == ember.Size { 2, 3, 16 })
  end)
end)
