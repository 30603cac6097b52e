--- nn.TransformerEncoder(d_model, heads, num_layers [, opts]): a stack of
-- TransformerEncoderLayer (children "layers.1", "layers.2", ...) with the
-- layer options `opts`, plus a final LayerNorm ("norm") when final_norm is
-- true -- by default exactly when norm_first is, as pre-norm stacks need it.
-- nn.TransformerEncoder(layer, num_layers [, norm]) is PyTorch's form:
-- num_layers copies of the nn.TransformerEncoderLayer `layer` (equal at
-- the start, as torch's deep copies), and `norm` (e.g. nn.LayerNorm(d_model))
-- as the final norm, none when left out, as torch's. torch's
-- enable_nested_tensor and mask_check are taken and ignored: torch's
-- inference fast path (eval, no grad, batch_first, src_key_padding_mask)
-- returns 0 at padded positions, ember the rows computed there (the same
-- elsewhere).
-- forward(x [B, L, d_model] [, {key_padding_mask=, attn_mask=, causal=}]), or PyTorch's
-- names: mask (or src_mask), src_key_padding_mask, is_causal.
-- @usage local layer = nn.TransformerEncoderLayer(16, 4, {dim_feedforward = 32, batch_first = true})
-- local enc = nn.TransformerEncoder(layer, 2, nn.LayerNorm(16))   -- as torch.nn.TransformerEncoder
-- print(enc(ember.randn(2, 5, 16)).shape)   --> ember.Size{2, 5, 16}
-- @classmod nn.TransformerEncoder
local Module = require "ember.nn.Module"
local errors = require "ember._errors"
local Sequential = require "ember.nn.Sequential"
local LayerNorm = require "ember.nn.LayerNorm"
local EncoderLayer = require "ember.nn.TransformerEncoderLayer"
local attn_opts = require "ember.nn._attn_opts"

local Encoder = Module:extend("TransformerEncoder")

function Encoder:__init(d_model, heads, num_layers, opts, ...)
  if Module.is_module(d_model) then
    -- torch's enable_nested_tensor and mask_check (an encoder's) are accepted and ignored, as by name
    errors.no_extra("nn.TransformerEncoder", { "encoder_layer", "num_layers", "norm", "enable_nested_tensor", "mask_check" }, 1, d_model, heads, num_layers, opts, ...) -- PyTorch's (layer, num_layers [, norm])
    return attn_opts.stack_from_layer(self, "nn.TransformerEncoder", EncoderLayer, d_model, heads, num_layers)
  end
  errors.no_extra("nn.TransformerEncoder", { "d_model", "heads", "num_layers", "opts" }, 1, d_model, heads, num_layers, opts, ...)
  opts = attn_opts.check_layer_options("nn.TransformerEncoder", opts, EncoderLayer.OPTIONS, { "final_norm" })
  local layer_opts = {}
  for k, v in pairs(opts) do if k ~= "final_norm" then layer_opts[k] = v end end
  if math.type(num_layers) ~= "integer" or num_layers < 1 then
    errors.raise("nn.TransformerEncoder: num_layers must be a positive integer, got %s", tostring(num_layers))
  end
  local layers = Sequential()
  for _ = 1, num_layers do layers:add(EncoderLayer(d_model, heads, layer_opts)) end
  self:add_module("layers", layers)
  local final = opts.final_norm
  if final == nil then final = opts.norm_first or false end
  if final then
    self:add_module("norm", LayerNorm(d_model, { eps = opts.layer_norm_eps, dtype = opts.dtype, device = opts.device }))
  end
end

--- Runs the layers in order (and the final norm, if any).
-- @tparam Tensor x [B, L, d_model]
-- @tparam[opt] table opts as TransformerEncoderLayer.forward's, given to every layer
-- @treturn Tensor [B, L, d_model]
function Encoder:forward(x, ...)
  local opts = attn_opts.forward_options("TransformerEncoder.forward", { "mask", "src_key_padding_mask", "is_causal" }, ...)
  if type(opts) == "table" and opts.mask ~= nil then -- torch.nn.TransformerEncoder.forward's name
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.mask, o.src_mask = nil, opts.mask
    opts = o
  end
  for i = 1, #self.layers do x = self.layers[i](x, opts) end
  if self.norm then x = self.norm(x) end
  return x
end

return Encoder
