--- nn.TransformerDecoder(d_model, heads, num_layers [, opts]): a stack of
-- TransformerDecoderLayer ("layers.1", ...) with the layer options `opts`
-- (cross=false for a decoder-only model), plus a final LayerNorm ("norm")
-- when final_norm is true -- by default exactly when norm_first is.
-- nn.TransformerDecoder(layer, num_layers [, norm]) is PyTorch's form:
-- num_layers copies of the nn.TransformerDecoderLayer `layer` (equal at
-- the start, as torch's deep copies), and `norm` as the final norm, none
-- when left out, as torch's.
-- forward(x, memory [, opts]) takes the layer's options (variant_inputs for
-- the self-attention's variant, memory_variant_inputs for the cross-attention's,
-- given to every layer); with opts.cache (a
-- table, empty for a new sequence) layer i keeps its keys/values in
-- opts.cache[i], so x may be just the new positions (see ember.generate).
-- @classmod nn.TransformerDecoder
local Module = require "ember.nn.Module"
local errors = require "ember._errors"
local Sequential = require "ember.nn.Sequential"
local LayerNorm = require "ember.nn.LayerNorm"
local DecoderLayer = require "ember.nn.TransformerDecoderLayer"
local attn_opts = require "ember.nn._attn_opts"

local Decoder = Module:extend("TransformerDecoder")

function Decoder:__init(d_model, heads, num_layers, opts, ...)
  if Module.is_module(d_model) then
    -- torch's enable_nested_tensor and mask_check (an encoder's) are accepted and ignored, as by name
    errors.no_extra("nn.TransformerDecoder", { "decoder_layer", "num_layers", "norm" }, 1, d_model, heads, num_layers, opts, ...) -- PyTorch's (layer, num_layers [, norm])
    return attn_opts.stack_from_layer(self, "nn.TransformerDecoder", DecoderLayer, d_model, heads, num_layers)
  end
  errors.no_extra("nn.TransformerDecoder", { "d_model", "heads", "num_layers", "opts" }, 1, d_model, heads, num_layers, opts, ...)
  opts = attn_opts.check_layer_options("nn.TransformerDecoder", opts, DecoderLayer.OPTIONS, { "final_norm" })
  local layer_opts = {}
  for k, v in pairs(opts) do if k ~= "final_norm" then layer_opts[k] = v end end
  if math.type(num_layers) ~= "integer" or num_layers < 1 then
    errors.raise("nn.TransformerDecoder: num_layers must be a positive integer, got %s", tostring(num_layers))
  end
  local layers = Sequential()
  for _ = 1, num_layers do layers:add(DecoderLayer(d_model, heads, layer_opts)) end
  self:add_module("layers", layers)
  local final = opts.final_norm
  if final == nil then final = opts.norm_first or false end
  if final then
    self:add_module("norm", LayerNorm(d_model, { eps = opts.layer_norm_eps, dtype = opts.dtype, device = opts.device }))
  end
end

--- Runs the layers in order over x with the same memory (and the final norm, if any).
-- @tparam Tensor x [B, L, d_model]
-- @tparam Tensor memory [B, Lm, d_model] (nil for decoder-only layers)
-- @tparam[opt] table opts as TransformerDecoderLayer.forward's; `cache` holds one table per layer
-- @treturn Tensor [B, L, d_model]
function Decoder:forward(x, memory, ...)
  local opts = attn_opts.forward_options("TransformerDecoder.forward",
    { "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask", "tgt_is_causal",
      "memory_is_causal" }, ...)
  opts = opts or {}
  local cache = opts.cache
  for i = 1, #self.layers do
    local o = opts
    if cache then
      o = {}
      for k, v in pairs(opts) do o[k] = v end
      cache[i] = cache[i] or { reserve = cache.reserve } -- positions to preallocate, if known
      o.cache = cache[i]
    end
    x = self.layers[i](x, memory, o)
  end
  if self.norm then x = self.norm(x) end
  return x
end

return Decoder
