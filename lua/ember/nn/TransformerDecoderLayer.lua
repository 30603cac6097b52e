--- nn.TransformerDecoderLayer(d_model, heads [, opts]): masked self-attention,
-- cross-attention to a memory, and a feed-forward block, each with dropout,
-- a residual and a LayerNorm, as torch.nn.TransformerDecoderLayer
-- (batch_first):
--   post-norm: x = norm1(x + sa(x)); x = norm2(x + ca(x, mem)); x = norm3(x + ff(x))
--   pre-norm:  x = x + sa(norm1(x)); x = x + ca(norm2(x), mem); x = x + ff(norm3(x))
-- opts as TransformerEncoderLayer (attention= picks the self-attention's
-- variant), plus cross_attention= / cross_attention_options= for the
-- cross-attention's variant -- "standard" by default: target and memory
-- positions are unrelated, so relative or windowed positions between them
-- mean nothing, and their bottom-right alignment would shift every earlier
-- token's view of the memory as the target grows (decoding with a cache
-- refuses such a cross-attention: a step cannot know the whole target's
-- length) -- and cross=false for a
-- decoder-only layer (no memory, no cross-attention).
--
-- forward(x, memory [, opts]); opts: causal (default true -- false when a tgt
-- mask is given: then the mask alone decides, as PyTorch's), tgt_mask (float,
-- added to the scores) or tgt_allow_mask / tgt_block_mask (bool: true = may
-- attend / true = masked; a boolean tgt_mask is refused, see nn/_masks.lua),
-- tgt_key_padding_mask, memory_mask (memory_allow_mask, memory_block_mask),
-- memory_key_padding_mask (the two key padding masks bool, true = padding, or
-- float, added to the scores, as PyTorch's; bool only with a cache), tgt_is_causal (PyTorch 2.x's name of causal; false
-- is PyTorch's default, no causal mask), memory_is_causal (PyTorch's hint that
-- memory_mask is causal: the mask decides), variant_inputs / memory_variant_inputs (the per-call
-- tensors of the self-attention's / the cross-attention's variant written in
-- Lua, e.g. {doc = ids}), and cache: a
-- table (empty at the first step) that turns on incremental decoding: x is
-- then only the new positions, self-attention keys/values are appended to
-- the cache and the memory's keys/values are computed once (see
-- MultiHeadAttention.forward_cached); tgt_key_padding_mask then covers every
-- cached position ([B, positions so far]). Without a cache the layer is
-- exactly the batch computation.
-- @classmod nn.TransformerDecoderLayer
local Module = require "ember.nn.Module"
local torch_names = require "ember.nn._torch_names"
local LayerNorm = require "ember.nn.LayerNorm"
local Dropout = require "ember.nn.Dropout"
local FeedForward = require "ember.nn.FeedForward"
local MultiHeadAttention = require "ember.nn.MultiHeadAttention"
local attn_opts = require "ember.nn._attn_opts"
local masks = require "ember.nn._masks"
local ember = require "ember.nn._ember"
local checkpoint = require("ember.nn.activation_checkpoint").checkpoint

local DecoderLayer = Module:extend("TransformerDecoderLayer")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
DecoderLayer.SIGNATURE = { sizes = { "d_model", "heads" },
  options = { "dim_feedforward", "dropout", "activation", "layer_norm_eps", "batch_first", "norm_first", "bias" },
  aliases = { nhead = "heads" } }

-- The constructor's options (TransformerDecoder takes them too).
DecoderLayer.OPTIONS = { "dim_feedforward", "dropout", "attention_dropout", "activation", "norm_first", "layer_norm_eps", "bias", "attention", "attention_options", "rope", "kv_heads", "checkpoint", "dtype", "device",
  "cross", "cross_attention", "cross_attention_options", "memory_dim", "batch_first" }
local FORWARD_OPTIONS = { "causal", "tgt_mask", "tgt_allow_mask", "tgt_block_mask", "tgt_key_padding_mask",
  "memory_mask", "memory_allow_mask", "memory_block_mask", "memory_key_padding_mask", "cache", "variant_inputs",
  "memory_variant_inputs", "tgt_is_causal", "memory_is_causal" }

function DecoderLayer:__init(d_model, heads, opts)
  rawset(self, "_ctor_args", table.pack(d_model, heads, opts)) -- nn.TransformerDecoder(layer, n) makes copies
  opts = attn_opts.check_layer_options("nn.TransformerDecoderLayer", opts, DecoderLayer.OPTIONS)
  local dropout = opts.dropout or 0.1
  self.norm_first = opts.norm_first or false
  self.checkpoint = opts.checkpoint or false
  self.batch_first = attn_opts.batch_first("nn.TransformerDecoderLayer", opts)
  self.has_cross = opts.cross ~= false
  -- causal by default: the module says so when printed, and forward's
  -- `causal` option overrides it per call
  self:add_module("self_attn", MultiHeadAttention(attn_opts.mha_spec(d_model, heads, opts, { causal = true })))
  if self.has_cross then
    local copts = {}
    for k, v in pairs(opts) do copts[k] = v end
    copts.attention = opts.cross_attention or "standard"
    copts.attention_options = opts.cross_attention_options
    copts._attention_options_name = "cross_attention_options"
    copts.rope = false -- positions of text and memory are unrelated
    self:add_module("cross_attn", MultiHeadAttention(attn_opts.mha_spec(d_model, heads, copts,
      { kdim = opts.memory_dim, vdim = opts.memory_dim })))
  end
  self:add_module("ff", FeedForward(d_model, opts.dim_feedforward or 2048, {
    activation = opts.activation, dropout = dropout, bias = opts.bias, dtype = opts.dtype, device = opts.device,
  }))
  local ln = { eps = opts.layer_norm_eps, dtype = opts.dtype, device = opts.device }
  local n = self.has_cross and 3 or 2
  for i = 1, n do
    self:add_module("norm" .. i, LayerNorm(d_model, ln))
    self:add_module("dropout" .. i, Dropout(dropout))
  end
end

local WHO = "TransformerDecoderLayer.forward"
-- torch's forward(tgt, memory, ...) order
local TORCH_POSITIONAL = { "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask",
  "tgt_is_causal", "memory_is_causal" }

-- PyTorch 2.x's tgt_is_causal is causal here (so tgt_is_causal = false is
-- PyTorch's non-causal default); memory_is_causal is a hint about
-- memory_mask, which decides alone, and without one is refused as PyTorch's.
local function torch_causal_flags(opts)
  if opts.tgt_is_causal == nil and opts.memory_is_causal == nil then return opts end
  for _, k in ipairs { "tgt_is_causal", "memory_is_causal" } do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
      require("ember._errors").raise("%s: %s must be a boolean, got %s", WHO, k, type(opts[k]))
    end
  end
  if opts.tgt_is_causal ~= nil and opts.causal ~= nil then
    require("ember._errors").raise("%s: give causal or tgt_is_causal (PyTorch's name), not both", WHO)
  end
  if opts.memory_is_causal and opts.memory_mask == nil and opts.memory_allow_mask == nil
      and opts.memory_block_mask == nil then
    require("ember._errors").raise("%s: memory_is_causal is a hint about memory_mask: give the mask too (as PyTorch's "
      .. "'Need attn_mask if specifying the is_causal hint')", WHO)
  end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.causal, o.tgt_is_causal, o.memory_is_causal = opts.causal, nil, nil
  if opts.tgt_is_causal ~= nil then o.causal = opts.tgt_is_causal end
  return o
end

function DecoderLayer:_sa(x, o)
  local y
  local mask = attn_opts.torch_3d_mask(masks.resolve(o, WHO, masks.names("tgt")), x.shape[1], self.self_attn.heads)
  -- a target mask given is the whole mask, as PyTorch's (the layer's causal
  -- default would be added to it): causal only when asked as well
  if mask ~= nil and o.causal == nil then
    local c = {}
    for k, v in pairs(o) do c[k] = v end
    c.causal, o = false, c
  end
  if o.cache then
    o.cache.self = o.cache.self or { reserve = o.cache.reserve } -- see nn/_kv_cache.lua
    y = self.self_attn:forward_cached(x, o.cache.self, masks.for_mha(mask,
      { causal = o.causal, key_padding_mask = o.tgt_key_padding_mask, variant_inputs = o.variant_inputs }))
  else
    local kpm -- PyTorch's float key padding mask too
    mask, kpm = masks.fold_float_padding(WHO, "tgt_key_padding_mask", mask, o.tgt_key_padding_mask, x.shape[1],
      x.shape[2], x.dtype)
    y = self.self_attn(x, masks.for_mha(mask, { causal = o.causal, key_padding_mask = kpm,
      variant_inputs = o.variant_inputs }))
  end
  return self.dropout1(y)
end

function DecoderLayer:_ca(x, memory, o)
  local y
  local mask = attn_opts.torch_3d_mask(masks.resolve(o, WHO, masks.names("memory")), x.shape[1],
    self.cross_attn.heads)
  if o.cache then
    o.cache.cross = o.cache.cross or {}
    y = attn_opts.cross_call("memory_variant_inputs", self.cross_attn.forward_cached, self.cross_attn, x,
      o.cache.cross, masks.for_mha(mask, { memory = memory, key_padding_mask = o.memory_key_padding_mask,
        variant_inputs = o.memory_variant_inputs }))
  else
    local kpm
    mask, kpm = masks.fold_float_padding(WHO, "memory_key_padding_mask", mask, o.memory_key_padding_mask, x.shape[1],
      memory.shape[2], x.dtype)
    y = attn_opts.cross_call("memory_variant_inputs", self.cross_attn, x, memory, masks.for_mha(mask,
      { key_padding_mask = kpm, variant_inputs = o.memory_variant_inputs }))
  end
  return self.dropout2(y)
end

--- Masked self-attention, cross-attention to memory, feed-forward.
-- @tparam Tensor x [B, L, d_model] (with a cache: only the new positions)
-- @tparam Tensor memory [B, Lm, memory_dim] (nil when cross = false)
-- @tparam[opt] table opts see the file's header: causal, tgt_mask / tgt_allow_mask /
-- tgt_block_mask, tgt_key_padding_mask, memory_mask (and its allow/block forms),
-- memory_key_padding_mask, variant_inputs (self-attention) / memory_variant_inputs
-- (cross-attention), cache
-- @treturn Tensor [B, L, d_model]
function DecoderLayer:forward(x, memory, ...)
  local opts = attn_opts.forward_options(WHO, TORCH_POSITIONAL, ...)
  opts = torch_causal_flags(Module.check_options("TransformerDecoderLayer.forward", opts, FORWARD_OPTIONS))
  if self.has_cross and memory == nil then
    require("ember._errors").raise("TransformerDecoderLayer.forward: this layer has cross-attention and needs a memory")
  end
  if opts.cache ~= nil then
    -- the layer's table is its own: another model's layer table (a Llama layer's
    -- keys at its top level) would otherwise be taken as a fresh cache
    if type(opts.cache) ~= "table" then
      require("ember._errors").raise("TransformerDecoderLayer.forward: cache must be a table ({} at the first step), got %s",
        type(opts.cache))
    end
    require("ember.nn._kv_cache").claim(opts.cache, self, "TransformerDecoderLayer.forward")
  end
  attn_opts.check_width(WHO, "tgt", x, self.self_attn.d_model, " (d_model)")
  if self.has_cross then
    local kdim = self.cross_attn.kdim
    attn_opts.check_width(WHO, "memory", memory, kdim, kdim == self.self_attn.d_model
      and " (d_model; a memory of another width: nn.TransformerDecoderLayer(d_model, heads, {memory_dim = n}))"
      or " (memory_dim)")
  end
  if not self.batch_first then
    local flip = attn_opts.flip_batch
    return flip(self:_forward(flip(x), flip(memory), opts))
  end
  return self:_forward(x, memory, opts)
end

function DecoderLayer:_forward(x, memory, opts)
  if self.checkpoint and self.training and not opts.cache and ember.is_grad_enabled() then
    -- the memory is an argument: its gradient flows back through the recompute
    if memory ~= nil then
      return checkpoint(function(xx, mm) return self:_block(xx, mm, opts) end, x, memory)
    end
    return checkpoint(function(xx) return self:_block(xx, nil, opts) end, x)
  end
  return self:_block(x, memory, opts)
end

function DecoderLayer:_block(x, memory, opts)
  local last = self.has_cross and 3 or 2
  local norm_ff, drop_ff = self["norm" .. last], self["dropout" .. last]
  if self.norm_first then
    x = x + self:_sa(self.norm1(x), opts)
    if self.has_cross then x = x + self:_ca(self.norm2(x), memory, opts) end
    return x + drop_ff(self.ff(norm_ff(x)))
  end
  x = self.norm1(x + self:_sa(x, opts))
  if self.has_cross then x = self.norm2(x + self:_ca(x, memory, opts)) end
  return norm_ff(x + drop_ff(self.ff(x)))
end

--- "norm_first=..., cross=..."
function DecoderLayer:extra_repr()
  return ("norm_first=%s, cross=%s%s%s"):format(tostring(self.norm_first), tostring(self.has_cross),
    self.checkpoint and ", checkpoint=true" or "", self.batch_first and "" or ", batch_first=false")
end

-- PyTorch's names of the layer's children -> ember's (nn.Transformer.from_torch_state_dict reads them too)
DecoderLayer.TORCH_NAMES = { linear1 = "ff.linear1", linear2 = "ff.linear2", multihead_attn = "cross_attn" }
local TORCH = DecoderLayer.TORCH_NAMES

--- torch.nn.TransformerDecoderLayer's names load as they are: linear1, linear2 (-> ff.linear1,
-- ff.linear2) and multihead_attn (-> cross_attn); then each child maps its own part (self_attn's
-- in_proj_weight: nn.MultiHeadAttention.upgrade_state_dict).
-- @tparam table sd name -> tensor
-- @string[opt] prefix as Module.upgrade_state_dict's
-- @treturn table
-- @treturn integer how many earlier-ember names were mapped
function DecoderLayer:upgrade_state_dict(sd, prefix)
  return Module.upgrade_state_dict(self, torch_names.rename(sd, TORCH), prefix)
end

--- PyTorch's names of the children, for `torch_state_dict`.
-- @tparam table sd
-- @treturn table
function DecoderLayer:to_torch_names(sd) return torch_names.rename(sd, torch_names.inverse(TORCH)) end

return DecoderLayer
