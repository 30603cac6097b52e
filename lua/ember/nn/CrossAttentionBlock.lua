--- nn.CrossAttentionBlock(d_model, heads [, opts]): the vision-language
-- block -- text tokens attend to image tokens (and optionally to each
-- other first), then a feed-forward block; each step has dropout, a
-- residual and a LayerNorm, pre-norm by default:
--   [self_attention=true]  x = x + sa(norm_sa(x))
--                          x = x + ca(norm_ca(x), image)
--                          x = x + ff(norm_ff(x))
-- (post-norm with norm_first=false: x = norm(x + f(x)) at each step).
-- opts: image_dim (default d_model: the image tokens' width), self_attention=false,
-- dim_feedforward=4*d_model, dropout=0.1, activation, norm_first=true,
-- layer_norm_eps, attention / attention_options (both attentions), dtype, device.
--
-- forward(text [B, Lt, d_model], image [B, Li, image_dim] [, {key_padding_mask=
-- (text padding), image_padding_mask=, image_mask= (float, added to the
-- cross-attention scores, broadcast to [B, heads, Lt, Li]) or image_allow_mask=
-- / image_block_mask= (bool, see nn/_masks.lua), variant_inputs= / image_variant_inputs=
-- (the per-call tensors of the self-attention's / the cross-attention's variant
-- written in Lua, e.g. {doc = ids}), need_weights=}]) -> out [, weights]
-- with need_weights: the cross-attention weights [B, heads, Lt, Li] (for a
-- heatmap over the image).
-- @classmod nn.CrossAttentionBlock
local Module = require "ember.nn.Module"
local LayerNorm = require "ember.nn.LayerNorm"
local Dropout = require "ember.nn.Dropout"
local FeedForward = require "ember.nn.FeedForward"
local MultiHeadAttention = require "ember.nn.MultiHeadAttention"
local attn_opts = require "ember.nn._attn_opts"
local masks = require "ember.nn._masks"
local errors = require "ember._errors"

local Block = Module:extend("CrossAttentionBlock")

local FORWARD_OPTIONS = { "key_padding_mask", "image_padding_mask", "image_mask", "image_allow_mask",
  "image_block_mask", "need_weights", "variant_inputs", "image_variant_inputs" }

function Block:__init(d_model, heads, opts, ...)
  require("ember._errors").no_extra("nn.CrossAttentionBlock", { "d_model", "heads", "opts" }, 1, d_model, heads, opts, ...)
  opts = Module.check_options("nn.CrossAttentionBlock", opts, { "dropout", "attention_dropout", "norm_first",
    "self_attention", "layer_norm_eps", "image_dim", "dim_feedforward", "activation", "attention",
    "attention_options", "rope", "bias", "kv_heads", "dtype", "device" })
  local dropout = opts.dropout or 0.1
  self.norm_first = opts.norm_first ~= false
  self.self_attention = opts.self_attention or false
  local ln = { eps = opts.layer_norm_eps, dtype = opts.dtype, device = opts.device }
  if self.self_attention then
    self:add_module("self_attn", MultiHeadAttention(attn_opts.mha_spec(d_model, heads, opts)))
    self:add_module("norm_sa", LayerNorm(d_model, ln))
    self:add_module("dropout_sa", Dropout(dropout))
  end
  local copts = {}
  for k, v in pairs(opts) do copts[k] = v end
  copts.rope = false
  self:add_module("cross_attn", MultiHeadAttention(attn_opts.mha_spec(d_model, heads, copts,
    { kdim = opts.image_dim, vdim = opts.image_dim })))
  self:add_module("norm_ca", LayerNorm(d_model, ln))
  self:add_module("dropout_ca", Dropout(dropout))
  self:add_module("ff", FeedForward(d_model, opts.dim_feedforward or 4 * d_model, {
    activation = opts.activation, dropout = dropout, dtype = opts.dtype, device = opts.device,
  }))
  self:add_module("norm_ff", LayerNorm(d_model, ln))
  self:add_module("dropout_ff", Dropout(dropout))
end

-- One residual step: pre-norm x + f(norm(x)), or post-norm norm(x + f(x)).
function Block:_step(x, norm, drop, f)
  if self.norm_first then return x + drop(f(norm(x))) end
  return norm(x + drop(f(x)))
end

--- Text tokens attend to image tokens (after their own self-attention when enabled).
-- @tparam Tensor text [B, Lt, d_model]
-- @tparam Tensor image [B, Li, image_dim]
-- @tparam[opt] table opts `key_padding_mask` (text padding), `image_padding_mask`,
-- `image_mask` (float) / `image_allow_mask` / `image_block_mask` (bool) on the cross-attention, `need_weights`,
-- `variant_inputs` (the self-attention's variant) / `image_variant_inputs` (the cross-attention's)
-- @treturn Tensor [B, Lt, d_model]
-- @treturn[opt] Tensor the cross-attention weights [B, heads, Lt, Li] when need_weights
function Block:forward(text, image, opts)
  opts = Module.check_options("CrossAttentionBlock.forward", opts, FORWARD_OPTIONS)
  -- named as this block's arguments (the attention inside would say query / key)
  local d, image_dim = self.cross_attn.d_model, self.cross_attn.kdim
  local function bad(t, width) return not Module.is_tensor(t) or t:dim() ~= 3 or t.shape[3] ~= width end
  local function desc(t) return Module.is_tensor(t) and errors.shape_str(t) or type(t) end
  if bad(text, d) then
    errors.raise("CrossAttentionBlock.forward: text must be [B, Lt, d_model=%d], got %s", d, desc(text))
  end
  if bad(image, image_dim) or image.shape[1] ~= text.shape[1] then
    errors.raise("CrossAttentionBlock.forward: image must be [B=%d, Li, image_dim=%d], got %s%s", text.shape[1],
      image_dim, desc(image), (image_dim == d and Module.is_tensor(image) and image:dim() == 3
        and image.shape[3] ~= d) and " (image tokens of another width: nn.CrossAttentionBlock(d_model, "
      .. "heads, {image_dim = n}))" or "")
  end
  local x, weights = text, nil
  local mask = masks.resolve(opts, "CrossAttentionBlock.forward", masks.names("image"))
  if self.self_attention then
    x = self:_step(x, self.norm_sa, self.dropout_sa, function(h)
      return self.self_attn(h, { key_padding_mask = opts.key_padding_mask, variant_inputs = opts.variant_inputs })
    end)
  end
  x = self:_step(x, self.norm_ca, self.dropout_ca, function(h)
    local y, w = attn_opts.cross_call("image_variant_inputs", self.cross_attn, h, image, masks.for_mha(mask, {
      key_padding_mask = opts.image_padding_mask, need_weights = opts.need_weights or false,
      variant_inputs = opts.image_variant_inputs,
    }))
    weights = w
    return y
  end)
  x = self:_step(x, self.norm_ff, self.dropout_ff, function(h) return self.ff(h) end)
  if opts.need_weights then return x, weights end
  return x
end

--- "norm_first=..., self_attention=..."
function Block:extra_repr()
  return ("norm_first=%s, self_attention=%s"):format(tostring(self.norm_first), tostring(self.self_attention))
end

return Block
