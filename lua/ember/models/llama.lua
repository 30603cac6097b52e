--- models.Llama (ember.models.Llama): a Llama-style decoder-only language
-- model, with Hugging Face's `LlamaForCausalLM` configuration names and
-- state-dict layout, so a safetensors checkpoint in that layout loads.
--
--    local Llama = require("ember.models").Llama
--    local model = Llama{vocab_size = 61, hidden_size = 32, intermediate_size = 64,
--                        num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2}
--    local ids = ember.tensor({{1, 5, 9}, {2, 7, 3}}, {dtype = "int64"})   -- [B, L], 1-based
--    print(model(ids).shape)                         --> ember.Size{2, 3, 61}
--    -- a Hugging Face checkpoint in the current folder (the config gives what
--    -- the file's shapes do not say; the tests run this on a tiny one)
--    local m = Llama.from_safetensors("model.safetensors", {num_attention_heads = 32})
--    -- or a whole Hugging Face folder (config.json, model.safetensors or its shards):
--    -- Llama.from_pretrained("TinyLlama-1.1B-Chat-v1.0"); m:save_pretrained("out") writes one
--    local out = require("ember.generate").generate(m, ids, {max_new_tokens = 20})
--    print(out.shape)                                --> ember.Size{2, 23}
--
-- The architecture: token embedding, then `num_hidden_layers` blocks of
--
--    h = h + self_attn(input_layernorm(h))            -- causal, RoPE, GQA
--    h = h + mlp(post_attention_layernorm(h))         -- SwiGLU: down(silu(gate(x)) * up(x))
--
-- then a final RMSNorm and `lm_head` (the embedding's transpose when
-- `tie_word_embeddings`). The module tree carries Hugging Face's names, so
-- `state_dict()` holds exactly Hugging Face's keys (no mapping):
--
--    model.embed_tokens.weight
--    model.layers.<i>.self_attn.{q,k,v,o}_proj.weight   (i from 0)
--    model.layers.<i>.mlp.{gate,up,down}_proj.weight
--    model.layers.<i>.input_layernorm.weight, model.layers.<i>.post_attention_layernorm.weight
--    model.norm.weight
--    lm_head.weight                                      (absent when tied, as in Hugging Face's files)
--
-- `self_attn` is an nn.MultiHeadAttention (kv_heads, rope, causal, no bias)
-- whose output projection is registered as `o_proj`; its rotary embedding
-- is the "rotate_half" form (the head dim's first half paired with its
-- second half, as GPT-NeoX and Hugging Face's Llama), which is the layout of
-- Hugging Face's q_proj/k_proj weights, so they load without permuting rows.
-- (Meta's original checkpoints pair interleaved dims instead; Hugging Face's
-- conversion script permutes them into this layout.) `mlp` is the gated
-- FFN of nn.FeedForward{activation = "swiglu"} under Hugging Face's names
-- (gate_proj = linear1, up_proj = linear3, down_proj = linear2).
--
-- `gradient_checkpointing_enable()` recomputes each layer in the backward
-- (activation checkpointing, as Hugging Face's method of that name).
--
-- The Llama family loads (`from_pretrained` reads config.json's
-- `model_type`; transformers' modeling code of each is the reference):
--
--    llama    Llama 1/2/3, 3.1, 3.2, 3.3, TinyLlama, SmolLM: `rope_scaling`
--             "llama3", "linear", "dynamic", "yarn" (or the older key
--             `type`; transformers 5's `rope_parameters` too),
--             `attention_bias` (q, k, v and o_proj with biases), `head_dim`
--    qwen2    Qwen2, Qwen2.5: q, k and v with biases, o_proj without; with
--             `use_sliding_window`, layers from `max_window_layers` on slide
--    qwen3    Qwen3 (dense): `head_dim` apart from hidden_size / heads
--             (q_proj [heads * head_dim, hidden_size]), `q_norm`/`k_norm`
--             (an RMSNorm over each head of q and k before RoPE; the
--             model_type, not the file, says they are there)
--    mistral  Mistral: `sliding_window` W, query i sees keys i - W < j <= i
--             (the "local" attention variant; cached decoding equals the
--             full forward)
--
-- "dynamic" computes the frequencies from each call's length (its last
-- position + 1), as transformers: past max_position_embeddings a cached
-- key keeps the rotation of the call that made it, so KV-cached decoding
-- then differs from a full recompute, as it does in transformers. Not
-- supported (an error names them): other model types (Gemma's
-- architecture differs beyond the config), rope types "longrope" and
-- others, `partial_rotary_factor`, mlp_bias, activations other than silu.
-- The configuration checks and the rope math are models/_llama_config.lua
-- and models/_rope_scaling.lua.
--
-- Token ids are ember's, 1-based: Hugging Face's id + 1 (row i + 1 of the
-- embedding is Hugging Face's row i, so the weights load as they are).
-- Positions count from 0 at the first token (RoPE), as Hugging Face's.
-- Tested against a minimal PyTorch Llama (tests/gen_llama_fixtures.py):
-- logits and greedy generation (tests/lua/models_spec.lua); each variant
-- above against tests/gen_llama_family.py (tests/lua/llama_family_spec.lua).
-- @classmod models.Llama
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local Module = require "ember.nn.Module"
local Linear = require "ember.nn.Linear"
local Embedding = require "ember.nn.Embedding"
local RMSNorm = require "ember.nn.RMSNorm"
local ModuleList = require "ember.nn.ModuleList"
local MultiHeadAttention = require "ember.nn.MultiHeadAttention"
local checkpoint = require("ember.nn.activation_checkpoint").checkpoint
local llama_config = require "ember.models._llama_config"
local rope_scaling = require "ember.models._rope_scaling"

local raise = errors.raise
local shape_str = errors.shape_str

-- The configuration (Hugging Face's LlamaConfig, MistralConfig,
-- Qwen2Config and Qwen3Config names): models/_llama_config.lua.
local check_config = llama_config.check

-- Self-attention of one block: nn.MultiHeadAttention with RoPE and GQA,
-- its output projection named o_proj (Hugging Face's name); biases, the
-- head width, Qwen3's q_norm/k_norm, the sliding window and the rope
-- scaling as the config says (models/_llama_config.lua).
local LlamaAttention = MultiHeadAttention:extend("LlamaAttention")

function LlamaAttention:__init(c, layer)
  local window = c.windows and c.windows[layer]
  local spec = {
    d_model = c.hidden_size, heads = c.num_attention_heads, kv_heads = c.num_key_value_heads, head_dim = c.head_dim,
    bias = c.qkv_bias == true, rope = true, rope_base = c.rope_theta, causal = c.causal, attention = c.attention,
    dropout = c.attention_dropout, -- Hugging Face's attention_dropout: on the attention weights, in training mode
  }
  if window then
    -- Hugging Face's sliding window: query i sees keys j with i - window < j <= i
    spec.attention, spec.window_left, spec.window_right = "local", window - 1, 0
  end
  require("ember.nn._attn_opts").merge_variant_options(spec, c.attention_options, "config.attention_options")
  MultiHeadAttention.__init(self, spec)
  local o = self.out_proj
  if c.o_bias ~= (c.qkv_bias == true) then o.bias = nil end -- Qwen2: q, k, v with biases, o_proj without
  self.out_proj = nil -- unregistered ...
  self.o_proj = o     -- ... and registered again under Hugging Face's name
  rawset(self, "out_proj", o) -- a plain field: MultiHeadAttention's code calls self.out_proj
  if c.qk_norm then
    -- Qwen3: an RMSNorm over each head of q and of k, before RoPE
    self.q_norm = RMSNorm(c.head_dim, { eps = c.rms_norm_eps })
    self.k_norm = RMSNorm(c.head_dim, { eps = c.rms_norm_eps })
  end
  rawset(self, "_scaling", c.rope_scaling)
  rawset(self, "_max_pos", c.max_position_embeddings)
end

-- MultiHeadAttention's hook on the heads of q ("q") and k ("k"), [B, H, L, dh], before RoPE.
function LlamaAttention:_head_norm(x, which)
  if which == "q" then return self.q_norm and self.q_norm(x) or x end
  return self.k_norm and self.k_norm(x) or x
end

-- MultiHeadAttention's hook on RoPE's frequencies: the config's rope_scaling.
function LlamaAttention:_rope_frequencies(n, dh)
  local s = rawget(self, "_scaling")
  return s and rope_scaling.frequencies(s, dh, self.rope_base, rawget(self, "_max_pos"), n) or nil
end

--- No names of earlier ember versions (MultiHeadAttention's would point at out_proj).
-- @treturn nil
function LlamaAttention:legacy_names() return nil end

--- Hugging Face's names are PyTorch's already: `torch_state_dict` keeps
-- q_proj, k_proj and v_proj apart (MultiHeadAttention's would stack them
-- into torch.nn.MultiheadAttention's in_proj_weight).
-- @tparam table sd
-- @treturn table
function LlamaAttention:to_torch_names(sd) return sd end

-- The gated MLP under Hugging Face's names: down_proj(silu(gate_proj(x)) * up_proj(x)).
local LlamaMLP = Module:extend("LlamaMLP")

function LlamaMLP:__init(c)
  local o = { bias = false }
  self.gate_proj = Linear(c.hidden_size, c.intermediate_size, o)
  self.up_proj = Linear(c.hidden_size, c.intermediate_size, o)
  self.down_proj = Linear(c.intermediate_size, c.hidden_size, o)
end

--- down_proj(silu(gate_proj(x)) * up_proj(x)), the gate in one pass each way
-- (`ember._gated`; the same values as silu then the product).
-- @tparam Tensor x [..., hidden_size]
-- @treturn Tensor [..., hidden_size]
function LlamaMLP:forward(x)
  return self.down_proj(ember._gated("silu", self.gate_proj(x), self.up_proj(x)))
end

-- One pre-norm block.
local LlamaDecoderLayer = Module:extend("LlamaDecoderLayer")

function LlamaDecoderLayer:__init(c, layer)
  self.self_attn = LlamaAttention(c, layer)
  self.mlp = LlamaMLP(c)
  self.input_layernorm = RMSNorm(c.hidden_size, { eps = c.rms_norm_eps })
  self.post_attention_layernorm = RMSNorm(c.hidden_size, { eps = c.rms_norm_eps })
end

--- h + attention(norm(h)), then + mlp(norm(.)).
-- @tparam Tensor h [B, L, hidden_size] (with a cache: only the new positions)
-- @tparam[opt] table opts `cache` (this layer's KV cache table, see
-- MultiHeadAttention.forward_cached), `key_padding_mask` (bool, true = padding),
-- `variant_inputs` (the per-call tensors of an attention variant written in Lua)
-- @treturn Tensor [B, L, hidden_size]
function LlamaDecoderLayer:forward(h, opts)
  opts = opts or {}
  local x = self.input_layernorm(h)
  local a
  local o = { key_padding_mask = opts.key_padding_mask, variant_inputs = opts.variant_inputs,
              causal = self.self_attn.causal }
  if opts.cache then
    a = self.self_attn:forward_cached(x, opts.cache, o)
  else
    a = self.self_attn(x, o)
  end
  h = h + a
  return h + self.mlp(self.post_attention_layernorm(h))
end

-- The decoder body (Hugging Face's LlamaModel, the "model." prefix).
local LlamaModel = Module:extend("LlamaModel")

function LlamaModel:__init(c)
  self.gradient_checkpointing = false
  self.embed_tokens = Embedding(c.vocab_size, c.hidden_size)
  local layers = ModuleList()
  for i = 1, c.num_hidden_layers do layers:append(LlamaDecoderLayer(c, i)) end
  self.layers = layers
  self.norm = RMSNorm(c.hidden_size, { eps = c.rms_norm_eps })
end

--- The final hidden states.
-- @tparam Tensor ids int64 [B, L], 1-based
-- @tparam[opt] table opts `cache` (one sub-table per layer is kept in it), `key_padding_mask`
-- @treturn Tensor [B, L, hidden_size]
function LlamaModel:forward(ids, opts)
  opts = opts or {}
  local h = self.embed_tokens(ids)
  local cache = opts.cache
  for i, layer in ipairs(self.layers) do
    local lc
    if cache then
      cache[i] = cache[i] or { reserve = cache.reserve } -- positions to preallocate, if known
      lc = cache[i]
    end
    local lo = { cache = lc, key_padding_mask = opts.key_padding_mask, variant_inputs = opts.variant_inputs }
    if self.gradient_checkpointing and self.training and not cache and ember.is_grad_enabled() then
      h = checkpoint(layer, h, lo) -- recomputed in the backward (nn.checkpoint)
    else
      h = layer(h, lo)
    end
  end
  return self.norm(h)
end

local Llama = Module:extend("Llama")

-- A call's options: an unknown one is an error (silently ignoring Hugging
-- Face's attention_mask would attend to the padding).
-- Hugging Face's call options that ember spells otherwise: what to write instead.
local HF_OPTIONS = {
  attention_mask = "ember takes key_padding_mask, true = padding (Hugging Face's attention_mask is 1 = attend: "
    .. "key_padding_mask = attention_mask:eq(0))",
  labels = "ember's Llama returns the logits; Hugging Face's loss is nn.CrossEntropyLoss()(logits:narrow(2, 1, L - 1)"
    .. ":reshape(-1, vocab_size), labels:narrow(2, 2, L - 1):reshape(-1)) (the next token's, shifted by one)",
  past_key_values = "ember's KV cache is the option cache (a table, {} at a sequence's first call; see decode)",
  use_cache = "ember caches when given the option cache (a table, {} at a sequence's first call)",
}

local function check_call_options(who, opts, known)
  for k, hint in pairs(HF_OPTIONS) do
    if type(opts) == "table" and opts[k] ~= nil then raise("%s: unknown option '%s': %s", who, k, hint) end
  end
  return Module.check_options(who, opts, known)
end

--- Builds a randomly initialised model (as Hugging Face: every Linear and
-- the embedding ~ N(0, initializer_range^2), norms at one).
-- @tparam table config Hugging Face's LlamaConfig names (and Mistral's,
-- Qwen2's, Qwen3's by `model_type`: see the class's list): `vocab_size`,
-- `hidden_size`, `intermediate_size`, `num_hidden_layers`,
-- `num_attention_heads` (required); `num_key_value_heads` (default
-- num_attention_heads; fewer is grouped-query attention, 1 multi-query),
-- `rms_norm_eps` (1e-6), `rope_theta` (10000), `tie_word_embeddings`
-- (false), `initializer_range` (0.02); ember's own `attention` (the
-- self-attention's variant, "standard"), `attention_options` and `causal`
-- (true: the causal mask joins the variant's; false for a variant whose
-- mask decides alone, as "prefix_lm" with its bidirectional prefix). Other keys of a Hugging Face
-- config.json that do not change the computation (bos_token_id,
-- max_position_embeddings, ...) are ignored; `eos_token_id` and
-- `pad_token_id` (0-based) are kept as `generate`'s defaults; `hidden_act` must be "silu",
-- `mlp_bias` false; `model_type` ("llama"), `head_dim` (hidden_size /
-- num_attention_heads), `attention_bias` (false), `rope_scaling`,
-- `max_position_embeddings` (for the dynamic and yarn scalings), `attention_dropout` (0: dropout on
-- the attention weights in training mode, as Hugging Face's),
-- `sliding_window`, `use_sliding_window`, `max_window_layers`,
-- `layer_types` as the class's list says; an unknown key is an error.
-- @usage local Llama = require("ember.models").Llama
-- -- Llama 3.1's rope scaling, and a head width of its own (as Qwen3's configs give)
-- local m = Llama{vocab_size = 50, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 1,
--   num_attention_heads = 2, head_dim = 12, rope_theta = 500000.0, rope_scaling = {rope_type = "llama3",
--   factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 64}}
-- print(m.model.layers[1].self_attn.q_proj.weight.shape)   --> ember.Size{24, 16}
-- print(m(ember.tensor({{3, 1, 4}}, {dtype = "int64"})).shape)   --> ember.Size{1, 3, 50}
function Llama:__init(config)
  local c = check_config(config, "Llama")
  self.config = c
  self.model = LlamaModel(c)
  if not c.tie_word_embeddings then
    self.lm_head = Linear(c.hidden_size, c.vocab_size, { bias = false })
  end
  local std = c.initializer_range
  ember.no_grad(function()
    for _, p in ipairs(self:parameters()) do
      if p.ndim == 2 then p:normal_(0, std) end
    end
  end)
end

--- Activation checkpointing of every decoder layer, as Hugging Face's
-- `model.gradient_checkpointing_enable()`: in training mode with grad mode
-- on (and no KV cache) each layer keeps only its input and runs again in
-- the backward (`nn.checkpoint`), for the same gradients, bit for bit.
-- @treturn Llama self
-- @usage local m = require("ember.models").Llama{vocab_size = 50, hidden_size = 16, intermediate_size = 32,
--   num_hidden_layers = 2, num_attention_heads = 2}:gradient_checkpointing_enable()
-- m(ember.tensor({{3, 4, 5}}, {dtype = "int64"})):sum():backward()
function Llama:gradient_checkpointing_enable()
  self.model.gradient_checkpointing = true
  return self
end

--- Turns activation checkpointing off again.
-- @treturn Llama self
function Llama:gradient_checkpointing_disable()
  self.model.gradient_checkpointing = false
  return self
end

--- The output weight [vocab_size, hidden_size]: lm_head's, or the
-- embedding's when tie_word_embeddings.
-- @treturn Tensor
function Llama:output_weight()
  if self.config.tie_word_embeddings then return self.model.embed_tokens.weight end
  return self.lm_head.weight
end

--- Next-token logits.
-- @tparam Tensor ids int64 [B, L], 1-based (Hugging Face's id + 1)
-- @tparam[opt] table opts `key_padding_mask` (bool [B, L], true = padding),
-- `cache` (a table, {} at a sequence's first call: then later calls take
-- only the new ids; see `decode`), `variant_inputs` (per-call tensors of
-- the config's attention variant, e.g. `{prefix = n}` for "prefix_lm")
-- @treturn Tensor logits [B, L, vocab_size]
function Llama:forward(ids, opts)
  if not ember.is_tensor(ids) or ids.dtype ~= "int64" or ids.ndim ~= 2 then
    raise("Llama.forward: ids must be int64 [B, L] (1-based token ids), got %s",
      ember.is_tensor(ids) and (ids.dtype .. " " .. shape_str(ids)) or type(ids))
  end
  opts = check_call_options("Llama.forward", opts, { "key_padding_mask", "cache", "variant_inputs" })
  local h = self.model(ids, opts)
  if self.lm_head then return self.lm_head(h) end
  return h:matmul(self.model.embed_tokens.weight:transpose(1, 2))
end

--- ember.generate's contract: logits for ids, with the KV cache.
-- `generate.generate(model, prompt, {max_new_tokens = n})` calls it; the
-- first call gets the prompt and an empty cache, every later call only the
-- new token. RoPE positions come from the cache's length, so `start` is
-- not needed.
-- @tparam Tensor ids int64 [B, L], 1-based
-- @tparam[opt] table opts `cache`, `key_padding_mask`, `variant_inputs` (as generate passes them;
-- `start`, `memory` and `memory_key_padding_mask` are not used: no cross-attention)
-- @treturn Tensor logits [B, L, vocab_size]
function Llama:decode(ids, opts)
  opts = check_call_options("Llama.decode", opts,
    { "cache", "start", "memory", "memory_key_padding_mask", "key_padding_mask", "variant_inputs" })
  if opts.memory ~= nil then raise("Llama.decode: a decoder-only model takes no memory") end
  return self:forward(ids, { cache = opts.cache, key_padding_mask = opts.key_padding_mask,
    variant_inputs = opts.variant_inputs })
end

--- Decodes after `ids`, as Hugging Face's `model.generate`: ember.generate's
-- `generate(self, ids, opts)` (greedy by default; sampling, top-k/top-p,
-- repetition penalty, eos_id, stop, left-padded batches: its options).
-- As Hugging Face's generation config, the config's `eos_token_id` (an id
-- or a list, 0-based as config.json writes them) and `pad_token_id` are the
-- default eos_id and pad_id (+ 1: ember's ids are 1-based); from_pretrained
-- takes them from generation_config.json where the folder has one.
-- @tparam Tensor ids int64 [B, L], 1-based
-- @tparam[opt] table opts ember.generate's options (`max_new_tokens`, ...)
-- @return ids int64 [B, L + n] (and the logits with return_logits)
-- @usage local m = require("ember.models").Llama{vocab_size = 50, hidden_size = 16, intermediate_size = 32,
--   num_hidden_layers = 1, num_attention_heads = 2}
-- print(m:generate(ember.tensor({{5, 9, 2}}, {dtype = "int64"}), {max_new_tokens = 4}).shape)   --> ember.Size{1, 7}
function Llama:generate(ids, opts)
  local c = self.config
  if type(opts) == "table" or opts == nil then
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    -- the config's ids are Hugging Face's, 0-based
    if o.eos_id == nil and c.eos_token_id ~= nil then
      if type(c.eos_token_id) == "table" then
        o.eos_id = {}
        for i, id in ipairs(c.eos_token_id) do o.eos_id[i] = id + 1 end
      else
        o.eos_id = c.eos_token_id + 1
      end
    end
    if o.pad_id == nil and c.pad_token_id ~= nil then o.pad_id = c.pad_token_id + 1 end
    opts = o
  end
  return require("ember.generate").generate(self, ids, opts)
end

--- The state dict hook of load_state_dict (Module.upgrade_state_dict):
-- with tie_word_embeddings, an `lm_head.weight` equal to the embedding is
-- dropped, as Hugging Face ties it again on load (a PyTorch state_dict()
-- of a tied model lists the shared weight under both names); one that
-- differs is an error. Then Module's mapping.
-- @tparam table sd name -> tensor (relative to this model)
-- @string[opt] prefix as Module.upgrade_state_dict's
-- @treturn table
-- @treturn integer
function Llama:upgrade_state_dict(sd, prefix)
  local h = sd["lm_head.weight"]
  if self.config.tie_word_embeddings and h ~= nil then
    local e = sd["model.embed_tokens.weight"]
    local same = rawequal(e, h) or (ember.is_tensor(e) and ember.is_tensor(h) and shape_str(e) == shape_str(h)
      and e:to(h.dtype):equal(h))
    if not same then
      raise("Llama.load_state_dict: %slm_head.weight differs from %smodel.embed_tokens.weight%s, but "
        .. "tie_word_embeddings is set (the output weight is the embedding's)", prefix or "", prefix or "",
        e == nil and " (absent)" or "")
    end
    local out = {}
    for k, v in pairs(sd) do out[k] = v end
    out["lm_head.weight"] = nil
    sd = out
  end
  return Module.upgrade_state_dict(self, sd, prefix)
end

-- Reads a safetensors file, or the shards of a checkpoint given as a list
-- of files (Hugging Face's model-00001-of-00002.safetensors, ...); name ->
-- tensor. Also returns how to name the source in messages.
local function read_file(path, who)
  if type(path) == "table" then
    if #path == 0 then raise("%s: the list of shard files is empty", who) end
    local all, from = {}, {}
    for i, p in ipairs(path) do
      if type(p) ~= "string" then raise("%s: shard %d must be a file name, got %s", who, i, type(p)) end
      for name, t in pairs((read_file(p, who))) do
        if from[name] then raise("%s: tensor '%s' is in both '%s' and '%s'", who, name, from[name], p) end
        all[name], from[name] = t, p
      end
    end
    return all, table.concat(path, ", ")
  end
  if type(path) ~= "string" then raise("%s: path must be a file name or a list of shard files, got %s", who, type(path)) end
  local ok, tensors = pcall(function()
    local torch_file = require "ember._torch_load"
    if torch_file.is_torch_file(path) then return torch_file.load(path) end -- pytorch_model.bin
    return require("ember.checkpoint").load_tensors(path)
  end)
  if not ok then raise("%s: cannot read '%s': %s", who, path, tostring(tensors):gsub("^[^:\n]*:%d+: ", "")) end
  return tensors, path
end

-- The shape of a file's tensor, or an error naming the key.
local function dims(tensors, key, ndim, path, who)
  local t = tensors[key]
  if t == nil then raise("%s: '%s' has no tensor '%s'", who, path, key) end
  if t.ndim ~= ndim then
    raise("%s: '%s': tensor '%s' has shape %s, expected %d dims", who, path, key, shape_str(t), ndim)
  end
  return t.shape
end

--- Copies the tensors of a safetensors file in Hugging Face's layout into
-- this model. Everything is checked first: a missing, extra or misshapen
-- tensor is an error naming its key, and the model is left unchanged.
-- @param path the file, or a list of the shard files of a sharded checkpoint
-- (`{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}`)
-- @treturn Llama self
function Llama:load(path)
  local who = "Llama.load"
  local tensors
  tensors, path = read_file(path, who)
  -- older transformers saved each layer's RoPE buffer; Hugging Face ignores
  -- it on load. It is checked against rope_theta here (the file says which
  -- theta the model was trained with), then dropped.
  local c = self.config
  local hd = c.head_dim
  for name, t in pairs(tensors) do
    if type(name) == "string" and name:match("^model%.layers%.%d+%.self_attn%.rotary_emb%.inv_freq$") then
      if t.ndim ~= 1 or t.shape[1] ~= hd // 2 then
        raise("%s: '%s': tensor '%s' has shape %s, expected [%d] (head_dim / 2)", who, path, name, shape_str(t), hd // 2)
      end
      if hd > 2 and not c.rope_scaling then -- a scaled buffer is not theta's
        -- inv_freq[i] = theta^(-2 (i - 1) / hd): theta from the second entry
        local theta = t[2]:item() ^ (-hd / 2)
        if math.abs(theta - c.rope_theta) > 1e-3 * c.rope_theta then
          raise("%s: '%s': tensor '%s' is RoPE with rope_theta = %.6g, but the config's rope_theta is %.6g",
            who, path, name, theta, c.rope_theta)
        end
      end
      tensors[name] = nil
    end
  end
  local ok, err = pcall(self.load_state_dict, self, tensors, true)
  if not ok then
    raise("%s: '%s': %s", who, path, (tostring(err):gsub("^[^:\n]*:%d+: ", ""):gsub("^Llama%.load_state_dict: ", "")))
  end
  return self
end

--- Builds a model from a safetensors file in Hugging Face's layout.
-- The sizes come from the tensors' shapes (vocab_size, hidden_size,
-- intermediate_size, num_hidden_layers, and num_key_value_heads from
-- k_proj); tie_word_embeddings is whether the file lacks lm_head.weight.
-- The head count cannot be read from the shapes: give num_attention_heads.
-- Values given in config win and must agree with the file.
-- @param path the .safetensors file, or a list of the shard files of a
-- sharded checkpoint
-- @tparam table config at least `num_attention_heads`; `rms_norm_eps` and
-- `rope_theta` as the checkpoint's config.json says (defaults 1e-6, 10000)
-- @treturn Llama the model, in eval mode
function Llama.from_safetensors(path, config)
  local who = "Llama.from_safetensors"
  if type(config) ~= "table" or config.num_attention_heads == nil then
    raise("%s: give a config with at least num_attention_heads (the file's shapes do not say it)", who)
  end
  local files = path
  local tensors
  tensors, path = read_file(path, who)
  local c = {}
  for k, v in pairs(config) do c[k] = v end
  local emb = dims(tensors, "model.embed_tokens.weight", 2, path, who)
  local inferred = { vocab_size = emb[1], hidden_size = emb[2] }
  local n = 0
  while tensors[("model.layers.%d.input_layernorm.weight"):format(n)] ~= nil do n = n + 1 end
  if n == 0 then raise("%s: '%s' has no tensor 'model.layers.0.input_layernorm.weight'", who, path) end
  inferred.num_hidden_layers = n
  inferred.intermediate_size = dims(tensors, "model.layers.0.mlp.gate_proj.weight", 2, path, who)[1]
  local hd = c.head_dim
  if math.type(c.num_attention_heads) == "integer" and c.num_attention_heads > 0 and hd == nil
      and emb[2] % c.num_attention_heads == 0 then
    hd = emb[2] // c.num_attention_heads
  end
  if math.type(hd) == "integer" and hd > 0 then
    local kdim = dims(tensors, "model.layers.0.self_attn.k_proj.weight", 2, path, who)[1]
    inferred.num_key_value_heads = kdim // hd
  end
  for k, v in pairs(inferred) do
    if c[k] == nil then
      c[k] = v
    elseif c[k] ~= v then
      raise("%s: config.%s = %s, but '%s' has %s", who, k, tostring(c[k]), path, tostring(v))
    end
  end
  if c.tie_word_embeddings == nil then c.tie_word_embeddings = tensors["lm_head.weight"] == nil end
  local model = Llama(c)
  model:load(files)
  return model:eval()
end

-- A file's text, or nil when it cannot be opened.
local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

-- A JSON file of a model folder, decoded, or an error naming it.
local function read_json(path, who, what)
  local text = slurp(path)
  if not text then raise("%s: cannot read '%s' (%s)", who, path, what) end
  local ok, v = pcall(ember._json_decode, text)
  if not ok then raise("%s: '%s': %s", who, path, tostring(v)) end
  if type(v) ~= "table" then raise("%s: '%s' holds a %s, not an object", who, path, type(v)) end
  return v
end

-- transformers' from_pretrained options that are no config keys, and what to do instead
local NO_LOADING = "ember reads the folder as it is"
local LOADER_OPTIONS = {
  device_map = "load, then move the model: model:to(\"cuda\")",
  attn_implementation = "ember's attention is the config key attention (an attention variant's name; \"standard\" "
    .. "runs the fused kernel)",
  low_cpu_mem_usage = NO_LOADING, trust_remote_code = "the model types ember supports are built in",
  revision = NO_LOADING .. " (download the revision you want)", cache_dir = NO_LOADING,
  local_files_only = NO_LOADING .. " (nothing is downloaded)", force_download = NO_LOADING, token = NO_LOADING,
  subfolder = "give the subfolder's path", variant = "give the file's folder", use_safetensors = NO_LOADING
    .. " (model.safetensors first, else pytorch_model.bin)",
  quantization_config = "ember has no quantized weights", load_in_8bit = "ember has no quantized weights",
  load_in_4bit = "ember has no quantized weights",
  ignore_mismatched_sizes = "every tensor must fit (an error names the one that does not)",
  output_loading_info = "every tensor must be in the file, and no other (an error names them)",
}

--- Builds a model from a Hugging Face model folder, as
-- `LlamaForCausalLM.from_pretrained(folder)`: the configuration from its
-- config.json (every LlamaConfig key, and Mistral's, Qwen2's and Qwen3's
-- by its `model_type`: see the class's list; those that do not change the
-- computation are ignored), the weights from
-- model.safetensors or from the shards that model.safetensors.index.json
-- lists (its weight_map), else from the older torch.save files,
-- pytorch_model.bin or the shards of pytorch_model.bin.index.json (read as
-- torch.load(weights_only=True) would: ember.load). The parameters are float32 (as Hugging Face's
-- default; config.json's torch_dtype is not followed), unless the overrides say
-- `torch_dtype` (or newer transformers' `dtype`): "bfloat16", "float32", "float64",
-- or "auto" (config.json's torch_dtype), as from_pretrained(folder, torch_dtype=...).
-- A generation_config.json beside it gives `generate` its eos_token_id and
-- pad_token_id, over config.json's (as transformers' generation_config: a
-- Llama 3 Instruct folder lists <|eot_id|> there only); its sampling
-- settings (do_sample, temperature, top_p, ...) are not taken: `generate`
-- stays greedy unless the call says otherwise.
-- @string dir the folder (a downloaded snapshot)
-- @tparam[opt] table overrides config keys that win over config.json's, and `torch_dtype` / `dtype`
-- (transformers' loading options, device_map, attn_implementation, trust_remote_code, ..., are errors
-- that say what to do instead)
-- @treturn Llama the model, in eval mode (see the class's example)
function Llama.from_pretrained(dir, overrides)
  local who = "Llama.from_pretrained"
  if type(dir) ~= "string" then raise("%s: expected a folder name, got %s", who, type(dir)) end
  if overrides ~= nil and type(overrides) ~= "table" then
    raise("%s: overrides must be a table of config keys, got %s", who, type(overrides))
  end
  -- the parameters' dtype asked for (it was taken as a config key and ignored)
  local dtype
  if overrides then
    local a, b = overrides.torch_dtype, overrides.dtype
    if a ~= nil and b ~= nil and a ~= b then
      raise("%s: torch_dtype = %s and dtype = %s disagree (dtype is newer transformers' name for torch_dtype)", who,
        tostring(a), tostring(b))
    end
    dtype = a or b
    local rest = {}
    for k, v in pairs(overrides) do
      if LOADER_OPTIONS[k] then
        -- transformers' loading options are no config keys: say so, not "unknown config key"
        raise("%s: '%s' is an option of transformers' from_pretrained, not a config key: %s", who, k, LOADER_OPTIONS[k])
      end
      if k ~= "torch_dtype" and k ~= "dtype" then rest[k] = v end
    end
    overrides = rest
  end
  dir = dir:gsub("/+$", "")
  local cfg = read_json(dir .. "/config.json", who, "a Hugging Face model folder holds config.json and the safetensors")
  local auto = dtype == "auto"
  if auto then dtype = cfg.torch_dtype or cfg.dtype or "float32" end
  if type(dtype) == "string" then dtype = dtype:gsub("^torch%.", "") end
  local FLOATS = { float32 = true, float64 = true, bfloat16 = true }
  if dtype ~= nil and not FLOATS[dtype] then
    raise("%s: torch_dtype must be \"bfloat16\", \"float32\", \"float64\" or \"auto\" (config.json's), got %s%s%s", who,
      auto and "\"auto\", and config.json's torch_dtype is " or "",
      type(dtype) == "string" and ("%q"):format(dtype) or tostring(dtype),
      (dtype == "float16" or dtype == "half") and (" (ember has no float16: bfloat16 is its half precision%s)"):format(
        auto and "; give torch_dtype = \"bfloat16\" or \"float32\"" or "") or "")
  end
  cfg.dtype = nil -- newer transformers' name for torch_dtype
  local gen_path = dir .. "/generation_config.json"
  local f = io.open(gen_path, "rb")
  if f then
    f:close()
    local gen = read_json(gen_path, who, "the generation settings")
    for _, k in ipairs { "eos_token_id", "pad_token_id" } do
      if gen[k] ~= nil then cfg[k] = gen[k] end
    end
  end
  for k, v in pairs(overrides or {}) do cfg[k] = v end
  check_config(cfg, who) -- before reading gigabytes: an unsupported config says so first
  local function exists(path)
    local f = io.open(path, "rb")
    if f then f:close() end
    return f ~= nil
  end
  -- as transformers: the safetensors first, then the older torch.save files
  local files
  for _, f in ipairs { "model.safetensors", "pytorch_model.bin" } do
    if files == nil and exists(dir .. "/" .. f) then files = dir .. "/" .. f end
  end
  if files == nil then
    local ipath
    for _, f in ipairs { "model.safetensors.index.json", "pytorch_model.bin.index.json" } do
      if ipath == nil and exists(dir .. "/" .. f) then ipath = dir .. "/" .. f end
    end
    if ipath == nil then
      raise("%s: '%s' has no model.safetensors, pytorch_model.bin or their sharded index (%s)", who, dir,
        "model.safetensors.index.json, pytorch_model.bin.index.json")
    end
    local index = read_json(ipath, who, "the index of a sharded checkpoint")
    if type(index.weight_map) ~= "table" then raise("%s: '%s' has no weight_map", who, ipath) end
    local seen = {}
    files = {}
    for _, f in pairs(index.weight_map) do
      if type(f) ~= "string" then raise("%s: '%s': weight_map's values must be file names", who, ipath) end
      if not seen[f] then seen[f], files[#files + 1] = true, dir .. "/" .. f end
    end
    table.sort(files)
  end
  local model = Llama.from_safetensors(files, cfg)
  if dtype and dtype ~= "float32" then model:to(dtype) end
  return model
end

--- Writes the weights to a safetensors file under Hugging Face's names,
-- with the metadata `format = "pt"` that save_pretrained writes
-- (transformers refuses, or fails on, a file without it).
-- @string path
-- @tparam[opt] table metadata string -> string (format defaults to "pt")
function Llama:save(path, metadata)
  if metadata ~= nil and type(metadata) ~= "table" then
    raise("Llama.save: metadata must be a table of strings, got %s", type(metadata))
  end
  local meta = { format = "pt" }
  for k, v in pairs(metadata or {}) do meta[k] = v end
  metadata = meta
  local names = {}
  self:_each_tensor(function(name, _, kind) if kind ~= "nonpersistent" then names[#names + 1] = name end end)
  require("ember.checkpoint").save_tensors(path, self:state_dict(), metadata, names)
end

--- Writes a Hugging Face model folder, as `save_pretrained(folder)`:
-- config.json (the config's keys: the sizes, head_dim, rms_norm_eps,
-- rope_theta, rope_scaling as given, attention_bias, the sliding window's
-- keys, tie_word_embeddings, the bos, eos and pad token ids as given,
-- model_type and its architectures, e.g.
-- {"Qwen3ForCausalLM"}, the parameters' torch_dtype) and model.safetensors (`save`). The folder is
-- made if missing. `Llama.from_pretrained` and transformers read it.
-- @string dir the folder
-- @treturn Llama self
function Llama:save_pretrained(dir)
  local who = "Llama.save_pretrained"
  if type(dir) ~= "string" or dir == "" then raise("%s: expected a folder name, got %s", who, type(dir)) end
  dir = dir:gsub("/+$", "")
  local text = ember._json_encode(llama_config.to_json(self.config, self.model.norm.weight.dtype)) .. "\n"
  local path = dir .. "/config.json"
  local f = io.open(path, "w")
  if not f then
    os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "' 2>/dev/null")
    f = io.open(path, "w")
  end
  if not f then raise("%s: cannot write '%s'", who, path) end
  f:write(text)
  f:close()
  self:save(dir .. "/model.safetensors")
  return self
end

--- The configuration, for printing.
function Llama:extra_repr()
  local c = self.config
  return ("%svocab_size=%d, hidden_size=%d, intermediate_size=%d, num_hidden_layers=%d, num_attention_heads=%d, "
    .. "num_key_value_heads=%d, %srms_norm_eps=%g, rope_theta=%g, %stie_word_embeddings=%s"):format(
    c.model_type ~= "llama" and ("model_type=%s, "):format(c.model_type) or "",
    c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
    c.num_key_value_heads, c.head_dim ~= c.hidden_size // c.num_attention_heads and ("head_dim=%d, "):format(c.head_dim)
    or "", c.rms_norm_eps, c.rope_theta,
    c.rope_scaling and ("rope_scaling=%s, "):format(c.rope_scaling.rope_type) or "", tostring(c.tie_word_embeddings))
end

-- the block classes, for building variants
Llama.Attention, Llama.MLP, Llama.DecoderLayer, Llama.Model = LlamaAttention, LlamaMLP, LlamaDecoderLayer, LlamaModel

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Llama.forward = errors.wrap(Llama.forward)

return Llama
