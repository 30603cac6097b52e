--- models.ViT (ember.models.ViT): a Vision Transformer (Dosovitskiy et
-- al. 2020) with a Conv2d patch embedding, with torchvision's option names.
--
--    local ViT = require("ember.models").ViT
--    local model = ViT{image_size = 28, patch_size = 7, in_channels = 1, num_classes = 10,
--                      hidden_dim = 64, num_layers = 4, num_heads = 4, mlp_dim = 256}
--    local images = ember.randn(2, 1, 28, 28)
--    local logits = model(images)               -- [B, 1, 28, 28] -> [B, 10]
--
-- The computation:
--
--    tokens = conv_proj(x)                      -- nn.Conv2d(C, D, patch, stride = patch): [B, D, h, w]
--                :flatten to [B, h*w, D]        -- row-major patches, as torchvision
--    h = cat(class_token, tokens) + pos_embedding, dropout
--    h = layers[i](h)                           -- nn.TransformerEncoderLayer, pre-norm, GELU
--    y = head(norm(h)[:, 1])                    -- the class token's (pool = "mean": the mean of all)
--
-- State dict: `class_token` [1, 1, D], `pos_embedding` [1, 1 + h*w, D],
-- `conv_proj.{weight,bias}`, `layers.<i>.*` (i from 0; the encoder layer's
-- own names: self_attn.q_proj, ff.linear1, norm1, ...), `norm.{weight,bias}`,
-- `head.{weight,bias}`. A torchvision `vit_*` state dict loads as it is
-- (`upgrade_state_dict`: encoder.pos_embedding, encoder.layers.encoder_layer_<i>
-- with ln_1, self_attention (its in_proj_weight split), ln_2, mlp.0 / mlp.3
-- (or mlp.linear_1 / linear_2), encoder.ln, heads.head), and
-- `torch_state_dict()` gives torchvision's names back (the model matches
-- torchvision's VisionTransformer with representation_size = nil, whose
-- LayerNorm eps 1e-6 is ember's default here). Initialisation: positions and class token
-- N(0, 0.02^2) (as torchvision's positions; its class token starts at zero,
-- which gives every image the same start), the conv and layers as their
-- modules do, the head at zero (as torchvision).
-- @classmod models.ViT
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local Module = require "ember.nn.Module"
local Linear = require "ember.nn.Linear"
local LayerNorm = require "ember.nn.LayerNorm"
local Dropout = require "ember.nn.Dropout"
local Conv2d = require "ember.nn.Conv2d"
local ModuleList = require "ember.nn.ModuleList"
local TransformerEncoderLayer = require "ember.nn.TransformerEncoderLayer"

local raise = errors.raise
local shape_str = errors.shape_str

local ViT = Module:extend("ViT")

local KEYS = { "image_size", "patch_size", "in_channels", "num_classes", "hidden_dim", "num_layers", "num_heads",
               "mlp_dim", "dropout", "attention_dropout", "layer_norm_eps", "pool", "attention", "attention_options",
               "checkpoint", "dtype", "device" }

local function pair(v, name)
  if math.type(v) == "integer" and v > 0 then return { v, v } end
  if type(v) == "table" and math.type(v[1]) == "integer" and math.type(v[2]) == "integer" and v[1] > 0 and v[2] > 0 then
    return { v[1], v[2] }
  end
  raise("ViT: %s must be a positive integer or a pair {h, w}, got %s", name, tostring(v))
end

local function check_config(cfg)
  if type(cfg) ~= "table" then raise("ViT: expected a config table, got %s", type(cfg)) end
  local known = {}
  for _, k in ipairs(KEYS) do known[k] = true end
  for k in pairs(cfg) do
    if not known[k] then raise("ViT: unknown config key '%s' (keys: %s)", tostring(k), table.concat(KEYS, ", ")) end
  end
  local c = {
    image_size = pair(cfg.image_size, "image_size"), patch_size = pair(cfg.patch_size, "patch_size"),
    in_channels = cfg.in_channels or 3, num_classes = cfg.num_classes or 1000, hidden_dim = cfg.hidden_dim,
    num_layers = cfg.num_layers, num_heads = cfg.num_heads, mlp_dim = cfg.mlp_dim,
    dropout = cfg.dropout or 0, attention_dropout = cfg.attention_dropout or 0,
    layer_norm_eps = cfg.layer_norm_eps or 1e-6, pool = cfg.pool or "cls", attention = cfg.attention,
    attention_options = cfg.attention_options, checkpoint = cfg.checkpoint, dtype = cfg.dtype, device = cfg.device,
  }
  for _, k in ipairs({ "in_channels", "num_classes", "hidden_dim", "num_layers", "num_heads", "mlp_dim" }) do
    if math.type(c[k]) ~= "integer" or c[k] < 1 then
      raise("ViT: config.%s must be a positive integer, got %s", k, tostring(c[k]))
    end
  end
  if c.hidden_dim % c.num_heads ~= 0 then
    raise("ViT: config.hidden_dim (%d) must be divisible by num_heads (%d): each head gets hidden_dim / num_heads dims",
      c.hidden_dim, c.num_heads)
  end
  for i, side in ipairs({ "height", "width" }) do
    if c.image_size[i] % c.patch_size[i] ~= 0 then
      raise("ViT: the image %s (%d) must be a multiple of the patch size (%d)", side, c.image_size[i], c.patch_size[i])
    end
  end
  if c.pool ~= "cls" and c.pool ~= "mean" then raise("ViT: config.pool must be \"cls\" or \"mean\", got %s", tostring(c.pool)) end
  c.grid = { c.image_size[1] // c.patch_size[1], c.image_size[2] // c.patch_size[2] }
  c.num_patches = c.grid[1] * c.grid[2]
  return c
end

--- Builds the model.
-- @tparam table config `image_size` and `patch_size` (a number or {h, w};
-- the image a multiple of the patch), `hidden_dim`, `num_layers`,
-- `num_heads`, `mlp_dim` (required); `in_channels` (3), `num_classes`
-- (1000), `dropout` (0; after the positions and in each layer),
-- `attention_dropout` (0), `layer_norm_eps` (1e-6), `pool` ("cls": the class
-- token's output; "mean": the mean of all tokens), `attention` and
-- `attention_options` (an attention variant for the layers), `checkpoint`
-- (false; true: each layer recomputed in the backward, nn.checkpoint), `dtype`, `device`
function ViT:__init(config)
  local c = check_config(config)
  self.config = c
  local t = { dtype = c.dtype, device = c.device }
  local D = c.hidden_dim
  self:register_parameter("class_token", ember.normal({ 1, 1, D }, 0, 0.02, t))
  self:register_parameter("pos_embedding", ember.normal({ 1, c.num_patches + 1, D }, 0, 0.02, t))
  self.conv_proj = Conv2d(c.in_channels, D, c.patch_size, { stride = c.patch_size, dtype = c.dtype, device = c.device })
  self.dropout = Dropout(c.dropout)
  local layers = ModuleList()
  for _ = 1, c.num_layers do
    layers:append(TransformerEncoderLayer(D, c.num_heads, {
      dim_feedforward = c.mlp_dim, dropout = c.dropout, attention_dropout = c.attention_dropout,
      activation = "gelu", norm_first = true, layer_norm_eps = c.layer_norm_eps,
      attention = c.attention, attention_options = c.attention_options, checkpoint = c.checkpoint,
      dtype = c.dtype, device = c.device,
    }))
  end
  self.layers = layers
  self.norm = LayerNorm(D, { eps = c.layer_norm_eps, dtype = c.dtype, device = c.device })
  self.head = Linear(D, c.num_classes, { init = "zeros", dtype = c.dtype, device = c.device })
end

--- The tokens after the last layer's norm: [B, 1 + patches, hidden_dim]
-- (the class token first).
-- @tparam Tensor x images [B, in_channels, H, W] (H, W = image_size)
-- @tparam[opt] table opts passed to every layer (`key_padding_mask`, ...)
-- @treturn Tensor
function ViT:features(x, opts)
  opts = Module.check_options("ViT.forward", opts, TransformerEncoderLayer.FORWARD_OPTIONS)
  local c = self.config
  if not ember.is_tensor(x) or x.ndim ~= 4 or x.shape[2] ~= c.in_channels or x.shape[3] ~= c.image_size[1]
      or x.shape[4] ~= c.image_size[2] then
    raise("ViT.forward: images must be [B, %d, %d, %d], got %s", c.in_channels, c.image_size[1], c.image_size[2],
      ember.is_tensor(x) and shape_str(x) or type(x))
  end
  local B, D = x.shape[1], c.hidden_dim
  local p = self.conv_proj(x)                                -- [B, D, h, w]
  local tokens = p:reshape(B, D, c.num_patches):transpose(2, 3) -- [B, h*w, D], row-major patches
  local h = ember.cat({ self.class_token:expand(B, 1, D), tokens }, 2) + self.pos_embedding
  h = self.dropout(h)
  for _, layer in ipairs(self.layers) do h = layer(h, opts) end
  return self.norm(h)
end

--- Class logits.
-- @tparam Tensor x images [B, in_channels, H, W]
-- @tparam[opt] table opts passed to every layer
-- @treturn Tensor [B, num_classes]
function ViT:forward(x, opts)
  local h = self:features(x, opts)
  if self.config.pool == "mean" then return self.head(h:mean(2)) end
  return self.head(h:select(2, 1))
end

--- The configuration, for printing.
function ViT:extra_repr()
  local c = self.config
  return ("image_size={%d, %d}, patch_size={%d, %d}, hidden_dim=%d, num_layers=%d, num_heads=%d, mlp_dim=%d, pool=%s")
    :format(c.image_size[1], c.image_size[2], c.patch_size[1], c.patch_size[2], c.hidden_dim, c.num_layers,
      c.num_heads, c.mlp_dim, c.pool)
end

-- torchvision's names -> ember's (Lua patterns on whole names, tried in
-- order; a layer's own part is what follows "layers.<i>.")
local TV_TOP = {
  { "^encoder%.pos_embedding$", "pos_embedding" }, { "^encoder%.ln%.", "norm." }, { "^heads%.head%.", "head." },
}
local TV_LAYER = {
  { "^ln_1%.", "norm1." }, { "^ln_2%.", "norm2." }, { "^self_attention%.", "self_attn." },
  { "^mlp%.0%.", "ff.linear1." }, { "^mlp%.3%.", "ff.linear2." },
  { "^mlp%.linear_1%.", "ff.linear1." }, { "^mlp%.linear_2%.", "ff.linear2." }, -- torchvision < 0.13
}
-- ember's -> torchvision's; a layer's names are PyTorch's by then (its
-- own to_torch_names ran first: ff.linear1 -> linear1)
local TO_TV_TOP = { { "^pos_embedding$", "encoder.pos_embedding" }, { "^norm%.", "encoder.ln." }, { "^head%.", "heads.head." } }
local TO_TV_LAYER = { { "^norm1%.", "ln_1." }, { "^norm2%.", "ln_2." }, { "^self_attn%.", "self_attention." },
  { "^linear1%.", "mlp.0." }, { "^linear2%.", "mlp.3." } }

local function rewrite(name, rules)
  for _, r in ipairs(rules) do
    local n, hits = name:gsub(r[1], r[2])
    if hits > 0 then return n end
  end
  return name
end

--- A torchvision VisionTransformer state dict loads as it is: its names
-- mapped to ember's (see the class's text), then each child maps its own
-- part (the layers' self_attn splits in_proj_weight: nn.MultiHeadAttention).
-- @tparam table sd name -> tensor
-- @string[opt] prefix as Module.upgrade_state_dict's
-- @treturn table
-- @treturn integer how many earlier-ember names were mapped
function ViT:upgrade_state_dict(sd, prefix)
  local out = {}
  for k, v in pairs(sd) do
    local n = k
    if type(k) == "string" then
      local i, rest = k:match("^encoder%.layers%.encoder_layer_(%d+)%.(.+)$")
      if i then n = "layers." .. i .. "." .. rewrite(rest, TV_LAYER) else n = rewrite(k, TV_TOP) end
      if n ~= k and sd[n] ~= nil then n = k end -- both spellings given: each keeps its own
    end
    out[n] = v
  end
  return Module.upgrade_state_dict(self, out, prefix)
end

--- torchvision's names, for `torch_state_dict` (the inverse of the map above).
-- @tparam table sd
-- @treturn table
function ViT:to_torch_names(sd)
  local out = {}
  for k, v in pairs(sd) do
    local i, rest = k:match("^layers%.(%d+)%.(.+)$")
    if i then
      out["encoder.layers.encoder_layer_" .. i .. "." .. rewrite(rest, TO_TV_LAYER)] = v
    else
      out[rewrite(k, TO_TV_TOP)] = v
    end
  end
  return out
end

-- C errors (bad shapes, dtypes) name the user's line, not this file's.
ViT.forward = errors.wrap(ViT.forward)
ViT.features = errors.wrap(ViT.features)

return ViT
