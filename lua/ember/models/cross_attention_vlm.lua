--- models.CrossAttentionVLM (ember.models.CrossAttentionVLM): the
-- cross-attention vision-language model of the Sort-of-CLEVR demo
-- (scripts/sort_of_clevr.lua, whose header has the measurements and the
-- reasons for each part): question tokens cross-attend to object tokens
-- pooled from the pixels.
--
--    local VLM = require("ember.models").CrossAttentionVLM
--    local model = VLM{d_model = 64, heads = 4, distance_slopes = {-1000, 1000, 0, 0},
--                      subject_slopes = {-1000, 1000, 0, 0}}
--    local images, questions = ember.rand(2, 3, 75, 75), ember.randint(1, 3, {2, 4, 2})
--    local logits = model(images, questions)   -- [B, 3, 75, 75], int64 [B, Q, 2] -> [B*Q, n_answers]
--    local learned = VLM{stem = "conv"}         -- from the pixels, nothing given (the script's default)
--
-- Two stems make the image tokens. `stem = "conv"`: the image with two
-- coordinate channels (each pixel's x and y, CoordConv) through 3x3
-- stride-2 convolutions with BatchNorm and ReLU (`stem_channels`, default
-- four of 24 as Relation Networks' CNN: 75 -> 5x5 = 25 tokens); each cell
-- of the last feature map is a token (its channels, its centre and Fourier
-- features of the centre); the image layers and the question's blocks as
-- below, without distance biases, and the question's colour token is that
-- colour's embedding: which pixels are an object, of which colour and how
-- far from which, is learned. `stem = "pixels"` (the default) hands the
-- model parts of the answer:
--  * the inked (non-white) pixels of an image are its pixel tokens; a small
--    MLP (`pixel`) embeds each pixel's colour with Fourier features of the RGB values;
--  * one object slot per colour: `slots = "colour"` pools the pixels of that
--    colour (binding given), `slots = "learned"` attends with the colour's
--    question embedding as the query (`compete`: slots compete for pixels,
--    as in Slot Attention; `window`: shape features from the pixels within
--    that many px of the slot's centre); a slot's token is its pooled pixel
--    values, centre (and Fourier features of it), spread and area;
--  * `image_layers` nn.TransformerEncoderLayer blocks mix the object tokens,
--    with an additive bias slope_h * distance between centres per head
--    (`distance_slopes`, one per head: negative sees the nearest other
--    object, positive the furthest, 0 none);
--  * a question is two tokens (kind, colour; the colour token is that
--    colour's object token); `cross_layers` nn.CrossAttentionBlock blocks
--    attend to the object tokens, with the same kind of bias by distance
--    from the question's subject (`subject_slopes`); `relative` adds each
--    object's embedded offset from the subject; the mean of the two tokens
--    goes through an MLP to `n_answers` logits.
-- The scene constants default to ember.data.sort_of_clevr's (75 px images,
-- six objects of RGB colours `data.sort_of_clevr.RGB`, 10 px objects, its
-- question tokens and answers). State-dict names are those of the script's
-- earlier local class (pixel, pix_value, object_embed, img1.., q_embed,
-- q_pos, cross1.., norm, head), so its checkpoints load.
-- @classmod models.CrossAttentionVLM
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local nn = require "ember.nn"

local raise = errors.raise
local Module = nn.Module

local VLM = nn.Module:extend("CrossAttentionVLM")

-- A pixel's colour and its Fourier features [..., 3 + 6 * COLOUR_FREQS]:
-- colours that lie on one line in RGB (red, orange, yellow) are then far
-- apart, and the stem tells them apart from the first steps.
local COLOUR_FREQS = 3
local function colour_features(rgb)
  local parts = {rgb}
  for f = 1, COLOUR_FREQS do
    local a = rgb * (math.pi * 2 ^ (f - 1))
    parts[#parts + 1] = a:sin()
    parts[#parts + 1] = a:cos()
  end
  return ember.cat(parts, rgb:dim())
end

-- pairwise distances [B, K, K] between object centres pos [B, K, 2]
local function distances(pos)
  local p = pos:detach()
  local diff = p:unsqueeze(3) - p:unsqueeze(2)                                -- [B, K, K, 2]
  return ((diff * diff):sum(4) + 1e-8):sqrt()
end

local DEFAULTS = {
  d_model = 64, heads = 4, pixel_dim = 32, fourier = 4, image_layers = 2, cross_layers = 2, ffn = 128,
  dropout = 0.0, slots = "colour", compete = false, window = 0, relative = false, attention = "standard",
  stem = "pixels", condition = false,
}
local OPTIONAL = { "attention_dropout", "attention_options", "distance_slopes", "subject_slopes", "image_size",
                   "n_objects", "object_rgb", "object_size", "n_question_tokens", "n_answers", "stem_channels" }
-- The pixel stem's parts, each of which hands the model part of the answer
-- (binding by colour, routing by distance): stem = "conv" has none of them.
local PIXEL_STEM_ONLY = { "pixel_dim", "slots", "compete", "window", "relative", "distance_slopes", "subject_slopes" }
-- The conv stem's default: Relation Networks' CNN for Sort-of-CLEVR, four
-- 3x3 stride-2 convolutions of 24 channels (75 -> 38 -> 19 -> 10 -> 5).
local STEM_CHANNELS = { 24, 24, 24, 24 }

local function check_config(cfg)
  cfg = cfg or {}
  if type(cfg) ~= "table" then raise("CrossAttentionVLM: expected a config table, got %s", type(cfg)) end
  local known, names = {}, {}
  for k in pairs(DEFAULTS) do known[k] = true; names[#names + 1] = k end
  for _, k in ipairs(OPTIONAL) do known[k] = true; names[#names + 1] = k end
  table.sort(names)
  for k in pairs(cfg) do
    if not known[k] then raise("CrossAttentionVLM: unknown config key '%s' (keys: %s)", tostring(k), table.concat(names, ", ")) end
  end
  local o = {}
  for k, v in pairs(DEFAULTS) do if cfg[k] == nil then o[k] = v else o[k] = cfg[k] end end
  for _, k in ipairs(OPTIONAL) do o[k] = cfg[k] end
  local soc = require("ember.data").sort_of_clevr
  o.image_size = o.image_size or soc.SIZE
  o.n_objects = o.n_objects or soc.N_OBJECTS
  o.object_rgb = o.object_rgb or soc.RGB
  o.object_size = o.object_size or soc.OBJECT_SIZE
  o.n_question_tokens = o.n_question_tokens or #soc.QUESTION_TOKENS
  o.n_answers = o.n_answers or #soc.ANSWERS
  for _, k in ipairs({ "d_model", "heads", "pixel_dim", "fourier", "image_layers", "cross_layers", "ffn", "image_size",
                       "n_objects", "object_size", "n_question_tokens", "n_answers" }) do
    if math.type(o[k]) ~= "integer" or o[k] < (k:find("layers") and 0 or 1) then
      raise("CrossAttentionVLM: config.%s must be a positive integer, got %s", k, tostring(o[k]))
    end
  end
  if o.d_model % o.heads ~= 0 then
    raise("CrossAttentionVLM: config.d_model (%d) must be divisible by heads (%d): each head gets d_model / heads dims",
      o.d_model, o.heads)
  end
  if o.stem ~= "pixels" and o.stem ~= "conv" then
    raise("CrossAttentionVLM: config.stem must be \"pixels\" or \"conv\", got %s", tostring(o.stem))
  end
  if o.stem == "conv" then
    for _, k in ipairs(PIXEL_STEM_ONLY) do
      if cfg[k] ~= nil and cfg[k] ~= DEFAULTS[k] then
        raise("CrossAttentionVLM: config.%s is for stem = \"pixels\" (stem = \"conv\" learns binding and routing)", k)
      end
    end
    local ch = o.stem_channels or STEM_CHANNELS
    if type(ch) ~= "table" or #ch == 0 then
      raise("CrossAttentionVLM: config.stem_channels must list the channels of each convolution, got %s", tostring(ch))
    end
    for _, c in ipairs(ch) do
      if math.type(c) ~= "integer" or c < 1 then
        raise("CrossAttentionVLM: config.stem_channels must hold positive integers, got %s", tostring(c))
      end
    end
    o.stem_channels = ch
  elseif o.stem_channels ~= nil then
    raise("CrossAttentionVLM: config.stem_channels is for stem = \"conv\"")
  end
  if type(o.condition) ~= "boolean" then
    raise("CrossAttentionVLM: config.condition must be a boolean, got %s", tostring(o.condition))
  end
  if o.condition and o.stem ~= "conv" then
    raise("CrossAttentionVLM: config.condition is for stem = \"conv\" (the pixel stem starts each question from its subject)")
  end
  -- a variant that reads per-call tensors (document ids, a prefix length)
  -- would fail at the first forward, which takes only images and questions
  local needs = require("ember.nn._attn_opts").input_names(o.attention)
  if #needs > 0 then
    raise("CrossAttentionVLM: attention '%s' needs per-call tensors (%s), which this model's forward does not take; "
      .. "use a variant without them (standard, local, alibi_lua, softcap, ...)", tostring(o.attention), table.concat(needs, ", "))
  end
  if o.slots ~= "colour" and o.slots ~= "learned" then
    raise("CrossAttentionVLM: config.slots must be \"colour\" or \"learned\", got %s", tostring(o.slots))
  end
  if type(o.object_rgb) ~= "table" or #o.object_rgb ~= o.n_objects then
    raise("CrossAttentionVLM: config.object_rgb must list n_objects (%d) {r, g, b} colours", o.n_objects)
  end
  for _, k in ipairs({ "distance_slopes", "subject_slopes" }) do
    local s = o[k]
    if s ~= nil then
      if type(s) ~= "table" or #s ~= o.heads then
        raise("CrossAttentionVLM: config.%s must list one slope per head (%d), got %s", k, o.heads,
          type(s) == "table" and (#s .. " slopes") or tostring(s))
      end
      for _, v in ipairs(s) do
        if type(v) ~= "number" then raise("CrossAttentionVLM: config.%s must hold numbers, got %s", k, tostring(v)) end
      end
    end
  end
  return o
end

-- The pixel stem (stem = "pixels"): inked pixels -> one object slot per
-- colour (its pooled pixels, centre, spread, area; see encode_image).
local function pixel_stem(self, o)
  local S, K = o.image_size, o.n_objects
  local d, dp = o.d_model, o.pixel_dim
  self.pixel_dim = dp
  self.window = o.window
  self.compete = o.compete
  self.colour_slots = o.slots == "colour"
  local rgb = {}
  for k = 1, K do rgb[k] = {o.object_rgb[k][1] / 255, o.object_rgb[k][2] / 255, o.object_rgb[k][3] / 255} end
  self:register_buffer("slot_rgb", ember.tensor(rgb), false)                 -- [K, 3]
  -- pixel stem: each pixel's colour -> a key and a value
  self:add_module("pixel", nn.Sequential(nn.Linear(3 + 6 * COLOUR_FREQS, dp), nn.ReLU(), nn.Linear(dp, dp), nn.ReLU()))
  if not self.colour_slots then self:add_module("pix_key", nn.Linear(dp, dp)) end
  self:add_module("pix_value", nn.Linear(dp, dp))
  if not self.colour_slots then self:add_module("slot_query", nn.Linear(d, dp)) end
  local xy = {}
  for y = 1, S do for x = 1, S do xy[#xy + 1] = {(x - 0.5) / S * 2 - 1, (y - 0.5) / S * 2 - 1} end end
  self:register_buffer("xy", ember.tensor(xy), false)                      -- [S*S, 2] in [-1, 1]
  local freqs = {}
  for f = 1, o.fourier do freqs[f] = math.pi * 2 ^ (f - 1) / 2 end
  self:register_buffer("freqs", ember.tensor(freqs):view(1, 1, 1, o.fourier), false)
  local slots = {}
  for k = 1, K do slots[k] = k end
  self:register_buffer("slots", ember.tensor(slots, {dtype = "int64"}), false)
  -- an object token: pooled pixel values, centroid, mass, Fourier features of the centroid
  self:add_module("object_embed", nn.Linear(dp + 5 + 4 * o.fourier, d))
end

-- Fourier features of 2-D positions xy [..., 2] in [-1, 1]: sin and cos of
-- each coordinate times pi * 2^(f-1) / 2, f = 1..n ([..., 4n]).
local function fourier(xy, n)
  local parts = {}
  for f = 1, n do
    local a = xy * (math.pi * 2 ^ (f - 1) / 2)
    parts[#parts + 1] = a:sin()
    parts[#parts + 1] = a:cos()
  end
  return ember.cat(parts, xy:dim())
end

-- The conv stem (stem = "conv"): the image and each pixel's x and y
-- (CoordConv's coordinate channels, Liu et al. 2018) through 3x3 stride-2
-- convolutions, each with BatchNorm and ReLU (Relation Networks' CNN);
-- every cell of the last feature map is a token: its channels, the cell's
-- centre and Fourier features of it, embedded. Nothing says which pixels
-- are an object, which colour is which or how far apart things are:
-- binding and routing are learned.
local function conv_stem(self, o)
  local S = o.image_size
  local layers, c_in, side = {}, 3 + 2, S
  for _, c in ipairs(o.stem_channels) do
    layers[#layers + 1] = nn.Conv2d(c_in, c, 3, {stride = 2, padding = 1})
    layers[#layers + 1] = nn.BatchNorm2d(c)
    layers[#layers + 1] = nn.ReLU()
    c_in, side = c, (side - 1) // 2 + 1
  end
  self:add_module("stem", nn.Sequential(table.unpack(layers)))
  local xs, ys = {}, {}
  for y = 1, S do for x = 1, S do xs[#xs + 1], ys[#ys + 1] = (x - 0.5) / S * 2 - 1, (y - 0.5) / S * 2 - 1 end end
  self:register_buffer("pixel_xy", ember.tensor({xs, ys}):view(1, 2, S, S), false) -- [1, 2, S, S] in [-1, 1]
  -- With kernel 3, stride 2 and padding 1, output cell i (0-based) is
  -- centred on input pixel 2i, so after n layers cell i is on pixel 2^n i.
  local step, cells = 1 << #o.stem_channels, {}
  for i = 0, side - 1 do
    for j = 0, side - 1 do cells[#cells + 1] = {(step * j + 0.5) / S * 2 - 1, (step * i + 0.5) / S * 2 - 1} end
  end
  local cxy = ember.tensor(cells)                                            -- [N, 2], row-major cells
  self:register_buffer("token_pos", ember.cat({cxy, fourier(cxy, o.fourier)}, 2), false) -- [N, 2 + 4F]
  self.cells, self.cell_step = side, step
  self:add_module("token_embed", nn.Linear(c_in + 2 + 4 * o.fourier, o.d_model))
  -- condition = true: the question (its kind's and colour's embeddings,
  -- summed) scales and shifts every image token (FiLM, Perez et al. 2018)
  -- before the image layers, so they see the image as the question asks
  -- about it (1 + gamma, beta: a zero projection would change nothing)
  if o.condition then self:add_module("film", nn.Linear(o.d_model, 2 * o.d_model)) end
end

--- Builds the model.
-- @tparam[opt] table config `d_model` (64), `heads` (4), `pixel_dim` (32:
-- the per-pixel features), `fourier` (4: frequencies per coordinate of an
-- object's centre), `image_layers` (2), `cross_layers` (2), `ffn` (128),
-- `dropout` (0), `attention_dropout`, `attention` ("standard") and
-- `attention_options` (the layers' attention variant), `slots` ("colour"
-- or "learned"), `compete` (false), `window` (0), `relative` (false),
-- `distance_slopes` and `subject_slopes` (one number per head, or nil for
-- no bias); `stem` ("pixels", or "conv": then `stem_channels`, default
-- {24, 24, 24, 24}, `condition` (false: true modulates the image tokens
-- by the question, FiLM), and none of pixel_dim, slots, compete, window,
-- relative, distance_slopes, subject_slopes); the scene's `image_size`,
-- `n_objects`, `object_rgb`, `object_size`, `n_question_tokens`,
-- `n_answers` (ember.data.sort_of_clevr's)
function VLM:__init(config)
  local o = check_config(config)
  self.config = o
  local S, K = o.image_size, o.n_objects
  local d = o.d_model
  self.grid = S
  self.n_objects, self.object_size = K, o.object_size
  self.n_freq = o.fourier
  self.conv_stem = o.stem == "conv"
  if self.conv_stem then conv_stem(self, o) else pixel_stem(self, o) end
  self.n_img, self.n_cross = o.image_layers, o.cross_layers
  local lopts = {dim_feedforward = o.ffn, dropout = o.dropout, attention_dropout = o.attention_dropout,
                 norm_first = true, attention = o.attention, attention_options = o.attention_options}
  for i = 1, o.image_layers do self:add_module("img" .. i, nn.TransformerEncoderLayer(d, o.heads, lopts)) end
  -- Distance biases (ALiBi's idea in 2-D): head h adds slope_h * |p_i - p_j|
  -- to the score of token i for token j. A head with a negative slope
  -- cannot see the token itself (distance 0), so it looks at the nearest
  -- other object; one with a positive slope at the furthest. At +-1000 a
  -- centre-to-centre gap of 0.4 px is 10 in the scores: the biased heads
  -- route by distance alone (at +-32 the learned scores outgrew the bias).
  -- Each is [1, H, 1, 1]: the slopes, and -1e4 where the slope is negative.
  local function biases(slopes)
    if not slopes then return nil end
    local block = {}
    for h = 1, o.heads do block[h] = slopes[h] < 0 and -1e4 or 0 end
    return ember.tensor(slopes):view(1, o.heads, 1, 1), ember.tensor(block):view(1, o.heads, 1, 1)
  end
  local slopes, block = biases(o.distance_slopes)         -- image layers
  if slopes then
    self:register_buffer("img_slopes", slopes, false)
    self:register_buffer("img_block", block * ember.eye(K):view(1, 1, K, K), false) -- [1, H, K, K]
  end
  slopes, block = biases(o.subject_slopes)                  -- question -> objects
  if slopes then
    self:register_buffer("sub_slopes", slopes, false)
    self:register_buffer("sub_block", block, false)
  end
  self:add_module("img_norm", nn.LayerNorm(d))
  self:add_module("q_embed", nn.Embedding(o.n_question_tokens, d))
  self:add_module("q_pos", nn.LearnedPositionalEncoding(2, d))
  for i = 1, o.cross_layers do
    self:add_module("cross" .. i, nn.CrossAttentionBlock(d, o.heads, {self_attention = true,
      dim_feedforward = o.ffn, dropout = o.dropout, attention_dropout = o.attention_dropout,
      attention = o.attention, attention_options = o.attention_options}))
  end
  self.relative = o.relative
  if o.relative then self:add_module("rel_embed", nn.Sequential(nn.Linear(2, d), nn.ReLU(), nn.Linear(d, d))) end
  self:add_module("norm", nn.LayerNorm(d))
  self:add_module("head", nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, o.n_answers)))
end

--- The object tokens of images.
-- @tparam Tensor img [B, 3, image_size, image_size], values in [0, 1] (white background)
-- (stem = "pixels"; the conv stem's tokens are encode_conv's)
-- @return the object tokens after the image layers [B, K, d_model], before them [B, K, d_model],
-- each slot's attention [B, K, M] over the M inkiest pixels, their indices [B, M] (0-based,
-- row-major) and the slots' centres [B, K, 2] in [-1, 1]
function VLM:encode_image(img)
  local S, K = self.grid, self.n_objects
  local B, P, dp = img:size(1), S * S, self.pixel_dim
  local pix = img:reshape(B, 3, P):transpose(2, 3)                             -- [B, P, 3]
  -- Only inked pixels can belong to an object: the M = 6 * 11 * 11 inkiest
  -- pixels of each image (at most that many are inked) are its pixel tokens.
  local M = math.min(P, K * (self.object_size + 1) * (self.object_size + 1))
  local ink, at = (1 - pix):sum(3):topk(M, 2)                                 -- [B, M]
  local flat = (at + ember.arange(0, B, {dtype = "int64"}):view(B, 1) * P):reshape(-1)
  pix = pix:reshape(B * P, 3):index_select(1, flat):view(B, M, 3)
  local xy = self.xy:index_select(1, at:reshape(-1)):view(B, M, 2)
  local blank = ink:lt(0.01):float():view(B, 1, M)                            -- padding: white pixels
  local h = self.pixel(colour_features(pix))                                  -- [B, M, dp]
  local colour = self.q_embed(self.slots)                                     -- [K, d]
  local logits
  if self.colour_slots then
    -- Object-centric pooling by colour: every object has its own colour and
    -- pixels never blend, so a slot's pixels are those of its colour (0 for
    -- them, -1e4 elsewhere). Learned slots (--slots learned) bound every
    -- colour in some runs only: with one slot unbound (its centre ~49 px
    -- off) a run ends at ~85% relational.
    local diff = pix:view(B, 1, M, 3) - self.slot_rgb:view(1, K, 1, 3)
    logits = ((diff * diff):sum(4):lt(1e-3):float() - 1) * 1e4              -- [B, K, M]
  else
    local query = self.slot_query(colour):view(1, K, dp)
    logits = query:matmul(self.pix_key(h):transpose(2, 3))                    -- [B, K, M]
  end
  if self.compete and not self.colour_slots then
    -- Slots compete for pixels (Slot Attention's idea, Locatello et al.
    -- 2020): a pixel counts for slot k as much as k is its best slot
    -- (log of a softmax over the slots), so an object that the other
    -- slots leave alone falls to the one slot still unbound.
    logits = logits + logits:log_softmax(2)
  end
  local w = (logits - blank * 1e4):softmax(3)                                 -- attention over inked pixels
  local pos = w:matmul(xy)                                                    -- [B, K, 2]
  local sw, inside = w, 1 - blank -- the pixels the shape features see
  if self.window > 0 then
    -- A second look, the distance bias again (from a slot's centre to the
    -- pixels): only pixels within `window` px of the centre. Another
    -- object's pixels are >= 8.9 px from it (centres >= 16 px apart, a
    -- square's corner 7.1 px from its centre), so at 8.5 px the shape
    -- features see one object even while the colour attention still leaks.
    local off = xy:view(B, 1, M, 2) - pos:detach():view(B, K, 1, 2)
    local far = (off * off):sum(4):gt((self.window / (S / 2)) ^ 2):float()     -- [B, K, M]
    sw = (logits - (blank + far) * 1e4):softmax(3)
    inside = inside * (1 - far)
  end
  local feat = sw:matmul(self.pix_value(h))                                   -- [B, K, dp]
  -- The shape is in the area (pixels the slot claims) and the spread about
  -- the centre (a square's pixels reach its corners: variance ~10 px^2 per
  -- axis, a circle's ~6 px^2); log1p keeps the spread of the first, still
  -- diffuse attention (~480 px^2) small. Sharper versions (the spread and
  -- pixel count of a sharpened w, or of each pixel's softmax over the slots)
  -- left training stuck at chance on shape for 3-4 epochs in our runs.
  local area = (logits:sigmoid() * inside):sum(3, true) * (1 / 100)           -- [B, K, 1]
  local spos = sw:matmul(xy)
  local spread = ((sw:matmul(xy * xy) - spos * spos) * ((S / 2) ^ 2 / 10) + 1):log() -- [B, K, 2]
  local ang = pos:unsqueeze(4) * self.freqs                                   -- [B, K, 2, F]
  local four = ember.cat({ang:sin(), ang:cos()}, 4):reshape(B, K, 4 * self.n_freq)
  -- (float32 parts: under bf16 autocast the products are bfloat16, the sigmoid float32)
  local parts = {feat, pos, spread, area, four}
  for i, t in ipairs(parts) do parts[i] = t:float() end
  local obj = self.object_embed(ember.cat(parts, 3)) + colour
  local tok, lopts = obj, nil
  if self.img_slopes then
    lopts = {attn_mask = distances(pos):unsqueeze(2) * self.img_slopes + self.img_block} -- [B, H, K, K]
  end
  for i = 1, self.n_img do tok = self["img" .. i](tok, lopts) end
  return self.img_norm(tok), obj, w, at, pos
end

--- The image tokens of the conv stem (stem = "conv").
-- @tparam Tensor img [B, 3, image_size, image_size], values in [0, 1]
-- @tparam[opt] Tensor questions [B, Q, 2] (config.condition: each image's tokens are made once per
-- question, modulated by it)
-- @treturn Tensor the tokens after the image layers [B, N, d_model] ([B*Q, N, d_model] with
-- questions), N the last feature map's cells (row-major)
function VLM:encode_conv(img, questions)
  local B, S = img:size(1), self.grid
  local f = self.stem(ember.cat({img, self.pixel_xy:expand(B, 2, S, S)}, 2))  -- [B, C, g, g]
  local C, N = f:size(2), f:size(3) * f:size(4)
  local pos = self.token_pos
  -- (float32: under bf16 autocast the convolutions' output is bfloat16)
  local tok = ember.cat({f:reshape(B, C, N):transpose(2, 3):float(), pos:view(1, N, pos:size(2)):expand(B, N, pos:size(2))}, 3)
  tok = self.token_embed(tok)
  if self.film and questions then
    local Q, d = questions:size(2), tok:size(3)
    local e = self.q_embed(questions:reshape(B * Q, 2))                       -- [B*Q, 2, d]
    local gb = self.film(e:sum(2, true))                                      -- [B*Q, 1, 2d]
    tok = tok:unsqueeze(2):expand(B, Q, N, d):reshape(B * Q, N, d) * (gb:narrow(3, 1, d) + 1) + gb:narrow(3, d + 1, d)
  end
  for i = 1, self.n_img do tok = self["img" .. i](tok) end
  return self.img_norm(tok)
end

--- The attention of a question over the image [image_size, image_size]:
-- the cross-attention weights of one question (heads and tokens averaged)
-- spread over the pixels each token stands for (an object slot's pixels
-- for stem = "pixels", a feature-map cell's nearest pixels for "conv").
-- @tparam Tensor weights [H, 2, N]: one question's row of forward's weights
-- @param pixel_attention, pixel_index forward's third and fourth results for that image (stem = "pixels")
-- @treturn Tensor [image_size, image_size]
function VLM:attention_heat(weights, pixel_attention, pixel_index)
  local S = self.grid
  local per_token = weights:mean(1):mean(1)                                   -- [N]
  if self.conv_stem then
    local g, step, cell = self.cells, self.cell_step, {}
    for y = 0, S - 1 do
      for x = 0, S - 1 do
        local cy, cx = math.min(g - 1, (y + step // 2) // step), math.min(g - 1, (x + step // 2) // step)
        cell[#cell + 1] = cy * g + cx + 1                                     -- the nearest cell centre
      end
    end
    return per_token:index_select(1, ember.tensor(cell, {dtype = "int64"})):view(S, S)
  end
  local to_image = ember.one_hot(pixel_index, S * S):float()                 -- [M, S*S]: inked pixel -> image
  return per_token:view(1, -1):matmul(pixel_attention):matmul(to_image):view(S, S)
end

--- Answer logits for each question of each image.
-- @tparam Tensor img [B, 3, image_size, image_size]
-- @tparam Tensor questions int64 [B, Q, 2]: each question's kind and colour tokens (1-based)
-- @param[opt] need_weights also return the last block's cross-attention
-- (true, or `{need_weights = true}`)
-- @return logits [B*Q, n_answers]; with need_weights the cross-attention
-- [B*Q, H, 2, N] (N: K object tokens, or the conv stem's cells), and for
-- stem = "pixels" the slots' pixel attention [B, K, M] and pixel indices [B, M]
function VLM:forward(img, questions, need_weights)
  -- a boolean, or MultiHeadAttention's form {need_weights = true}
  if type(need_weights) == "table" then
    need_weights = Module.check_options("CrossAttentionVLM.forward", need_weights, { "need_weights" }).need_weights
  end
  if need_weights ~= nil and type(need_weights) ~= "boolean" then
    raise("CrossAttentionVLM.forward: need_weights must be a boolean (or {need_weights = true}), got %s",
      type(need_weights))
  end
  local S = self.config.image_size
  if not ember.is_tensor(img) or img.ndim ~= 4 or img.shape[2] ~= 3 or img.shape[3] ~= S or img.shape[4] ~= S then
    raise("CrossAttentionVLM.forward: images must be [B, 3, %d, %d] (image_size %d), got %s", S, S, S,
      ember.is_tensor(img) and errors.shape_str(img) or type(img))
  end
  if not ember.is_tensor(questions) or questions.dtype ~= "int64" or questions.ndim ~= 3 or questions.shape[3] ~= 2
      or questions.shape[1] ~= img.shape[1] then
    raise("CrossAttentionVLM.forward: questions must be int64 [B=%d, Q, 2] (each question's kind and colour "
      .. "tokens, 1-based), got %s", img.shape[1], ember.is_tensor(questions)
      and (questions.dtype .. " " .. errors.shape_str(questions)) or type(questions))
  end
  local K = self.n_objects
  local B, Q = questions:size(1), questions:size(2)
  local mem, obj, mask, at, pos
  local colour = questions:select(3, 2)                                       -- [B, Q]
  if self.conv_stem then mem = self:encode_conv(img, questions) else mem, obj, mask, at, pos = self:encode_image(img) end
  local N, d = mem:size(2), mem:size(3)
  if mem:size(1) == B then -- each question sees its image (conditioned tokens already are per question)
    mem = mem:unsqueeze(2):expand(B, Q, N, d):reshape(B * Q, N, d)
  end
  local kind = self.q_embed(questions:select(3, 1):reshape(B * Q, 1))        -- [B*Q, 1, d]
  if self.conv_stem then
    -- the colour token is the colour's embedding: finding its object is learned
    return self:answer(self.q_pos(ember.cat({kind, self.q_embed(colour:reshape(B * Q, 1))}, 2)), mem, {}, need_weights)
  end
  local image_of = ember.arange(0, B, {dtype = "int64"}):view(B, 1):expand(B, Q) * K
  local subject_at = (image_of + colour):reshape(-1)                          -- [B*Q] into [B*K]
  if self.relative then
    -- every object seen from the question's subject: its offset, embedded
    local from = pos:reshape(B * K, 2):index_select(1, subject_at):view(B * Q, 1, 2)
    local offset = pos:unsqueeze(2):expand(B, Q, N, 2):reshape(B * Q, N, 2) - from
    mem = mem + self.rel_embed(offset)
  end
  -- the colour token of a question is the object its colour pools (slot c), so
  -- the question starts from its subject's centre and area
  local subject = obj:reshape(B * K, d):index_select(1, subject_at)
  local q = self.q_pos(ember.cat({kind, subject:view(B * Q, 1, d)}, 2))
  local copts = {}
  if self.sub_slopes then
    -- each object's distance from the question's subject [B*Q, 1, 1, K]
    local from = distances(pos):reshape(B * K, K):index_select(1, subject_at):view(B * Q, 1, 1, K)
    local is_subject = ember.one_hot(colour:reshape(-1), K):float():view(B * Q, 1, 1, K)
    copts.image_mask = from * self.sub_slopes + is_subject * self.sub_block  -- [B*Q, H, 1, K]
  end
  local logits, weights = self:answer(q, mem, copts, need_weights)
  return logits, weights, mask, at
end

--- The question tokens through the cross-attention blocks, averaged, to logits.
-- @tparam Tensor q [B*Q, 2, d_model] the question tokens
-- @tparam Tensor mem [B*Q, N, d_model] the image tokens each question sees
-- @tparam table copts the blocks' options (image_mask); need_weights is set here
-- @bool[opt] need_weights also return the last block's cross-attention
-- @return logits [B*Q, n_answers], and with need_weights the weights [B*Q, H, 2, N]
function VLM:answer(q, mem, copts, need_weights)
  local weights
  for i = 1, self.n_cross do
    copts.need_weights = need_weights and i == self.n_cross
    if copts.need_weights then
      q, weights = self["cross" .. i](q, mem, copts)
    else
      q = self["cross" .. i](q, mem, copts)
    end
  end
  return self.head(self.norm(q):mean(2)), weights
end


-- C errors (bad shapes, dtypes) name the user's line, not this file's.
VLM.forward = errors.wrap(VLM.forward)

return VLM
