--- ember.data.transforms' geometric transforms, as torchvision's: Resize,
-- CenterCrop, Pad, RandomCrop, RandomHorizontalFlip, RandomVerticalFlip and
-- RandomResizedCrop. Each takes an image [C, H, W] (or [H, W]) or a batch
-- [N, C, H, W], of any dtype (Resize: floating, or int64 holding 8-bit
-- values). A random one draws once per call, from its `generator` (an
-- ember.Generator) or ember's default generator, as torchvision draws
-- from torch's: a batch gets one draw, the same crop or flip for all its
-- images (`transforms.PerSample(t)` draws for each image).
--
--   local T = require "ember.data.transforms"
--   local t = T.RandomCrop(28, {padding = 2, generator = ember.Generator():manual_seed(1)})
--   print(t(ember.rand(1, 28, 28)).shape)   --> ember.Size{1, 28, 28}
-- @module data.transforms.geometry
local U = require "ember.data._transforms_util"
local TF = require "ember.data.transforms_functional"
local raise = U.raise
local py = U.py

local M = {}

local function interpolation_of(who, v)
  if v == nil then return "bilinear" end
  if v ~= "bilinear" and v ~= "nearest" and v ~= "nearest-exact" and v ~= "bicubic" then
    raise("%s: interpolation must be \"bilinear\", \"nearest\", \"nearest-exact\" or \"bicubic\", got %s", who,
      tostring(v))
  end
  return v
end

local function antialias_of(who, v)
  if v == nil then return true end
  if type(v) ~= "boolean" then raise("%s: antialias must be a boolean, got %s", who, type(v)) end
  return v
end

-- ---- Resize --------------------------------------------------------------

local Resize = U.class("Resize")
M.Resize = Resize

--- Resize(size [, interpolation="bilinear"] [, max_size] [, antialias=true]):
-- resizes to size ({h, w}, or an integer for the smaller edge, the other
-- keeping the aspect ratio) through nn.functional.interpolate
-- (`functional.resize` says the rule). antialias (bilinear and bicubic) is
-- torchvision >= 0.17's default; 0.14 had false for tensors.
-- @usage local T = require "ember.data.transforms"
-- print(T.Resize(16)(ember.rand(3, 32, 64)).shape)   --> ember.Size{3, 16, 32}
function Resize.new(...)
  local who = "Resize"
  local o = U.args(who, { "size", "interpolation", "max_size", "antialias" }, nil, ...)
  if o.size == nil then raise("%s: size is required (an integer for the smaller edge, or {h, w})", who) end
  local self = setmetatable({ size = o.size, interpolation = interpolation_of(who, o.interpolation),
    max_size = o.max_size, antialias = antialias_of(who, o.antialias) }, Resize)
  TF._resize(who, U.ember().zeros(1, 1, 1), self.size, self.interpolation, self.max_size, self.antialias) -- checks size
  return self
end

--- The image (or batch) resized.
function Resize:forward(img)
  return TF._resize("Resize", img, self.size, self.interpolation, self.max_size, self.antialias)
end

function Resize:_repr()
  return ("Resize(size=%s, interpolation=%s, max_size=%s, antialias=%s)"):format(py(self.size, "[]"),
    self.interpolation, py(self.max_size), py(self.antialias))
end

-- ---- CenterCrop ----------------------------------------------------------

local CenterCrop = U.class("CenterCrop")
M.CenterCrop = CenterCrop

--- CenterCrop(size): the central crop of size (an integer or {h, w}); an
-- image smaller than that is padded with zeros first, as torchvision's.
-- @usage local T = require "ember.data.transforms"
-- print(T.CenterCrop(2)(ember.arange(16):view(1, 4, 4)):totable()[1][1][1])   --> 5.0
function CenterCrop.new(...)
  local o = U.args("CenterCrop", { "size" }, nil, ...)
  return setmetatable({ size = U.size2("CenterCrop", "size", o.size) }, CenterCrop)
end

--- The central crop.
function CenterCrop:forward(img) return TF._center_crop("CenterCrop", img, self.size) end

function CenterCrop:_repr() return ("CenterCrop(size=%s)"):format(py(self.size)) end

-- ---- Pad -----------------------------------------------------------------

local Pad = U.class("Pad")
M.Pad = Pad

local function check_fill(who, fill)
  if fill == nil then return 0 end
  if type(fill) == "number" then return fill end
  if type(fill) == "table" and not U.is_tensor(fill) and #fill > 0 then
    for _, v in ipairs(fill) do
      if type(v) ~= "number" then raise("%s: fill must be numbers, got %s", who, py(fill)) end
    end
    return fill
  end
  raise("%s: fill must be a number or a list of numbers (one per channel), got %s", who, type(fill))
end

local function check_mode(who, mode)
  mode = mode or "constant"
  if not TF._PAD_MODES[mode] then
    raise("%s: padding_mode must be \"constant\", \"edge\", \"reflect\", \"symmetric\" or \"circular\" "
      .. "(\"replicate\" is edge), got %s", who, tostring(mode))
  end
  return mode
end

--- Pad(padding [, fill=0] [, padding_mode="constant"]): pads each side
-- (`functional.pad`): padding n, {left/right, top/bottom} or {left, top,
-- right, bottom}; padding_mode "constant" (fill: a number or one per
-- channel), "edge" (= "replicate"), "reflect", "symmetric" or "circular".
-- @usage local T = require "ember.data.transforms"
-- print(T.Pad({1, 2}, {padding_mode = "reflect"})(ember.rand(3, 8, 8)).shape)   --> ember.Size{3, 12, 10}
function Pad.new(...)
  local who = "Pad"
  local o = U.args(who, { "padding", "fill", "padding_mode" }, nil, ...)
  if o.padding == nil then raise("%s: padding is required", who) end
  return setmetatable({ padding = o.padding, ltrb = TF._ltrb(who, o.padding), fill = check_fill(who, o.fill),
    padding_mode = check_mode(who, o.padding_mode) }, Pad)
end

--- The padded image.
function Pad:forward(img) return TF._pad("Pad", img, self.ltrb, self.fill, self.padding_mode) end

function Pad:_repr()
  return ("Pad(padding=%s, fill=%s, padding_mode=%s)"):format(py(self.padding), py(self.fill), self.padding_mode)
end

-- ---- RandomCrop ----------------------------------------------------------

local RandomCrop = U.class("RandomCrop")
M.RandomCrop = RandomCrop

--- RandomCrop(size [, padding] [, pad_if_needed=false] [, fill=0]
-- [, padding_mode="constant"] [, {generator = g}]): a crop of size at a
-- random place, as torchvision's: the image is first padded by padding
-- (as Pad), then, with pad_if_needed, padded on both sides by what it
-- lacks of size (torchvision's rule: a width w < size[2] gets size[2] - w
-- on the left and on the right); top and left are drawn uniformly over the
-- places that fit (torch.randint each). A crop larger than the (padded)
-- image is an error.
-- @usage local T = require "ember.data.transforms"
-- local t = T.RandomCrop(32, {padding = 4, padding_mode = "reflect"})
-- print(t(ember.rand(3, 32, 32)).shape)   --> ember.Size{3, 32, 32}
function RandomCrop.new(...)
  local who = "RandomCrop"
  local o = U.args(who, { "size", "padding", "pad_if_needed", "fill", "padding_mode" }, { "generator" }, ...)
  if o.pad_if_needed ~= nil and type(o.pad_if_needed) ~= "boolean" then
    raise("%s: pad_if_needed must be a boolean, got %s", who, type(o.pad_if_needed))
  end
  return setmetatable({ size = U.size2(who, "size", o.size), padding = o.padding,
    ltrb = o.padding ~= nil and TF._ltrb(who, o.padding) or nil, pad_if_needed = o.pad_if_needed or false,
    fill = check_fill(who, o.fill), padding_mode = check_mode(who, o.padding_mode), generator = o.generator },
    RandomCrop)
end

--- The place of a random crop of output_size {h, w} in img: top, left
-- (1-based), h, w, drawn from generator (or the default generator).
function RandomCrop.get_params(img, output_size, generator)
  local who = "RandomCrop"
  local _, h, w = U.image(who, img)
  local th, tw = output_size[1], output_size[2]
  if h < th or w < tw then
    raise("%s: the crop %d x %d is larger than the image %d x %d (H x W%s); give padding or pad_if_needed = true",
      who, th, tw, h, w, img.ndim > 2 and ", after any padding" or "")
  end
  if h == th and w == tw then return 1, 1, h, w end
  local i = U.randint(generator, 0, h - th + 1)
  local j = U.randint(generator, 0, w - tw + 1)
  return i + 1, j + 1, th, tw
end

--- One random crop of img (a batch: the same crop for every image).
function RandomCrop:forward(img)
  local who = "RandomCrop"
  if self.ltrb then img = TF._pad(who, img, self.ltrb, self.fill, self.padding_mode) end
  local _, h, w = U.image(who, img)
  if self.pad_if_needed and w < self.size[2] then
    local d = self.size[2] - w
    img = TF._pad(who, img, { d, d, 0, 0 }, self.fill, self.padding_mode)
  end
  if self.pad_if_needed and h < self.size[1] then
    local d = self.size[1] - h
    img = TF._pad(who, img, { 0, 0, d, d }, self.fill, self.padding_mode)
  end
  local i, j, th, tw = RandomCrop.get_params(img, self.size, self.generator)
  return img:narrow(img.ndim - 1, i, th):narrow(img.ndim, j, tw)
end

function RandomCrop:_repr()
  return ("RandomCrop(size=%s, padding=%s)"):format(py(self.size), py(self.padding))
end

-- ---- flips ---------------------------------------------------------------

local function flip_new(c, ...)
  local o = U.args(c.name, { "p" }, { "generator" }, ...)
  return setmetatable({ p = U.prob(c.name, o.p, 0.5), generator = o.generator }, c)
end

local function flip_forward(self, img, fn)
  U.image(self.name, img)
  if U.rand(self.generator) < self.p then return fn(img) end
  return img
end

local function flip_repr(self) return ("%s(p=%s)"):format(self.name, U.num(self.p)) end

local RandomHorizontalFlip = U.class("RandomHorizontalFlip")
M.RandomHorizontalFlip = RandomHorizontalFlip
RandomHorizontalFlip._repr = flip_repr

--- RandomHorizontalFlip([p=0.5] [, {generator = g}]): mirrors the image
-- left to right with probability p (one draw, torch.rand(1) < p; a batch
-- is flipped whole or not at all).
-- @usage local T = require "ember.data.transforms"
-- print(T.RandomHorizontalFlip(1)(ember.tensor({{{1, 2, 3}}})):totable()[1][1][1])   --> 3.0
function RandomHorizontalFlip.new(...) return flip_new(RandomHorizontalFlip, ...) end

--- The image mirrored, or as it is.
function RandomHorizontalFlip:forward(img) return flip_forward(self, img, TF.hflip) end

local RandomVerticalFlip = U.class("RandomVerticalFlip")
M.RandomVerticalFlip = RandomVerticalFlip
RandomVerticalFlip._repr = flip_repr

--- RandomVerticalFlip([p=0.5] [, {generator = g}]): turns the image upside
-- down with probability p (one draw per call).
function RandomVerticalFlip.new(...) return flip_new(RandomVerticalFlip, ...) end

--- The image upside down, or as it is.
function RandomVerticalFlip:forward(img) return flip_forward(self, img, TF.vflip) end

-- ---- RandomResizedCrop ---------------------------------------------------

local RandomResizedCrop = U.class("RandomResizedCrop")
M.RandomResizedCrop = RandomResizedCrop

--- RandomResizedCrop(size [, scale={0.08, 1}] [, ratio={3/4, 4/3}]
-- [, interpolation="bilinear"] [, antialias=true] [, {generator = g}]):
-- a random part of the image resized to size, as torchvision's: up to 10
-- tries draw an area (a fraction uniform in scale of the image's) and an
-- aspect ratio w/h (log-uniform in ratio), w = round(sqrt(area * ratio)),
-- h = round(sqrt(area / ratio)) (Python's round); the first that fits
-- gets a uniform place. When none fits, the central crop of the whole
-- image clamped to the ratio range. A batch gets one crop for all images.
-- @usage local T = require "ember.data.transforms"
-- local t = T.RandomResizedCrop(24, {scale = {0.5, 1}, generator = ember.Generator():manual_seed(0)})
-- print(t(ember.rand(3, 32, 32)).shape)   --> ember.Size{3, 24, 24}
function RandomResizedCrop.new(...)
  local who = "RandomResizedCrop"
  local o = U.args(who, { "size", "scale", "ratio", "interpolation", "antialias" }, { "generator" }, ...)
  local scale = U.pair(who, "scale", o.scale or { 0.08, 1.0 }, 0)
  local ratio = U.pair(who, "ratio", o.ratio or { 3 / 4, 4 / 3 })
  if ratio[1] <= 0 then raise("%s: ratio must be > 0, got %s", who, py(ratio)) end
  return setmetatable({ size = U.size2(who, "size", o.size), scale = scale, ratio = ratio,
    interpolation = interpolation_of(who, o.interpolation), antialias = antialias_of(who, o.antialias),
    generator = o.generator }, RandomResizedCrop)
end

--- The crop torchvision's rule draws for img: top, left (1-based), h, w.
-- scale and ratio: {min, max}; generator optional.
function RandomResizedCrop.get_params(img, scale, ratio, generator)
  local _, height, width = U.image("RandomResizedCrop", img)
  local area = height * width
  local lr1, lr2 = math.log(ratio[1]), math.log(ratio[2])
  -- torch.log(torch.tensor(ratio)) is float32
  lr1, lr2 = string.unpack("f", string.pack("f", lr1)), string.unpack("f", string.pack("f", lr2))
  for _ = 1, 10 do
    local target = area * U.uniform(generator, scale[1], scale[2])
    local aspect = math.exp(U.uniform(generator, lr1, lr2))
    aspect = string.unpack("f", string.pack("f", aspect)) -- torch.exp of a float32 tensor
    local w = U.round(math.sqrt(target * aspect))
    local h = U.round(math.sqrt(target / aspect))
    if w > 0 and w <= width and h > 0 and h <= height then
      local i = U.randint(generator, 0, height - h + 1)
      local j = U.randint(generator, 0, width - w + 1)
      return i + 1, j + 1, h, w
    end
  end
  local in_ratio = width / height
  local w, h
  if in_ratio < math.min(ratio[1], ratio[2]) then
    w = width
    h = U.round(w / math.min(ratio[1], ratio[2]))
  elseif in_ratio > math.max(ratio[1], ratio[2]) then
    h = height
    w = U.round(h * math.max(ratio[1], ratio[2]))
  else
    w, h = width, height
  end
  return (height - h) // 2 + 1, (width - w) // 2 + 1, h, w
end

--- One random resized crop of img.
function RandomResizedCrop:forward(img)
  local who = "RandomResizedCrop"
  local i, j, h, w = RandomResizedCrop.get_params(img, self.scale, self.ratio, self.generator)
  return TF._resize(who, TF._crop(who, img, i, j, h, w), self.size, self.interpolation, nil, self.antialias)
end

local function round4(v) return U.num(tonumber(("%.4f"):format(v)) + 0.0) end

function RandomResizedCrop:_repr()
  return ("RandomResizedCrop(size=%s, scale=(%s, %s), ratio=(%s, %s), interpolation=%s, antialias=%s)"):format(
    py(self.size), round4(self.scale[1]), round4(self.scale[2]), round4(self.ratio[1]), round4(self.ratio[2]),
    self.interpolation, py(self.antialias))
end

return M
