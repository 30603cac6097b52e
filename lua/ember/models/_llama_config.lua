-- Private to models.Llama: its configuration, checked. Hugging Face's
-- config.json names of LlamaConfig, MistralConfig, Qwen2Config and
-- Qwen3Config (`model_type` picks which), with each one's defaults and the
-- differences that change the computation:
--
--   model_type  q/k/v bias        o_proj bias       q_norm/k_norm  sliding window
--   llama       attention_bias    attention_bias    no             no
--   mistral     no                no                no             every layer, when sliding_window is set
--   qwen2       always            no                no             layers >= max_window_layers, when use_sliding_window
--   qwen3       attention_bias    attention_bias    yes            as qwen2
--
-- (as transformers' LlamaAttention, MistralAttention, Qwen2Attention and
-- Qwen3Attention; `layer_types`, where given, names each layer's
-- "full_attention" or "sliding_attention" instead). q_norm/k_norm follow
-- the model_type, as in transformers: the config says the architecture, so
-- a "llama" file with q_norm weights is refused by the loader, naming them.
local errors = require "ember._errors"
local rope_scaling = require "ember.models._rope_scaling"

local raise = errors.raise
local M = {}

M.MODEL_TYPES = { "llama", "mistral", "qwen2", "qwen3" }
M.ARCHITECTURES = { llama = "LlamaForCausalLM", mistral = "MistralForCausalLM", qwen2 = "Qwen2ForCausalLM",
                    qwen3 = "Qwen3ForCausalLM" }
-- max_position_embeddings' default per model_type (used by the dynamic and yarn rope scalings only)
local MAX_POS = { llama = 2048, mistral = 4096 * 32, qwen2 = 32768, qwen3 = 32768 }

-- Required sizes first, then the options with Hugging Face's defaults.
local REQUIRED = { "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads" }
local DEFAULTS = { rms_norm_eps = 1e-6, rope_theta = 10000.0, tie_word_embeddings = false, initializer_range = 0.02 }
-- Keys of a Hugging Face config.json that do not change the computation
-- here (ids of special tokens, bookkeeping); accepted and ignored.
local IGNORED = {
  "architectures", "torch_dtype", "transformers_version", "use_cache", "pretraining_tp",
  "_name_or_path", "is_llama_config", -- (SmolLM2's configs)
}
-- Keys accepted only with the value this implementation computes.
local FIXED = { hidden_act = "silu", mlp_bias = false, rope_interleaved = false }
-- Keys read here besides those above.
local OWN = {
  "model_type", "num_key_value_heads", "head_dim", "rope_scaling", "rope_parameters", "max_position_embeddings",
  "attention_bias", "sliding_window", "use_sliding_window", "max_window_layers", "layer_types",
  -- dropout on the attention weights in training mode (Hugging Face's attention_dropout)
  "attention_dropout",
  -- Hugging Face's 0-based ids that generate uses by default (generation_config);
  -- bos_token_id is kept for save_pretrained only
  "eos_token_id", "pad_token_id", "bos_token_id",
  -- ember's own: the self-attention's variant, and whether the causal mask
  -- joins its mask (false where the variant's mask decides: prefix_lm)
  "attention", "attention_options", "causal",
}

local function positive_int(v) return math.type(v) == "integer" and v >= 1 end

-- rope_theta and rope_scaling from transformers 5's rope_parameters
-- ({rope_theta =, rope_type =, factor =, ...}), into c.
local function rope_parameters(cfg, c, who)
  local rp = cfg.rope_parameters
  if type(rp) ~= "table" then raise("%s: config.rope_parameters must be a table, got %s", who, type(rp)) end
  if cfg.rope_scaling ~= nil then raise("%s: config has both rope_parameters and rope_scaling; give one", who) end
  local rs = {}
  for k, v in pairs(rp) do if k ~= "rope_theta" then rs[k] = v end end
  if rp.rope_theta ~= nil then
    if cfg.rope_theta ~= nil and cfg.rope_theta ~= rp.rope_theta then
      raise("%s: config.rope_theta (%s) and rope_parameters.rope_theta (%s) differ", who, tostring(cfg.rope_theta),
        tostring(rp.rope_theta))
    end
    c.rope_theta = rp.rope_theta
  end
  return rs
end

-- The checked config (a new table), or an error naming `who` and the key.
function M.check(cfg, who)
  if type(cfg) ~= "table" then raise("%s: expected a config table (Hugging Face's LlamaConfig names), got %s", who, type(cfg)) end
  local known = {}
  for _, list in ipairs { REQUIRED, IGNORED, OWN } do for _, k in ipairs(list) do known[k] = true end end
  for k in pairs(DEFAULTS) do known[k] = true end
  for k in pairs(FIXED) do known[k] = true end
  for k in pairs(cfg) do
    if not known[k] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      raise("%s: unknown config key '%s' (keys: %s)", who, tostring(k), table.concat(names, ", "))
    end
  end
  local c = {}
  local mt = cfg.model_type or "llama"
  if not M.ARCHITECTURES[mt] then
    raise("%s: config.model_type '%s' is not supported (supported: %s)", who, tostring(mt), table.concat(M.MODEL_TYPES, ", "))
  end
  c.model_type = mt
  for _, k in ipairs(REQUIRED) do
    local v = cfg[k]
    if not positive_int(v) then raise("%s: config.%s must be a positive integer, got %s", who, k, tostring(v)) end
    c[k] = v
  end
  local heads = c.num_attention_heads
  local kv = cfg.num_key_value_heads or heads
  if not positive_int(kv) or heads % kv ~= 0 then
    raise("%s: config.num_key_value_heads must be a positive integer dividing num_attention_heads (%d), got %s",
      who, heads, tostring(cfg.num_key_value_heads))
  end
  c.num_key_value_heads = kv
  if cfg.head_dim ~= nil then
    if not positive_int(cfg.head_dim) or cfg.head_dim % 2 ~= 0 then
      raise("%s: config.head_dim must be an even positive integer (RoPE pairs the head's two halves), got %s", who,
        tostring(cfg.head_dim))
    end
    c.head_dim = cfg.head_dim
  elseif c.hidden_size % heads ~= 0 or (c.hidden_size // heads) % 2 ~= 0 then
    raise("%s: config.hidden_size (%d) must be num_attention_heads (%d) times an even head dim (or give head_dim)", who,
      c.hidden_size, heads)
  else
    c.head_dim = c.hidden_size // heads
  end
  for k, want in pairs(FIXED) do
    if cfg[k] ~= nil and cfg[k] ~= want then
      raise("%s: config.%s must be %s here, got %s", who, k, tostring(want), tostring(cfg[k]))
    end
  end
  -- biases and q/k norms by model_type
  if cfg.attention_bias ~= nil and type(cfg.attention_bias) ~= "boolean" then
    raise("%s: config.attention_bias must be a boolean, got %s", who, tostring(cfg.attention_bias))
  end
  if mt == "mistral" and cfg.attention_bias then
    raise("%s: config.attention_bias = true, but model_type 'mistral' has no attention biases", who)
  end
  c.attention_bias = cfg.attention_bias == true
  if mt == "qwen2" then
    c.qkv_bias, c.o_bias = true, false -- Qwen2Attention: q, k, v with bias, o_proj without (attention_bias not read)
  else
    c.qkv_bias, c.o_bias = c.attention_bias, c.attention_bias
  end
  c.qk_norm = mt == "qwen3"
  -- sliding window
  local mp = cfg.max_position_embeddings
  if mp ~= nil and not positive_int(mp) then
    raise("%s: config.max_position_embeddings must be a positive integer, got %s", who, tostring(mp))
  end
  c.max_position_embeddings = mp or MAX_POS[mt]
  for _, k in ipairs { "sliding_window", "use_sliding_window", "max_window_layers", "layer_types" } do
    if cfg[k] ~= nil and mt == "llama" then
      raise("%s: config.%s is for model_type mistral, qwen2 or qwen3; a llama model attends over every position", who, k)
    end
  end
  if cfg.sliding_window ~= nil and not positive_int(cfg.sliding_window) then
    raise("%s: config.sliding_window must be a positive integer (or null), got %s", who, tostring(cfg.sliding_window))
  end
  if cfg.use_sliding_window ~= nil and type(cfg.use_sliding_window) ~= "boolean" then
    raise("%s: config.use_sliding_window must be a boolean, got %s", who, tostring(cfg.use_sliding_window))
  end
  if mt == "mistral" and (cfg.use_sliding_window ~= nil or cfg.max_window_layers ~= nil) then
    raise("%s: config.use_sliding_window and max_window_layers are Qwen2's; model_type 'mistral' slides every layer "
      .. "when sliding_window is set", who)
  end
  local mwl = cfg.max_window_layers or 28
  if not (math.type(mwl) == "integer" and mwl >= 0) then
    raise("%s: config.max_window_layers must be an integer >= 0, got %s", who, tostring(cfg.max_window_layers))
  end
  c.use_sliding_window, c.max_window_layers = cfg.use_sliding_window, cfg.max_window_layers
  c.sliding_window = cfg.sliding_window
  local window = cfg.sliding_window
  if mt ~= "mistral" and cfg.use_sliding_window ~= true then window = nil end
  local lt = cfg.layer_types
  if lt ~= nil then
    if type(lt) ~= "table" or #lt ~= c.num_hidden_layers then
      raise("%s: config.layer_types must list num_hidden_layers (%d) names, got %s", who, c.num_hidden_layers,
        type(lt) == "table" and (#lt .. " entries") or type(lt))
    end
    for i, t in ipairs(lt) do
      if t ~= "full_attention" and t ~= "sliding_attention" then
        raise("%s: config.layer_types[%d] must be 'full_attention' or 'sliding_attention', got %s", who, i, tostring(t))
      end
    end
    c.layer_types = lt
  end
  -- each layer's window (nil: full attention), layer 1 = Hugging Face's layer 0
  c.windows = {}
  for i = 1, c.num_hidden_layers do
    local sliding
    if lt then sliding = lt[i] == "sliding_attention"
    elseif mt == "mistral" then sliding = true
    else sliding = i - 1 >= mwl end
    c.windows[i] = sliding and window or nil
  end
  -- rope
  local rs = cfg.rope_scaling
  if cfg.rope_parameters ~= nil then rs = rope_parameters(cfg, c, who) end
  c.rope_scaling = rope_scaling.check(rs, who)
  c.rope_scaling_config = c.rope_scaling and rs or nil -- as given, for save_pretrained
  if cfg.attention ~= nil and type(cfg.attention) ~= "string" then
    raise("%s: config.attention must be an attention variant's name, got %s", who, type(cfg.attention))
  end
  if cfg.attention_options ~= nil and type(cfg.attention_options) ~= "table" then
    raise("%s: config.attention_options must be a table, got %s", who, type(cfg.attention_options))
  end
  if cfg.causal ~= nil and type(cfg.causal) ~= "boolean" then
    raise("%s: config.causal must be a boolean, got %s", who, type(cfg.causal))
  end
  if next(c.windows) ~= nil and (cfg.attention ~= nil or cfg.attention_options ~= nil) then
    raise("%s: config.attention/attention_options and a sliding window (config.sliding_window) cannot be combined: "
      .. "the sliding layers use the 'local' variant", who)
  end
  c.attention, c.attention_options, c.causal = cfg.attention, cfg.attention_options, cfg.causal ~= false
  local ad = cfg.attention_dropout or 0.0
  if type(ad) ~= "number" or not (ad >= 0 and ad < 1) then
    raise("%s: config.attention_dropout must be a number in [0, 1), got %s", who, tostring(cfg.attention_dropout))
  end
  c.attention_dropout = ad
  for _, k in ipairs { "eos_token_id", "pad_token_id", "bos_token_id" } do
    local v = cfg[k]
    local ok = v == nil or (math.type(v) == "integer" and v >= 0) or (type(v) == "table" and #v > 0)
    for _, id in ipairs(type(v) == "table" and v or {}) do ok = ok and math.type(id) == "integer" and id >= 0 end
    if not ok then
      raise("%s: config.%s must be a token id >= 0 (Hugging Face's, 0-based) or a list of them, got %s", who, k,
        tostring(v))
    end
    c[k] = v
  end
  for k, d in pairs(DEFAULTS) do
    local v = cfg[k]
    if v == nil then v = c[k] end -- rope_theta from rope_parameters
    if v == nil then v = d end
    if type(v) ~= type(d) or (type(v) == "number" and v < 0) then
      raise("%s: config.%s must be a %s%s, got %s", who, k, type(d), type(d) == "number" and " >= 0" or "", tostring(v))
    end
    c[k] = v
  end
  return c
end

-- config.json's keys for a checked config (save_pretrained).
-- @string dtype the parameters' dtype
function M.to_json(c, dtype)
  local mt = c.model_type
  local j = {
    architectures = { M.ARCHITECTURES[mt] }, model_type = mt, hidden_act = "silu", attention_dropout = c.attention_dropout,
    vocab_size = c.vocab_size, hidden_size = c.hidden_size, intermediate_size = c.intermediate_size,
    num_hidden_layers = c.num_hidden_layers, num_attention_heads = c.num_attention_heads,
    num_key_value_heads = c.num_key_value_heads, head_dim = c.head_dim, max_position_embeddings = c.max_position_embeddings,
    rms_norm_eps = c.rms_norm_eps, rope_theta = c.rope_theta, tie_word_embeddings = c.tie_word_embeddings,
    initializer_range = c.initializer_range, torch_dtype = dtype, eos_token_id = c.eos_token_id,
    pad_token_id = c.pad_token_id, bos_token_id = c.bos_token_id, rope_scaling = c.rope_scaling_config,
    sliding_window = c.sliding_window, use_sliding_window = c.use_sliding_window,
    max_window_layers = c.max_window_layers, layer_types = c.layer_types,
  }
  if mt == "llama" or mt == "qwen3" then j.attention_bias = c.attention_bias end
  if mt == "llama" then j.mlp_bias = false end
  return j
end

return M
