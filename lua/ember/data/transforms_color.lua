--- ember.data.transforms' transforms of pixel values, as torchvision's:
-- Normalize, ConvertImageDtype, ToDtype, Grayscale, ColorJitter,
-- GaussianBlur and RandomErasing. They take a floating-point image [C, H, W]
-- (values in [0, 1] for the color ones) or a batch [N, C, H, W];
-- ConvertImageDtype and ToDtype also int64 images (8-bit values: ember has no
-- uint8). A random one draws once per call, from its `generator` (an
-- ember.Generator) or ember's default generator, as torchvision: a batch
-- gets the same factors, blur or erased block for all its images
-- (`transforms.PerSample(t)` draws for each image).
--
--   local T = require "ember.data.transforms"
--   local t = T.Normalize({0.5, 0.5, 0.5}, {0.25, 0.25, 0.25})
--   print(t(ember.full({3, 2, 2}, 1)):max():item())   --> 2.0
-- @module data.transforms.color
local U = require "ember.data._transforms_util"
local TF = require "ember.data.transforms_functional"
local raise = U.raise
local py = U.py

local M = {}

-- ---- Normalize -----------------------------------------------------------

local Normalize = U.class("Normalize")
M.Normalize = Normalize

--- Normalize(mean, std [, inplace=false]): (x - mean) / std per channel
-- (dim -3), mean and std a number or a list of one per channel. The
-- image must be floating-point with as many channels as the lists.
-- @usage local T = require "ember.data.transforms"
-- print(T.Normalize({0.5}, {0.5})(ember.ones(1, 2, 2)):sum():item())   --> 4.0
function Normalize.new(...)
  local who = "Normalize"
  local o = U.args(who, { "mean", "std", "inplace" }, nil, ...)
  for _, k in ipairs { "mean", "std" } do
    local v = o[k]
    local ok = type(v) == "number"
    if type(v) == "table" and not U.is_tensor(v) and #v > 0 then
      ok = true
      for _, x in ipairs(v) do ok = ok and type(x) == "number" end
    end
    if not ok then raise("%s: %s must be a number or a list of numbers (one per channel), got %s", who, k,
      type(v) == "table" and py(v, "[]") or tostring(v)) end
  end
  if o.inplace ~= nil and type(o.inplace) ~= "boolean" then
    raise("%s: inplace must be a boolean, got %s", who, type(o.inplace))
  end
  return setmetatable({ mean = o.mean, std = o.std, inplace = o.inplace or false }, Normalize)
end

--- The normalized image (the same tensor, changed, with inplace).
function Normalize:forward(img) return TF._normalize("Normalize", img, self.mean, self.std, self.inplace) end

function Normalize:_repr()
  return ("Normalize(mean=%s, std=%s)"):format(py(self.mean, "[]"), py(self.std, "[]"))
end

-- ---- dtypes --------------------------------------------------------------

local ToDtype = U.class("ToDtype")
M.ToDtype = ToDtype

local function dtype_of(who, d)
  local info = type(d) == "string" and require("ember.core").dtype_info(d)
  if not info then raise("%s: dtype must be a dtype name (\"float32\", \"bfloat16\", \"int64\", ...), got %s", who,
    tostring(d)) end
  return info.name
end

--- ToDtype(dtype [, scale=false]): the image in dtype, as torchvision's
-- v2.ToDtype; with scale, values go between [0, 1] (floating) and 0..255
-- (int64, ember's stand-in for uint8) as ConvertImageDtype.
-- @usage local T = require "ember.data.transforms"
-- print(T.ToDtype("float32", {scale = true})(ember.tensor({255}, {dtype = "int64"})):item())   --> 1.0
function ToDtype.new(...)
  local who = "ToDtype"
  local o = U.args(who, { "dtype", "scale" }, nil, ...)
  if o.scale ~= nil and type(o.scale) ~= "boolean" then raise("%s: scale must be a boolean, got %s", who, type(o.scale)) end
  return setmetatable({ dtype = dtype_of(who, o.dtype), scale = o.scale or false }, ToDtype)
end

--- The image converted.
function ToDtype:forward(img)
  if not U.is_tensor(img) then raise("%s: expected an image tensor, got %s", self.name, type(img)) end
  return TF._to_dtype(self.name, img, self.dtype, self.scale)
end

function ToDtype:_repr() return ("ToDtype(dtype=%s, scale=%s)"):format(self.dtype, py(self.scale)) end

local ConvertImageDtype = U.class("ConvertImageDtype")
M.ConvertImageDtype = ConvertImageDtype

--- ConvertImageDtype(dtype): the image in dtype with its values scaled,
-- as torchvision's: int64 (8-bit values) -> floating divides by 255,
-- floating -> int64 is floor(x * 255.999); floating -> floating only casts.
-- @usage local T = require "ember.data.transforms"
-- print(T.ConvertImageDtype("int64")(ember.tensor({0.5, 1})):totable()[2])   --> 255
function ConvertImageDtype.new(dtype)
  return setmetatable({ dtype = dtype_of("ConvertImageDtype", dtype), scale = true }, ConvertImageDtype)
end

--- The image converted.
function ConvertImageDtype:forward(img) return ToDtype.forward(self, img) end

function ConvertImageDtype:_repr() return ("ConvertImageDtype(dtype=%s)"):format(self.dtype) end

-- ---- Grayscale -----------------------------------------------------------

local Grayscale = U.class("Grayscale")
M.Grayscale = Grayscale

--- Grayscale([num_output_channels=1]): the luma 0.2989 R + 0.587 G +
-- 0.114 B of an RGB image, in 1 or 3 channels.
function Grayscale.new(...)
  local o = U.args("Grayscale", { "num_output_channels" }, nil, ...)
  local n = o.num_output_channels or 1
  if n ~= 1 and n ~= 3 then raise("Grayscale: num_output_channels must be 1 or 3, got %s", tostring(n)) end
  return setmetatable({ num_output_channels = n }, Grayscale)
end

--- The gray image.
function Grayscale:forward(img)
  local c = U.float_image("Grayscale", img)
  if c ~= 3 then raise("Grayscale: expects an RGB image with 3 channels in dim -3, got shape %s", U.shape_str(img)) end
  return TF.rgb_to_grayscale(img, self.num_output_channels)
end

function Grayscale:_repr() return ("Grayscale(num_output_channels=%d)"):format(self.num_output_channels) end

-- ---- ColorJitter ---------------------------------------------------------

local ColorJitter = U.class("ColorJitter")
M.ColorJitter = ColorJitter

-- torchvision's _check_input: a number v is [center - v, center + v]
-- (clipped at 0 but for hue), a pair is checked against bound; the
-- interval {center, center} is nil (nothing drawn).
local function jitter_range(who, name, v, center, lo, hi, clip)
  if v == nil then v = 0 end
  local r
  if type(v) == "number" then
    if v < 0 then raise("%s: %s, a single number, must be >= 0, got %s", who, name, U.num(v)) end
    r = { center - v, center + v }
    if clip then r[1] = math.max(r[1], 0.0) end
  elseif type(v) == "table" and not U.is_tensor(v) and #v == 2 and type(v[1]) == "number" and type(v[2]) == "number" then
    r = { v[1], v[2] }
  else
    raise("%s: %s must be a number or a pair {min, max}, got %s", who, name, type(v) == "table" and py(v) or tostring(v))
  end
  if not (lo <= r[1] and r[1] <= r[2] and r[2] <= hi) then
    raise("%s: %s must lie in [%s, %s] with min <= max, got {%s, %s}", who, name, U.num(lo), hi == math.huge and "inf"
      or U.num(hi), U.num(r[1]), U.num(r[2]))
  end
  if r[1] == center and r[2] == center then return nil end
  return r
end

--- ColorJitter([brightness=0] [, contrast=0] [, saturation=0] [, hue=0]
-- [, {generator = g}]): random changes of brightness, contrast, saturation
-- and hue, as torchvision's. brightness, contrast and saturation: a number
-- v (the factor is uniform in [max(0, 1 - v), 1 + v]) or a pair {min, max};
-- hue: v in [0, 0.5] (the shift is uniform in [-v, v]) or a pair within
-- [-0.5, 0.5]. Each call draws a random order of the four (randperm) and
-- then the factors (brightness, contrast, saturation, hue, each only when
-- set), and applies them in that order (`functional.adjust_*`).
-- @usage local T = require "ember.data.transforms"
-- local t = T.ColorJitter{brightness = 0.4, contrast = 0.4, saturation = 0.4, hue = 0.1}
-- print(t(ember.rand(3, 8, 8)).shape)   --> ember.Size{3, 8, 8}
function ColorJitter.new(...)
  local who = "ColorJitter"
  local o = U.args(who, { "brightness", "contrast", "saturation", "hue" }, { "generator" }, ...)
  return setmetatable({
    brightness = jitter_range(who, "brightness", o.brightness, 1, 0, math.huge, true),
    contrast = jitter_range(who, "contrast", o.contrast, 1, 0, math.huge, true),
    saturation = jitter_range(who, "saturation", o.saturation, 1, 0, math.huge, true),
    hue = jitter_range(who, "hue", o.hue, 0, -0.5, 0.5, false),
    generator = o.generator }, ColorJitter)
end

--- One draw of torchvision's get_params: the order (a list of 1..4:
-- brightness, contrast, saturation, hue) and the four factors (nil where
-- that part is not set).
function ColorJitter.get_params(brightness, contrast, saturation, hue, generator)
  local order = U.randperm(generator, 4)
  local function draw(r) return r and U.uniform(generator, r[1], r[2]) or nil end
  local b = draw(brightness)
  local c = draw(contrast)
  local s = draw(saturation)
  local h = draw(hue)
  return order, b, c, s, h
end

--- The image with one draw of the changes.
function ColorJitter:forward(img)
  local who = "ColorJitter"
  U.float_image(who, img)
  local order, b, c, s, h = ColorJitter.get_params(self.brightness, self.contrast, self.saturation, self.hue,
    self.generator)
  for _, k in ipairs(order) do
    if k == 1 and b then img = TF._brightness(who, img, b)
    elseif k == 2 and c then img = TF._contrast(who, img, c)
    elseif k == 3 and s then img = TF._saturation(who, img, s)
    elseif k == 4 and h then img = TF._hue(who, img, h) end
  end
  return img
end

function ColorJitter:_repr()
  return ("ColorJitter(brightness=%s, contrast=%s, saturation=%s, hue=%s)"):format(py(self.brightness, "[]"),
    py(self.contrast, "[]"), py(self.saturation, "[]"), py(self.hue, "[]"))
end

-- ---- GaussianBlur --------------------------------------------------------

local GaussianBlur = U.class("GaussianBlur")
M.GaussianBlur = GaussianBlur

--- GaussianBlur(kernel_size [, sigma={0.1, 2}] [, {generator = g}]): a
-- Gaussian blur (a depthwise conv2d, reflect padding) whose sigma is drawn
-- uniform in sigma = {min, max} each call (a number: fixed), the same
-- for x and y, as torchvision's. kernel_size: an odd integer or {kx, ky}.
-- @usage local T = require "ember.data.transforms"
-- print(T.GaussianBlur(3, 1.0)(ember.ones(1, 5, 5)):mean():item())   --> 1.0
function GaussianBlur.new(...)
  local who = "GaussianBlur"
  local o = U.args(who, { "kernel_size", "sigma" }, { "generator" }, ...)
  local k = TF._kernel_size(who, o.kernel_size)
  local sigma = o.sigma or { 0.1, 2.0 }
  if type(sigma) == "number" then
    if not (sigma > 0) then raise("%s: sigma, a single number, must be > 0, got %s", who, U.num(sigma)) end
    sigma = { sigma, sigma }
  else
    sigma = U.pair(who, "sigma", sigma)
    if not (sigma[1] > 0) then raise("%s: sigma must be > 0, got %s", who, py(sigma)) end
  end
  return setmetatable({ kernel_size = k, sigma = sigma, generator = o.generator }, GaussianBlur)
end

--- The blurred image.
function GaussianBlur:forward(img)
  U.float_image("GaussianBlur", img)
  local s = U.uniform(self.generator, self.sigma[1], self.sigma[2])
  return TF._gaussian_blur("GaussianBlur", img, self.kernel_size, { s, s })
end

function GaussianBlur:_repr()
  return ("GaussianBlur(kernel_size=%s, sigma=%s)"):format(py(self.kernel_size), py(self.sigma))
end

-- ---- RandomErasing -------------------------------------------------------

local RandomErasing = U.class("RandomErasing")
M.RandomErasing = RandomErasing

--- RandomErasing([p=0.5] [, scale={0.02, 0.33}] [, ratio={0.3, 3.3}]
-- [, value=0] [, inplace=false] [, {generator = g}]): with probability p,
-- a random block of the image set to value (a number, one per channel, or
-- "random": normal draws), as torchvision's: up to 10 tries draw an area
-- (a fraction uniform in scale) and an aspect ratio (log-uniform in ratio),
-- h = round(sqrt(area * ratio)), w = round(sqrt(area / ratio)); the first
-- smaller than the image gets a uniform place; when none is, the image is
-- left as it is. A batch gets one block for all its images.
-- @usage local T = require "ember.data.transforms"
-- local t = T.RandomErasing{p = 1, scale = {0.25, 0.25}, ratio = {1, 1}}
-- print(t(ember.ones(1, 8, 8)):sum():item())   --> 48.0
function RandomErasing.new(...)
  local who = "RandomErasing"
  local o = U.args(who, { "p", "scale", "ratio", "value", "inplace" }, { "generator" }, ...)
  local scale = U.pair(who, "scale", o.scale or { 0.02, 0.33 })
  if scale[1] < 0 or scale[2] > 1 then raise("%s: scale must lie between 0 and 1, got %s", who, py(scale)) end
  local ratio = U.pair(who, "ratio", o.ratio or { 0.3, 3.3 })
  if ratio[1] <= 0 then raise("%s: ratio must be > 0, got %s", who, py(ratio)) end
  local value = o.value == nil and 0 or o.value
  if type(value) == "string" then
    if value ~= "random" then raise("%s: value, a string, must be \"random\", got %q", who, value) end
  elseif type(value) == "table" and not U.is_tensor(value) then
    for _, v in ipairs(value) do
      if type(v) ~= "number" then raise("%s: value must be numbers, got %s", who, py(value)) end
    end
    if #value == 0 then raise("%s: value must be a number, a list of one per channel, or \"random\", got {}", who) end
  elseif type(value) ~= "number" then
    raise("%s: value must be a number, a list of one per channel, or \"random\", got %s", who, type(value))
  end
  if o.inplace ~= nil and type(o.inplace) ~= "boolean" then
    raise("%s: inplace must be a boolean, got %s", who, type(o.inplace))
  end
  return setmetatable({ p = U.prob(who, o.p, 0.5), scale = scale, ratio = ratio, value = value,
    inplace = o.inplace or false, generator = o.generator }, RandomErasing)
end

--- torchvision's get_params: the block top, left (1-based), h, w and its
-- values v (a tensor [C or 1, 1, 1], or [C, h, w] for "random"), or nil
-- when no try fits. value: a list of numbers or nil ("random").
function RandomErasing.get_params(img, scale, ratio, value, generator)
  local c, H, W = U.image("RandomErasing", img, 3)
  local area = H * W
  local lr1 = string.unpack("f", string.pack("f", math.log(ratio[1])))
  local lr2 = string.unpack("f", string.pack("f", math.log(ratio[2])))
  for _ = 1, 10 do
    local erase_area = area * U.uniform(generator, scale[1], scale[2])
    local aspect = string.unpack("f", string.pack("f", math.exp(U.uniform(generator, lr1, lr2))))
    local h = U.round(math.sqrt(erase_area * aspect))
    local w = U.round(math.sqrt(erase_area / aspect))
    if h < H and w < W then
      local v
      if value == nil then
        v = U.randn(generator, { c, h, w })
      else
        v = U.ember().tensor(value, { dtype = "float64" }):view(#value, 1, 1)
      end
      local i = U.randint(generator, 0, H - h + 1)
      local j = U.randint(generator, 0, W - w + 1)
      return i + 1, j + 1, h, w, v
    end
  end
  return nil
end

--- The image with (probability p) a block erased.
function RandomErasing:forward(img)
  local who = "RandomErasing"
  local c = select(1, U.image(who, img, 3))
  if U.rand(self.generator) < self.p then
    local value = self.value
    if type(value) == "number" then value = { value } elseif value == "random" then value = nil end
    if value and #value ~= 1 and #value ~= c then
      raise("%s: value has %d numbers, but the image has %d channels (give 1 or %d)", who, #value, c, c)
    end
    local i, j, h, w, v = RandomErasing.get_params(img, self.scale, self.ratio, value, self.generator)
    if i then return TF.erase(img, i, j, h, w, v, self.inplace) end
  end
  return img
end

function RandomErasing:_repr()
  return ("RandomErasing(p=%s, scale=%s, ratio=%s, value=%s, inplace=%s)"):format(U.num(self.p), py(self.scale),
    py(self.ratio), type(self.value) == "string" and self.value or py(self.value), py(self.inplace))
end

return M
