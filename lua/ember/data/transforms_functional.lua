--- ember.data.transforms.functional: the operations behind the image
-- transforms, as torchvision.transforms.functional on tensors (torchvision
-- 0.14, the one of PyTorch 1.13): each takes an image [C, H, W] (the
-- geometric ones also [H, W]) or a batch [N, C, H, W] and returns a new
-- tensor (the inplace options excepted). Positions are 1-based, as
-- everywhere in ember: `crop(img, 1, 1, h, w)` is the top-left h x w block
-- (torchvision's `crop(img, 0, 0, h, w)`).
--
--   local TF = require("ember.data.transforms").functional
--   local img = ember.rand(3, 32, 32)
--   print(TF.center_crop(TF.pad(img, 4, 0, "reflect"), 32).shape)   --> ember.Size{3, 32, 32}
--
-- Integer images: ember has no uint8, so an int64 image holds 8-bit
-- values (0..255); resize rounds them back, and convert_image_dtype scales
-- by 255. The color operations take floating-point images (values in [0, 1]).
-- @module data.transforms.functional
local U = require "ember.data._transforms_util"
local raise = U.raise

local F = {}

local function ember() return U.ember() end
local function NF() return require "ember.nn.functional" end

-- ---- geometry -------------------------------------------------------------

--- The image mirrored left to right (the last dim reversed).
function F.hflip(img)
  U.image("transforms.functional.hflip", img)
  return img:flip(img.ndim)
end

--- The image upside down (dim -2 reversed).
function F.vflip(img)
  U.image("transforms.functional.vflip", img)
  return img:flip(img.ndim - 1)
end

-- The padding of torchvision's forms -- n (every side), {lr, tb} or {l, t,
-- r, b} -- as F.pad's {left, right, top, bottom}.
local function ltrb(who, padding)
  local p = padding
  if math.type(p) == "integer" then p = { p } end
  if type(p) ~= "table" or U.is_tensor(p) or not (#p == 1 or #p == 2 or #p == 4) then
    raise("%s: padding must be an integer or a list of 1, 2 or 4 integers (left/right and top/bottom, or left, "
      .. "top, right, bottom), got %s", who, type(padding) == "table" and U.py(padding) or tostring(padding))
  end
  for i = 1, #p do
    if math.type(p[i]) ~= "integer" or p[i] < 0 then
      raise("%s: padding must be integers >= 0, got %s", who, U.py(p))
    end
  end
  if #p == 1 then return { p[1], p[1], p[1], p[1] } end
  if #p == 2 then return { p[1], p[1], p[2], p[2] } end
  return { p[1], p[3], p[2], p[4] }
end
F._ltrb = ltrb

local MODES = { constant = "constant", edge = "replicate", replicate = "replicate", reflect = "reflect",
  circular = "circular", symmetric = "symmetric" }
F._PAD_MODES = MODES

-- The positions (1-based) that symmetric padding reads along a dim of n:
-- before a b + the edge repeated (torchvision's _pad_symmetric).
local function symmetric_index(n, before, after)
  local idx = {}
  for i = before, 1, -1 do idx[#idx + 1] = i end
  for i = 1, n do idx[#idx + 1] = i end
  for i = 1, after do idx[#idx + 1] = n + 1 - i end
  return ember().tensor(idx, { dtype = "int64" })
end

-- The padding of torchvision's pad, with who in the errors. p: {left,
-- right, top, bottom}.
function F._pad(who, img, p, fill, mode)
  local c, h, w = U.image(who, img)
  mode = mode or "constant"
  local m = MODES[mode]
  if not m then
    raise("%s: padding_mode must be \"constant\", \"edge\", \"reflect\", \"symmetric\" or \"circular\" "
      .. "(\"replicate\" is edge), got %s", who, tostring(mode))
  end
  fill = fill or 0
  if p[1] == 0 and p[2] == 0 and p[3] == 0 and p[4] == 0 then return img end
  if m == "symmetric" then
    if p[1] > w or p[2] > w or p[3] > h or p[4] > h then
      raise("%s: symmetric padding (%d, %d, %d, %d) must not exceed the image (H %d, W %d)", who, p[1], p[3], p[2],
        p[4], h, w)
    end
    return img:index_select(img.ndim - 1, symmetric_index(h, p[3], p[4]):to(img.device))
        :index_select(img.ndim, symmetric_index(w, p[1], p[2]):to(img.device))
  end
  if m == "reflect" and (p[1] >= w or p[2] >= w or p[3] >= h or p[4] >= h) then
    raise("%s: reflect padding (left %d, top %d, right %d, bottom %d) must be smaller than the image (H %d, W %d)",
      who, p[1], p[3], p[2], p[4], h, w)
  end
  if m == "circular" and (p[1] > w or p[2] > w or p[3] > h or p[4] > h) then
    raise("%s: circular padding (left %d, top %d, right %d, bottom %d) must not exceed the image (H %d, W %d)",
      who, p[1], p[3], p[2], p[4], h, w)
  end
  local x = img
  local squeeze = x.ndim == 2
  if squeeze then x = x:unsqueeze(1) end -- F.pad's non-constant modes want a channel dim
  local y
  if m ~= "constant" then -- fill is for constant padding only (torchvision ignores it)
    y = NF().pad(x, p, m)
  elseif type(fill) == "number" then
    y = NF().pad(x, p, { mode = "constant", value = fill })
  elseif type(fill) == "table" and not U.is_tensor(fill) then
    if #fill ~= 1 and #fill ~= c then
      raise("%s: fill has %d values, but the image has %d channels (give 1 or %d)", who, #fill, c, c)
    end
    for i = 1, #fill do
      if type(fill[i]) ~= "number" then raise("%s: fill must be numbers, got %s", who, U.py(fill)) end
    end
    -- zero padding, then each channel's value where the padding is
    y = NF().pad(x, p)
    local inside = NF().pad(ember().ones({ 1, h, w }, { dtype = y.dtype }):to(y.device), p)
    local shape = {}
    for i = 1, y.ndim do shape[i] = 1 end
    shape[y.ndim - 2] = #fill
    local values = ember().tensor(fill, { dtype = y:is_floating_point() and y.dtype or "float64" }):view(shape)
        :to(y.device)
    y = (y + (1 - inside) * values):to(y.dtype)
  else
    raise("%s: fill must be a number or a list of numbers (one per channel), got %s", who, type(fill))
  end
  if squeeze then y = y:squeeze(1) end
  return y
end

--- Pads the image on each side, as torchvision's pad.
-- @param img [C, H, W], [H, W] or [N, C, H, W]
-- @param padding n (every side), {left/right, top/bottom} or {left, top, right, bottom}
-- @param[opt=0] fill the value of constant padding: a number, or a list of one per channel
-- @param[opt="constant"] padding_mode "constant", "edge" (= "replicate"), "reflect" (the edge not
--   repeated), "symmetric" (the edge repeated) or "circular"
function F.pad(img, padding, fill, padding_mode)
  local who = "transforms.functional.pad"
  return F._pad(who, img, ltrb(who, padding), fill, padding_mode)
end

-- The block of h x w at (top, left) (1-based), padded with zeros where it
-- lies outside the image (torchvision's crop).
function F._crop(who, img, top, left, height, width)
  local _, h, w = U.image(who, img)
  for _, v in ipairs { top, left, height, width } do
    if math.type(v) ~= "integer" then raise("%s: top, left, height and width must be integers, got %s", who, tostring(v)) end
  end
  if height < 1 or width < 1 then raise("%s: height and width must be >= 1, got %d x %d", who, height, width) end
  local bottom, right = top + height - 1, left + width - 1
  if top < 1 or left < 1 or bottom > h or right > w then
    local p = { math.max(1 - left, 0), math.max(right - w, 0), math.max(1 - top, 0), math.max(bottom - h, 0) }
    img = F._pad(who, img, p, 0, "constant")
    top, left = top + p[3], left + p[1]
  end
  return img:narrow(img.ndim - 1, top, height):narrow(img.ndim, left, width)
end

--- The h x w block whose top-left pixel is (top, left), 1-based; where it
-- lies outside the image it is padded with zeros (torchvision's crop).
function F.crop(img, top, left, height, width)
  return F._crop("transforms.functional.crop", img, top, left, height, width)
end

function F._center_crop(who, img, size)
  local _, h, w = U.image(who, img)
  local ch, cw = size[1], size[2]
  if ch > h or cw > w then -- torchvision pads with zeros, then crops
    local p = { cw > w and (cw - w) // 2 or 0, cw > w and (cw - w + 1) // 2 or 0,
      ch > h and (ch - h) // 2 or 0, ch > h and (ch - h + 1) // 2 or 0 }
    img = F._pad(who, img, p, 0, "constant")
    h, w = h + p[3] + p[4], w + p[1] + p[2]
    if ch == h and cw == w then return img end
  end
  local top, left = U.round((h - ch) / 2), U.round((w - cw) / 2) -- Python's round, as torchvision
  return img:narrow(img.ndim - 1, top + 1, ch):narrow(img.ndim, left + 1, cw)
end

--- The central crop of size (an integer or {h, w}); an image smaller than
-- it is padded with zeros first (torchvision's center_crop).
function F.center_crop(img, size)
  local who = "transforms.functional.center_crop"
  return F._center_crop(who, img, U.size2(who, "size", size))
end

local INTERPOLATIONS = { nearest = true, ["nearest-exact"] = true, bilinear = true, bicubic = true }

-- torchvision's _compute_resized_output_size: size {h, w}, or {s} / s for
-- the smaller edge (then max_size caps the longer one).
local function output_size(who, h, w, size, max_size)
  if type(size) == "table" and #size == 2 then
    if max_size ~= nil then
      raise("%s: max_size goes only with a size that matches the smaller edge (an integer), got size %s", who,
        U.py(size))
    end
    return U.size2(who, "size", size)
  end
  local s = type(size) == "table" and size[1] or size
  if math.type(s) ~= "integer" or s < 1 or (type(size) == "table" and #size ~= 1) then
    raise("%s: size must be a positive integer (the smaller edge) or a list {h, w}, got %s", who,
      type(size) == "table" and U.py(size) or tostring(size))
  end
  local short, long = math.min(h, w), math.max(h, w)
  local new_short, new_long = s, math.floor(s * long / short)
  if max_size ~= nil then
    if math.type(max_size) ~= "integer" or max_size <= s then
      raise("%s: max_size must be an integer larger than the requested size %d, got %s", who, s, tostring(max_size))
    end
    if new_long > max_size then new_short, new_long = math.floor(max_size * new_short / new_long), max_size end
  end
  if w <= h then return { new_long, new_short } end
  return { new_short, new_long }
end

function F._resize(who, img, size, interpolation, max_size, antialias)
  local _, h, w = U.image(who, img)
  interpolation = interpolation or "bilinear"
  if not INTERPOLATIONS[interpolation] then
    raise("%s: interpolation must be \"bilinear\", \"nearest\", \"nearest-exact\" or \"bicubic\", got %s", who,
      tostring(interpolation))
  end
  if antialias == nil then antialias = true end
  if type(antialias) ~= "boolean" then raise("%s: antialias must be a boolean, got %s", who, type(antialias)) end
  local out = output_size(who, h, w, size, max_size)
  if out[1] == h and out[2] == w then return img end
  local shape = img.shape
  local x = img
  local lead = {}
  for i = 1, img.ndim - 2 do lead[i] = shape[i] end
  x = x:reshape(1, -1, h, w)
  local integer = not x:is_floating_point()
  if integer then x = x:to("float32") end
  local interp = interpolation == "bilinear" or interpolation == "bicubic"
  local y = NF().interpolate(x, { size = out, mode = interpolation, align_corners = interp and false or nil,
    antialias = interp and antialias or nil })
  if integer then
    if interp then y = y:round() end
    if interpolation == "bicubic" then y = y:clamp(0, 255) end
    y = y:to(img.dtype)
  end
  lead[#lead + 1], lead[#lead + 2] = out[1], out[2]
  return y:reshape(lead)
end

--- The image resized to size, through nn.functional.interpolate.
-- @param img [C, H, W], [H, W] or [N, C, H, W] (an int64 image is resized as float and rounded back)
-- @param size {h, w}, or an integer: the smaller edge becomes size, the other keeps the aspect ratio
--   (floor(size * long / short))
-- @param[opt="bilinear"] interpolation "bilinear", "nearest", "nearest-exact" or "bicubic"
-- @param[opt] max_size with an integer size: the longer edge is at most this
-- @param[opt=true] antialias for bilinear and bicubic when shrinking (torchvision >= 0.17's default, and
--   the same result as resizing a PIL image; torchvision 0.14 had false for tensors); ignored for nearest
function F.resize(img, size, interpolation, max_size, antialias)
  return F._resize("transforms.functional.resize", img, size, interpolation, max_size, antialias)
end

--- crop then resize (torchvision's resized_crop); top and left 1-based.
function F.resized_crop(img, top, left, height, width, size, interpolation, antialias)
  local who = "transforms.functional.resized_crop"
  return F._resize(who, F._crop(who, img, top, left, height, width), U.size2(who, "size", size), interpolation, nil,
    antialias)
end

-- ---- values --------------------------------------------------------------

-- A list of numbers (or one number) as a tensor [C, 1, 1] for an image of c
-- channels, in dtype.
local function per_channel(who, name, v, c, dtype, device)
  if type(v) == "number" then v = { v } end
  if U.is_tensor(v) then v = v:reshape(-1):totable() end
  if type(v) ~= "table" or #v == 0 then
    raise("%s: %s must be a number or a list of numbers (one per channel), got %s", who, name, type(v))
  end
  for i = 1, #v do
    if type(v[i]) ~= "number" then raise("%s: %s must be numbers, got %s", who, name, U.py(v)) end
  end
  if #v ~= 1 and #v ~= c then
    raise("%s: %s has %d values, but the image has %d channels (dim -3 of the input)", who, name, #v, c)
  end
  return ember().tensor(v, { dtype = dtype }):view(#v, 1, 1):to(device), v
end

function F._normalize(who, img, mean, std, inplace)
  local c = U.float_image(who, img)
  local m = per_channel(who, "mean", mean, c, img.dtype, img.device)
  local s, list = per_channel(who, "std", std, c, img.dtype, img.device)
  if s:eq(0):any():item() then -- torchvision's check, after the conversion to the image's dtype
    raise("%s: std %s has a 0 (in %s), which would divide by zero", who, U.py(list, "[]"), img.dtype)
  end
  if inplace then return img:sub_(m):div_(s) end
  return (img - m) / s
end

--- (img - mean) / std per channel (dim -3), as torchvision's normalize.
-- @param img a floating-point [C, H, W] or [N, C, H, W]
-- @param mean a number or a list of one per channel
-- @param std a number or a list of one per channel (none 0)
-- @param[opt=false] inplace change img itself
function F.normalize(img, mean, std, inplace)
  return F._normalize("transforms.functional.normalize", img, mean, std, inplace)
end

--- img with the h x w block at (i, j) (1-based) set to v (a number, or a
-- tensor that broadcasts to [C, h, w]), as torchvision's erase.
function F.erase(img, i, j, h, w, v, inplace)
  local who = "transforms.functional.erase"
  local _, H, W = U.image(who, img, 3)
  if math.type(i) ~= "integer" or math.type(j) ~= "integer" or math.type(h) ~= "integer" or math.type(w) ~= "integer"
      or i < 1 or j < 1 or h < 0 or w < 0 or i + h - 1 > H or j + w - 1 > W then
    raise("%s: the block at (%s, %s) of %s x %s must lie inside the image (%d x %d), 1-based", who, tostring(i),
      tostring(j), tostring(h), tostring(w), H, W)
  end
  if not inplace then img = img:clone() end
  if h == 0 or w == 0 then return img end
  local block = img:narrow(img.ndim - 1, i, h):narrow(img.ndim, j, w)
  if type(v) == "number" then v = ember().full({ 1 }, v, { dtype = img.dtype }) end
  block:copy_(v:to(img.dtype):to(img.device):expand(block.shape))
  return img
end

--- The dtype and value scaling of an image: floating <-> integer images
-- scale [0, 1] <-> 0..255 (ember's integer images hold 8-bit values in
-- int64), as torchvision's convert_image_dtype: float -> int is
-- `floor(x * 255.999)`, int -> float `x / 255`; float -> float only casts.
function F.convert_image_dtype(img, dtype)
  local who = "transforms.functional.convert_image_dtype"
  if not U.is_tensor(img) then raise("%s: expected an image tensor, got %s", who, type(img)) end
  return F._to_dtype(who, img, dtype, true)
end

function F._to_dtype(who, img, dtype, scale)
  local info = type(dtype) == "string" and require("ember.core").dtype_info(dtype)
  if not info then raise("%s: dtype must be a dtype name (\"float32\", \"bfloat16\", \"int64\", ...), got %s", who,
    tostring(dtype)) end
  dtype = info.name
  if img.dtype == dtype then return img end
  if dtype == "bool" or img.dtype == "bool" then
    raise("%s: converts between floating and integer images, not %s -> %s", who, img.dtype, dtype)
  end
  local to_float, from_float = info.floating, img:is_floating_point()
  if not scale or to_float == from_float then return img:to(dtype) end
  if to_float then return img:to(dtype) / 255 end
  return (img * (255 + 1 - 1e-3)):to(dtype) -- torchvision's eps: 1.0 -> 255, not 256
end

-- ---- color ------------------------------------------------------------------

-- torchvision's _blend: ratio * a + (1 - ratio) * b, clamped to [0, 1].
local function blend(a, b, ratio) return (a * ratio + b * (1 - ratio)):clamp(0, 1):to(a.dtype) end

function F._grayscale(img)
  local ch = img:unbind(img.ndim - 2)
  return (ch[1] * 0.2989 + ch[2] * 0.587 + ch[3] * 0.114):to(img.dtype):unsqueeze(img.ndim - 2)
end

--- The luma 0.2989 R + 0.587 G + 0.114 B of an RGB image ([3, H, W] or [N, 3, H, W]),
-- as num_output_channels (1 or 3) channels.
function F.rgb_to_grayscale(img, num_output_channels)
  local who = "transforms.functional.rgb_to_grayscale"
  local c = U.float_image(who, img)
  if c ~= 3 then raise("%s: expects an RGB image with 3 channels in dim -3, got shape %s", who, U.shape_str(img)) end
  num_output_channels = num_output_channels or 1
  if num_output_channels ~= 1 and num_output_channels ~= 3 then
    raise("%s: num_output_channels must be 1 or 3, got %s", who, tostring(num_output_channels))
  end
  local g = F._grayscale(img)
  if num_output_channels == 3 then
    local shape = g.shape
    shape[img.ndim - 2] = 3
    g = g:expand(shape):contiguous()
  end
  return g
end

local function check_factor(who, name, f)
  if type(f) ~= "number" or not (f >= 0) then raise("%s: %s must be a number >= 0, got %s", who, name, tostring(f)) end
end

function F._brightness(who, img, f)
  U.float_image(who, img)
  check_factor(who, "brightness_factor", f)
  return blend(img, ember().zeros_like(img), f)
end

function F._contrast(who, img, f)
  local c = U.float_image(who, img)
  check_factor(who, "contrast_factor", f)
  local n = img.ndim
  local mean = (c == 3 and F._grayscale(img) or img):mean({ n - 2, n - 1, n }, true)
  return blend(img, mean, f)
end

function F._saturation(who, img, f)
  local c = U.float_image(who, img)
  check_factor(who, "saturation_factor", f)
  if c == 1 then return img end
  if c ~= 3 then raise("%s: expects an RGB image (3 channels in dim -3) or a gray one (1), got shape %s", who,
    U.shape_str(img)) end
  return blend(img, F._grayscale(img), f)
end

-- torchvision's _rgb2hsv and _hsv2rgb, on dim -3.
local function rgb2hsv(img)
  local e = ember()
  local d = img.ndim - 2
  local ch = img:unbind(d)
  local r, g, b = ch[1], ch[2], ch[3]
  local maxc, minc = img:amax(d), img:amin(d)
  local eqc = maxc:eq(minc)
  local cr = maxc - minc
  local one = e.ones_like(maxc)
  local s = cr / e.where(eqc, one, maxc)
  local div = e.where(eqc, one, cr)
  local rc, gc, bc = (maxc - r) / div, (maxc - g) / div, (maxc - b) / div
  local is_r, is_g = maxc:eq(r), maxc:eq(g)
  local not_r = is_r:logical_not()
  local hr = is_r:to(img.dtype) * (bc - gc)
  local hg = is_g:logical_and(not_r):to(img.dtype) * (rc - bc + 2)
  local hb = is_g:logical_not():logical_and(not_r):to(img.dtype) * (gc - rc + 4)
  local h = e.fmod((hr + hg + hb) / 6 + 1, 1)
  return h, s, maxc
end

local function hsv2rgb(h, s, v, dim)
  local e = ember()
  local i = (h * 6):floor()
  local f = h * 6 - i
  local p = (v * (1 - s)):clamp(0, 1)
  local q = (v * (1 - s * f)):clamp(0, 1)
  local t = (v * (1 - s * (1 - f))):clamp(0, 1)
  i = e.remainder(i, 6)
  -- sector k (0..5) picks one of the six (r, g, b) triples
  local sel = {}
  for k = 0, 5 do sel[k] = i:eq(k):to(h.dtype) end
  local function pick(a) -- a: six tensors, one per sector
    local out = sel[0] * a[1]
    for k = 1, 5 do out = out + sel[k] * a[k + 1] end
    return out
  end
  return e.stack({ pick { v, q, p, p, t, v }, pick { t, v, v, q, p, p }, pick { p, p, t, v, v, q } }, dim)
end

function F._hue(who, img, f)
  local c = U.float_image(who, img)
  if type(f) ~= "number" or not (f >= -0.5 and f <= 0.5) then
    raise("%s: hue_factor must be a number in [-0.5, 0.5], got %s", who, tostring(f))
  end
  if c == 1 then return img end
  if c ~= 3 then raise("%s: expects an RGB image (3 channels in dim -3) or a gray one (1), got shape %s", who,
    U.shape_str(img)) end
  local h, s, v = rgb2hsv(img)
  h = ember().remainder(h + f, 1)
  return hsv2rgb(h, s, v, img.ndim - 2):to(img.dtype)
end

--- The image times brightness_factor (>= 0), clamped to [0, 1].
function F.adjust_brightness(img, brightness_factor)
  return F._brightness("transforms.functional.adjust_brightness", img, brightness_factor)
end

--- The image blended with the mean of its grayscale (per image of a batch) by contrast_factor (>= 0).
function F.adjust_contrast(img, contrast_factor)
  return F._contrast("transforms.functional.adjust_contrast", img, contrast_factor)
end

--- The image blended with its grayscale by saturation_factor (>= 0; 0 gray, 1 the image).
function F.adjust_saturation(img, saturation_factor)
  return F._saturation("transforms.functional.adjust_saturation", img, saturation_factor)
end

--- The hue turned by hue_factor (in [-0.5, 0.5], a fraction of the color circle), through HSV.
function F.adjust_hue(img, hue_factor)
  return F._hue("transforms.functional.adjust_hue", img, hue_factor)
end

-- torchvision's kernel: exp(-x^2 / (2 sigma^2)) over x = -(k-1)/2 .. (k-1)/2,
-- normalised, in float32.
local function gaussian_1d(k, sigma)
  local e = ember()
  local half = (k - 1) * 0.5
  local x = e.linspace(-half, half, k)
  local pdf = ((x / sigma) ^ 2 * -0.5):exp()
  return pdf / pdf:sum()
end

function F._gaussian_blur(who, img, kernel_size, sigma)
  local c, h, w = U.float_image(who, img)
  local kx, ky = kernel_size[1], kernel_size[2]
  if kx // 2 >= w or ky // 2 >= h then
    raise("%s: kernel_size (%d, %d) needs an image larger than half of it (reflect padding), got H %d, W %d", who, kx,
      ky, h, w)
  end
  local ky1 = gaussian_1d(ky, sigma[2]):to(img.dtype)
  local kx1 = gaussian_1d(kx, sigma[1]):to(img.dtype)
  local k2 = ky1:view(ky, 1):mm(kx1:view(1, kx)):to(img.device)
  local x = img.ndim == 3 and img:unsqueeze(1) or img:reshape(-1, c, h, w)
  x = NF().pad(x, { kx // 2, kx // 2, ky // 2, ky // 2 }, "reflect")
  local y = NF().conv2d(x, k2:expand(c, 1, ky, kx), nil, { groups = c })
  return y:reshape(img.shape)
end

--- The image blurred by a Gaussian (a depthwise convolution, reflect padding at the edges).
-- @param img a floating-point [C, H, W] or [N, C, H, W]
-- @param kernel_size an odd integer, or {kx, ky} (torchvision's order: width first)
-- @param[opt] sigma a number or {sx, sy}; by default 0.3 ((k - 1) / 2 - 1) + 0.8 per dim
function F.gaussian_blur(img, kernel_size, sigma)
  local who = "transforms.functional.gaussian_blur"
  local k = F._kernel_size(who, kernel_size)
  if sigma == nil then sigma = { 0.3 * ((k[1] - 1) * 0.5 - 1) + 0.8, 0.3 * ((k[2] - 1) * 0.5 - 1) + 0.8 } end
  if type(sigma) == "number" then sigma = { sigma, sigma } end
  if type(sigma) ~= "table" or #sigma ~= 2 or type(sigma[1]) ~= "number" or type(sigma[2]) ~= "number"
      or not (sigma[1] > 0 and sigma[2] > 0) then
    raise("%s: sigma must be a number > 0 or a pair {sx, sy} of them, got %s", who,
      type(sigma) == "table" and U.py(sigma) or tostring(sigma))
  end
  return F._gaussian_blur(who, img, k, sigma)
end

function F._kernel_size(who, k)
  if math.type(k) == "integer" then k = { k, k } end
  if type(k) ~= "table" or #k ~= 2 or math.type(k[1]) ~= "integer" or math.type(k[2]) ~= "integer"
      or k[1] < 1 or k[2] < 1 or k[1] % 2 == 0 or k[2] % 2 == 0 then
    raise("%s: kernel_size must be an odd positive integer or a pair {kx, ky} of them, got %s", who,
      type(k) == "table" and U.py(k) or tostring(k))
  end
  return { k[1], k[2] }
end

return F
