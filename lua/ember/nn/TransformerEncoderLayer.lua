--- nn.TransformerEncoderLayer(d_model, heads [, opts]): self-attention and a
-- feed-forward block, each with dropout, a residual and a LayerNorm, as
-- torch.nn.TransformerEncoderLayer (batch_first):
--   post-norm (norm_first=false):  x = norm1(x + drop(sa(x)));  x = norm2(x + drop(ff(x)))
--   pre-norm  (norm_first=true):   x = x + drop(sa(norm1(x)));  x = x + drop(ff(norm2(x)))
-- opts: dim_feedforward=2048, dropout=0.1 (also on attention weights, see
-- nn/_attn_opts.lua; attention_dropout= to set it apart), activation="relu"|"gelu" (or, as
-- PyTorch's, a function or module of one tensor: nn.functional.gelu, nn.GELU("tanh")),
-- norm_first=false, layer_norm_eps=1e-5, bias=true, attention="standard",
-- attention_options={...}, rope=false, kv_heads= (grouped-query attention, see
-- nn.MultiHeadAttention), checkpoint=false (activation checkpointing: in
-- training, the layer keeps only its input and is run again in the backward,
-- nn.checkpoint), batch_first=true (false: x is [L, B, d_model], as PyTorch's
-- default; masks keep their shapes), dtype=, device=.
-- forward(x [B, L, d_model] [, {key_padding_mask= (bool, true = padding; or float, added
-- to the scores, as PyTorch's), attn_mask= (float), allow_mask= /
-- block_mask= (bool, see nn/_masks.lua), causal=}]); PyTorch's names src_mask (attn_mask's),
-- src_key_padding_mask (key_padding_mask's) and is_causal (causal's) work too.
-- @classmod nn.TransformerEncoderLayer
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

local EncoderLayer = Module:extend("TransformerEncoderLayer")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
EncoderLayer.SIGNATURE = { sizes = { "d_model", "heads" },
  options = { "dim_feedforward", "dropout", "activation", "layer_norm_eps", "batch_first", "norm_first", "bias" },
  aliases = { nhead = "heads" } }

-- The constructor's options (TransformerEncoder takes them too).
EncoderLayer.OPTIONS = { "dim_feedforward", "dropout", "attention_dropout", "activation", "norm_first", "layer_norm_eps", "bias", "attention", "attention_options", "rope", "kv_heads", "checkpoint", "batch_first", "dtype", "device" }
local FORWARD_OPTIONS = { "key_padding_mask", "attn_mask", "allow_mask", "block_mask", "causal", "variant_inputs",
  "src_mask", "src_key_padding_mask", "is_causal" }
-- PyTorch's forward keywords -> ember's
local TORCH_FORWARD = { src_mask = "attn_mask", src_key_padding_mask = "key_padding_mask", is_causal = "causal" }
local TORCH_POSITIONAL = { "src_mask", "src_key_padding_mask", "is_causal" } -- torch's forward(src, ...) order
EncoderLayer.FORWARD_OPTIONS = FORWARD_OPTIONS -- models that hand their options to every layer check them by name

function EncoderLayer:__init(d_model, heads, opts)
  rawset(self, "_ctor_args", table.pack(d_model, heads, opts)) -- nn.TransformerEncoder(layer, n) makes copies
  opts = attn_opts.check_layer_options("nn.TransformerEncoderLayer", opts, EncoderLayer.OPTIONS)
  local dropout = opts.dropout or 0.1
  local o = { dtype = opts.dtype, device = opts.device }
  self.norm_first = opts.norm_first or false
  self.checkpoint = opts.checkpoint or false
  self.batch_first = attn_opts.batch_first("nn.TransformerEncoderLayer", opts)
  self:add_module("self_attn", MultiHeadAttention(attn_opts.mha_spec(d_model, heads, opts)))
  self:add_module("ff", FeedForward(d_model, opts.dim_feedforward or 2048, {
    activation = opts.activation, dropout = dropout, bias = opts.bias, dtype = o.dtype, device = o.device,
  }))
  local ln = { eps = opts.layer_norm_eps, dtype = o.dtype, device = o.device }
  self:add_module("norm1", LayerNorm(d_model, ln))
  self:add_module("norm2", LayerNorm(d_model, ln))
  self:add_module("dropout1", Dropout(dropout))
  self:add_module("dropout2", Dropout(dropout))
end

local WHO = "TransformerEncoderLayer.forward"

function EncoderLayer:_sa(x, opts)
  -- PyTorch's [B * heads, L, S] masks too, and its float key padding mask
  local B, H = x.shape[1], self.self_attn.heads
  local mask = attn_opts.torch_3d_mask(masks.resolve(opts, WHO, masks.names("")), B, H)
  local kpm
  mask, kpm = masks.fold_float_padding(WHO, "src_key_padding_mask", mask, opts.key_padding_mask, B, x.shape[2], x.dtype)
  return self.dropout1(self.self_attn(x, masks.for_mha(mask, {
    key_padding_mask = kpm, causal = opts.causal, variant_inputs = opts.variant_inputs,
  })))
end

--- Self-attention and feed-forward blocks, pre- or post-norm.
-- @tparam Tensor x [B, L, d_model]
-- @tparam[opt] table opts `key_padding_mask` (bool [B, L], true = padding), `attn_mask`
-- (float), `allow_mask` / `block_mask` (bool), `causal`, `variant_inputs` (the per-call
-- tensors of an attention variant written in Lua, e.g. `{doc = ids}`)
-- @treturn Tensor [B, L, d_model]
function EncoderLayer:forward(x, ...)
  local opts = attn_opts.forward_options("TransformerEncoderLayer.forward", TORCH_POSITIONAL, ...)
  opts = Module.check_options("TransformerEncoderLayer.forward", opts, FORWARD_OPTIONS)
  if opts.src_mask ~= nil or opts.src_key_padding_mask ~= nil or opts.is_causal ~= nil then
    local o = {}
    for k, v in pairs(opts) do
      local to = TORCH_FORWARD[k]
      if to and opts[to] ~= nil then
        require("ember._errors").raise("TransformerEncoderLayer.forward: give %s or %s (PyTorch's name), not both", to, k)
      end
      o[to or k] = v
    end
    opts = o
  end
  attn_opts.check_width("TransformerEncoderLayer.forward", "src", x, self.self_attn.d_model, " (d_model)")
  if not self.batch_first then return attn_opts.flip_batch(self:_forward(attn_opts.flip_batch(x), opts)) end
  return self:_forward(x, opts)
end

function EncoderLayer:_forward(x, opts)
  if self.checkpoint and self.training and ember.is_grad_enabled() then
    return checkpoint(function(xx) return self:_block(xx, opts) end, x)
  end
  return self:_block(x, opts)
end

function EncoderLayer:_block(x, opts)
  if self.norm_first then
    x = x + self:_sa(self.norm1(x), opts)
    return x + self.dropout2(self.ff(self.norm2(x)))
  end
  x = self.norm1(x + self:_sa(x, opts))
  return self.norm2(x + self.dropout2(self.ff(x)))
end

--- "norm_first=..."
function EncoderLayer:extra_repr()
  return "norm_first=" .. tostring(self.norm_first) .. (self.checkpoint and ", checkpoint=true" or "")
    .. (self.batch_first and "" or ", batch_first=false")
end

-- PyTorch's names of the layer's children -> ember's (nn.Transformer.from_torch_state_dict reads them too)
EncoderLayer.TORCH_NAMES = { linear1 = "ff.linear1", linear2 = "ff.linear2" }
local TORCH = EncoderLayer.TORCH_NAMES

--- torch.nn.TransformerEncoderLayer's names load as they are: linear1, linear2 (-> ff.linear1,
-- ff.linear2); then each child maps its own part (self_attn's
-- in_proj_weight: nn.MultiHeadAttention.upgrade_state_dict).
-- @tparam table sd name -> tensor
-- @string[opt] prefix as Module.upgrade_state_dict's
-- @treturn table
-- @treturn integer how many earlier-ember names were mapped
function EncoderLayer:upgrade_state_dict(sd, prefix)
  return Module.upgrade_state_dict(self, torch_names.rename(sd, TORCH), prefix)
end

--- PyTorch's names of the children, for `torch_state_dict`.
-- @tparam table sd
-- @treturn table
function EncoderLayer:to_torch_names(sd) return torch_names.rename(sd, torch_names.inverse(TORCH)) end

return EncoderLayer
