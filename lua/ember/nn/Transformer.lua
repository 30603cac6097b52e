--- nn.Transformer([d_model=512 [, nhead=8 [, opts]]]) or nn.Transformer{d_model=, nhead=, ...}:
-- the encoder-decoder Transformer of "Attention Is All You Need", as
-- torch.nn.Transformer: an nn.TransformerEncoder ("encoder") and an
-- nn.TransformerDecoder ("decoder"), each ending with a LayerNorm, as
-- PyTorch's (for post-norm layers too).
--
-- opts (PyTorch's names and defaults): num_encoder_layers=6,
-- num_decoder_layers=6, dim_feedforward=2048, dropout=0.1,
-- activation="relu"|"gelu", layer_norm_eps=1e-5, batch_first=true (ember
-- is batch-first; false takes and returns [L, B, d_model] as PyTorch's
-- default), norm_first=false, bias=true, dtype=, device=; and the ember
-- layers' own: attention=, attention_options=, attention_dropout=,
-- kv_heads=, checkpoint= (see nn.TransformerEncoderLayer), and the decoder's
-- cross_attention= / cross_attention_options= (see nn.TransformerDecoderLayer).
--
-- forward(src, tgt [, opts]) -> [B, Lt, d_model] (src and tgt may also be
-- unbatched [L, d_model], as PyTorch's), with PyTorch's mask
-- names: src_mask, tgt_mask, memory_mask (float, added to the scores;
-- generate_square_subsequent_mask makes tgt's), or their boolean forms
-- src_allow_mask / src_block_mask, ... (true = may attend / true = masked:
-- a boolean *_mask is refused as ambiguous, see nn/_masks.lua);
-- src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask
-- (bool, true = padding; or float, added to the scores: as PyTorch's);
-- tgt_is_causal / src_is_causal (not in PyTorch 1.13; ember's: true means
-- a causal mask without building one, where PyTorch 2.x's flags are hints
-- about a mask given). As PyTorch's, the target's
-- self-attention is causal only when asked (tgt_mask or tgt_is_causal).
--
-- Initialisation as PyTorch's: xavier_uniform_ on every matrix (the q, k, v
-- projections with the bound of PyTorch's one [3 d_model, d_model] in_proj_weight).
--
-- State dict: ember's layer names ("encoder.layers.1.self_attn.q_proj.weight",
-- "...ff.linear1.weight", "decoder.layers.1.cross_attn...."). A PyTorch
-- state dict loads as it is, with the model at the top or inside another
-- module: load_state_dict hands each module its part and each maps its own
-- names (`upgrade_state_dict` of nn.Sequential, the layers and
-- nn.MultiHeadAttention; nn/_torch_names.lua):
--   layers.i (0-based)               -> layers.i+1
--   self_attn.in_proj_weight [3d, d] -> self_attn.q_proj/k_proj/v_proj.weight (rows split in three)
--   self_attn.in_proj_bias           -> self_attn.q_proj/k_proj/v_proj.bias
--   multihead_attn.                  -> cross_attn.
--   linear1. / linear2.              -> ff.linear1. / ff.linear2.
--   out_proj, norm1..3, encoder.norm, decoder.norm: the same names.
-- `nn.Transformer.from_torch_state_dict(sd)` is that map alone, on a whole
-- torch.nn.Transformer state dict; `model:torch_state_dict()` the way back.
-- Errors name nn.Transformer at the caller's line.
-- @usage local model = nn.Transformer{d_model = 32, nhead = 4, num_encoder_layers = 2,
--   num_decoder_layers = 2, dim_feedforward = 64, dropout = 0}
-- local src, tgt = ember.randn(2, 7, 32), ember.randn(2, 5, 32)
-- local mask = nn.Transformer.generate_square_subsequent_mask(5)
-- print(model(src, tgt, {tgt_mask = mask}).shape)             --> ember.Size{2, 5, 32}
-- print(model(src, tgt, {tgt_is_causal = true}).shape)        --> ember.Size{2, 5, 32}
-- @classmod nn.Transformer
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local Module = require "ember.nn.Module"
local EncoderLayer = require "ember.nn.TransformerEncoderLayer"
local DecoderLayer = require "ember.nn.TransformerDecoderLayer"
local torch_names = require "ember.nn._torch_names"
local Encoder = require "ember.nn.TransformerEncoder"
local Decoder = require "ember.nn.TransformerDecoder"
local init = require "ember.nn.weight_init"
local attn_opts = require "ember.nn._attn_opts"
local masks = require "ember.nn._masks"

local Transformer = Module:extend("Transformer")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
Transformer.SIGNATURE = { sizes = { "d_model", "nhead" },
  options = { "num_encoder_layers", "num_decoder_layers", "dim_feedforward", "dropout", "activation", "custom_encoder",
    "custom_decoder", "layer_norm_eps", "batch_first", "norm_first", "bias" } }

local OWN = { "d_model", "nhead", "num_encoder_layers", "num_decoder_layers", "batch_first", "cross_attention",
  "cross_attention_options" }
-- the layer options passed to both stacks
local LAYER = { "dim_feedforward", "dropout", "attention_dropout", "activation", "norm_first", "layer_norm_eps", "bias",
  "attention", "attention_options", "kv_heads", "checkpoint", "dtype", "device" }
local FORWARD = { "src_mask", "src_allow_mask", "src_block_mask", "tgt_mask", "tgt_allow_mask", "tgt_block_mask",
  "memory_mask", "memory_allow_mask", "memory_block_mask", "src_key_padding_mask", "tgt_key_padding_mask",
  "memory_key_padding_mask", "src_is_causal", "tgt_is_causal", "src_variant_inputs", "tgt_variant_inputs",
  "memory_variant_inputs" }

local function count(v, name, default)
  if v == nil then return default end
  if math.type(v) ~= "integer" or v < 1 then
    errors.raise("nn.Transformer: %s must be a positive integer, got %s", name, tostring(v))
  end
  return v
end

function Transformer:__init(d_model, nhead, opts)
  if type(d_model) == "table" then
    if nhead ~= nil or opts ~= nil then
      errors.raise("nn.Transformer: give the options as one table {d_model=, nhead=, ...} or as (d_model, nhead, opts)")
    end
    opts = d_model
    d_model, nhead = opts.d_model, opts.nhead
  elseif opts ~= nil and type(opts) == "table" and (opts.d_model ~= nil or opts.nhead ~= nil) then
    errors.raise("nn.Transformer: d_model and nhead are given twice (arguments and options)")
  end
  opts = attn_opts.check_layer_options("nn.Transformer", opts, OWN, LAYER)
  self.d_model = count(d_model, "d_model", 512)
  self.nhead = count(nhead, "nhead", 8)
  local ne = count(opts.num_encoder_layers, "num_encoder_layers", 6)
  local nd = count(opts.num_decoder_layers, "num_decoder_layers", 6)
  if opts.batch_first ~= nil and type(opts.batch_first) ~= "boolean" then
    errors.raise("nn.Transformer: batch_first must be a boolean, got %s", type(opts.batch_first))
  end
  self.batch_first = opts.batch_first ~= false
  local layer = { final_norm = true }
  for _, k in ipairs(LAYER) do layer[k] = opts[k] end
  self:add_module("encoder", Encoder(self.d_model, self.nhead, ne, layer))
  -- the decoder's cross-attention variant (standard unless asked), as TransformerDecoderLayer's
  layer.cross_attention, layer.cross_attention_options = opts.cross_attention, opts.cross_attention_options
  self:add_module("decoder", Decoder(self.d_model, self.nhead, nd, layer))
  -- PyTorch's decoder self-attention is unmasked unless tgt_mask or
  -- tgt_is_causal asks (ember's decoder layers default to causal): so the
  -- layers say causal=false, and print so
  for i = 1, nd do self.decoder.layers[i].self_attn.causal = false end
  -- PyTorch's _reset_parameters: xavier_uniform_ on every matrix. Its q, k
  -- and v projections are one [3 d, d] matrix (in_proj_weight): ours take
  -- that matrix's bound, sqrt(6 / (d + 3 d)), so the draws are alike.
  local qkv = math.sqrt(6 / (4 * self.d_model))
  for name, p in pairs(self:named_parameters()) do
    if p.ndim > 1 then
      if name:match("_attn%.[qkv]_proj%.weight$") then init.uniform_(p, -qkv, qkv) else init.xavier_uniform_(p) end
    end
  end
end

local function shape(t) return Module.is_tensor(t) and errors.shape_str(t) or type(t) end

--- The encoder over src, then the decoder over tgt attending to the encoder's output.
-- @tparam Tensor src [B, Ls, d_model] ([Ls, B, d_model] with batch_first = false), or
-- unbatched [Ls, d_model] (then tgt too, and the key padding masks [L])
-- @tparam Tensor tgt [B, Lt, d_model] ([Lt, B, d_model] with batch_first = false)
-- @tparam[opt] table opts the masks (see the class's text): src_mask, tgt_mask, memory_mask
-- (float) or their _allow_mask / _block_mask forms, src_key_padding_mask,
-- tgt_key_padding_mask, memory_key_padding_mask, src_is_causal, tgt_is_causal;
-- src_variant_inputs, tgt_variant_inputs: the per-call tensors of an attention variant
-- written in Lua (document ids ...) for the encoder's and the decoder's self-attention;
-- memory_variant_inputs: those of the decoder's cross-attention (cross_attention=)
-- @treturn Tensor [B, Lt, d_model] ([Lt, B, d_model] with batch_first = false; [Lt, d_model] unbatched)
function Transformer:forward(src, tgt, ...)
  local opts = require("ember.nn._attn_opts").forward_options("Transformer.forward", { "src_mask", "tgt_mask",
    "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask", "memory_key_padding_mask" }, ...)
  opts = Module.check_options("Transformer.forward", opts, FORWARD)
  local who = "Transformer.forward"
  for _, k in ipairs { "src_is_causal", "tgt_is_causal" } do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
      errors.raise("%s: %s must be a boolean, got %s", who, k, type(opts[k]))
    end
  end
  local layout = self.batch_first and "[B, L, d_model]" or "[L, B, d_model]"
  local unbatched = Module.is_tensor(src) and src.ndim == 2
  for _, a in ipairs { { "src", src }, { "tgt", tgt } } do
    local t = a[2]
    if not Module.is_tensor(t) or t.ndim ~= (unbatched and 2 or 3) or t.shape[t.ndim] ~= self.d_model then
      errors.raise("%s: %s must be %s (or both unbatched [L, d_model]) with d_model = %d, got %s", who, a[1], layout,
        self.d_model, shape(t))
    end
  end
  if unbatched then
    -- PyTorch's unbatched form: one sequence each, [L] key padding masks
    src, tgt = src:unsqueeze(1), tgt:unsqueeze(1)
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    for _, k in ipairs { "src_key_padding_mask", "tgt_key_padding_mask", "memory_key_padding_mask" } do
      if Module.is_tensor(o[k]) and o[k].ndim == 1 then o[k] = o[k]:unsqueeze(1) end
    end
    opts = o
  elseif not self.batch_first then
    src, tgt = src:transpose(1, 2), tgt:transpose(1, 2)
  end
  for _, k in ipairs { "src_mask", "tgt_mask", "memory_mask" } do
    local m = opts[k]
    if Module.is_tensor(m) and m.dtype ~= "bool" and m.dtype ~= src.dtype then
      errors.raise("%s: %s must be a float mask of the inputs' dtype %s (added to the scores; "
        .. "generate_square_subsequent_mask(n, {dtype = \"%s\"}) makes one), got %s", who, k, src.dtype, src.dtype, m.dtype)
    end
  end
  if src.shape[1] ~= tgt.shape[1] then
    errors.raise("%s: src and tgt must have the same batch size, got %d and %d", who, src.shape[1], tgt.shape[1])
  end
  -- each mask resolved here, so that a wrong one is reported under the name the user gave
  local sm, tm, mm = masks.resolve(opts, who, masks.names("src")), masks.resolve(opts, who, masks.names("tgt")),
    masks.resolve(opts, who, masks.names("memory"))
  local function float(m) return m ~= nil and m.dtype ~= "bool" and m or nil end
  local function allow(m) return m ~= nil and m.dtype == "bool" and m or nil end
  local memory = self.encoder(src, {
    attn_mask = float(sm), allow_mask = allow(sm),
    key_padding_mask = opts.src_key_padding_mask, causal = opts.src_is_causal,
    variant_inputs = opts.src_variant_inputs,
  })
  local out = self.decoder(tgt, memory, {
    causal = opts.tgt_is_causal,
    tgt_mask = float(tm), tgt_allow_mask = allow(tm), tgt_key_padding_mask = opts.tgt_key_padding_mask,
    memory_mask = float(mm), memory_allow_mask = allow(mm), memory_key_padding_mask = opts.memory_key_padding_mask,
    variant_inputs = opts.tgt_variant_inputs, memory_variant_inputs = opts.memory_variant_inputs,
  })
  if unbatched then return out:squeeze(1) end
  if not self.batch_first then out = out:transpose(1, 2) end
  return out
end

--- PyTorch's causal mask for a target of sz positions: float [sz, sz], -inf
-- above the diagonal (a position may not attend to later ones), 0 elsewhere
-- (torch.nn.Transformer.generate_square_subsequent_mask). Call it on the
-- class (`nn.Transformer.generate_square_subsequent_mask(5)`) or a model
-- (`model:generate_square_subsequent_mask(5)`).
-- @int sz the target's length
-- @tparam[opt] table opts dtype= (default float32), device=
-- @treturn Tensor [sz, sz]
function Transformer.generate_square_subsequent_mask(sz, opts)
  if Module.is_module(sz) then sz, opts = opts, nil end
  if math.type(sz) ~= "integer" or sz < 1 then
    errors.raise("Transformer.generate_square_subsequent_mask: sz must be a positive integer, got %s", tostring(sz))
  end
  opts = Module.check_options("Transformer.generate_square_subsequent_mask", opts, { "dtype", "device" })
  return ember.full({ sz, sz }, -math.huge, { dtype = opts.dtype, device = opts.device }):triu(1)
end

--- A PyTorch torch.nn.Transformer state dict under ember's names (the map
-- in the class's text): in_proj_weight and in_proj_bias split into the
-- q, k and v projections' (views, not copies), 0-based layer numbers made
-- 1-based. Names that are not PyTorch's pass unchanged. It applies the
-- rules the modules' own upgrade_state_dict hooks apply when a model loads
-- (nn/_torch_names.lua, the layers' TORCH_NAMES), without a model.
-- @tparam table sd name -> tensor
-- @treturn table
function Transformer.from_torch_state_dict(sd)
  local stack_of = { encoder = EncoderLayer.TORCH_NAMES, decoder = DecoderLayer.TORCH_NAMES }
  for stack, layer_names in pairs(stack_of) do
    sd = torch_names.under(sd, stack .. ".layers", function(layers)
      -- nn.Sequential's rule, for a container with children "1", "2", ...
      layers = torch_names.one_based({ _reg = {} }, layers)
      return torch_names.each_numbered(layers, function(layer)
        layer = torch_names.rename(layer, layer_names)
        for _, attn in ipairs { "self_attn", "cross_attn" } do
          layer = torch_names.under(layer, attn, function(a)
            local w = a.in_proj_weight or a.in_proj_bias
            if not Module.is_tensor(w) then return a end
            local d = w.shape[1] // 3
            return torch_names.split_in_proj(a, { d, d, d }, "Transformer.from_torch_state_dict")
          end)
        end
        return layer
      end)
    end)
  end
  return sd
end

--- "d_model=..., nhead=..., batch_first=..."
function Transformer:extra_repr()
  return ("d_model=%d, nhead=%d, batch_first=%s"):format(self.d_model, self.nhead, tostring(self.batch_first))
end

-- C errors (bad shapes, dtypes) name the user's line, not this file's.
Transformer.forward = errors.wrap(Transformer.forward)

return Transformer
