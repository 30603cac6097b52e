-- nn/_interpolate.lua (internal): resampling of the spatial dims of
-- [N, C, *spatial] (1 to 3 of them), as torch.nn.functional.interpolate:
-- nn.functional.interpolate / upsample and nn.Upsample call it, so each
-- rule is written here once.
--
-- Every mode PyTorch has for these inputs is separable: output position i
-- along a dim is a weighted sum of a few input positions (taps) of that
-- dim only, the same for every other index, and the modes of 2 and 3 dims
-- (bilinear, bicubic, trilinear) are their 1-d mode applied along each dim
-- in turn. So each dim is one index_select per tap, times the tap's weights,
-- summed: autograd differentiates it (index_select's backward adds into
-- the repeated positions), in every dtype and on every backend. The taps
-- follow PyTorch 1.13's CPU kernels (aten/src/ATen/native/UpSample.h):
--   nearest        src = min(floor(i * scale), n - 1), in float32
--   nearest-exact  src = min(floor((i + 0.5) * scale), n - 1), in float32
--   linear         x = scale * (i + 0.5) - 0.5 clamped at 0 (align_corners:
--                  scale * i); taps floor(x) and the next (the last
--                  position repeats), weights 1 - t and t
--   cubic          x as linear's but not clamped; taps floor(x) - 1 .. + 2
--                  clamped into the input, Keys' weights with A = -0.75
-- scale = 1 / scale_factor when a scale_factor was given (and not
-- recompute_scale_factor), else n / out; with align_corners
-- (n - 1) / (out - 1) (0 when out = 1). "area" is the adaptive average pool.
-- antialias (bilinear and bicubic, PyTorch's _upsample_bilinear2d_aa and
-- _upsample_bicubic2d_aa): the filter (1 - |x|, or Keys' with A = -0.5) is
-- widened by the scale when downsampling, support = taps / 2 * max(scale, 1);
-- output i takes every input j within the support of center = scale (i + 0.5),
-- weight filter((j - center + 0.5) / max(scale, 1)), the weights normalised
-- to sum to 1 (ones past the input's edge left out).
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local pool = require "ember.nn._pool"
local conv = require "ember.nn._conv"
local checks = require "ember.nn._functional_checks"
local errors = require "ember._errors"
local shape_str = errors.shape_str

local M = {}

local function f32(v) return (string.unpack("f", string.pack("f", v))) end

-- The dims each mode takes (nil: any of 1 to 3), and whether align_corners applies.
local MODES = {
  nearest = { interp = false }, ["nearest-exact"] = { interp = false }, area = { interp = false },
  linear = { nd = 1, interp = true }, bilinear = { nd = 2, interp = true }, bicubic = { nd = 2, interp = true },
  trilinear = { nd = 3, interp = true },
}
M.MODES = MODES

-- The antialiased taps of one dim (bilinear or bicubic): as many as the
-- widest output's window, a shorter window's last ones of weight 0.
-- Input positions per output position: PyTorch's area_pixel_compute_scale.
local function source_scale(n, out, factor, align_corners)
  if align_corners then return out > 1 and (n - 1) / (out - 1) or 0 end
  return factor and 1.0 / factor or n / out
end

local function aa_taps(mode, n, out, factor, align_corners)
  local size = mode == "bicubic" and 4 or 2
  local scale = source_scale(n, out, factor, align_corners)
  local support = scale >= 1 and size * 0.5 * scale or size * 0.5
  local invscale = scale >= 1 and 1 / scale or 1
  local A = -0.5
  local function filter(x)
    if x < 0 then x = -x end
    if size == 2 then return x < 1 and 1 - x or 0 end
    if x < 1 then return ((A + 2) * x - (A + 3)) * x * x + 1 end
    if x < 2 then return (((x - 5) * x + 8) * x - 4) * A end
    return 0
  end
  local function trunc(v) return v >= 0 and math.floor(v) or math.ceil(v) end -- C's cast to an integer
  local rows, K = {}, 0
  for i = 0, out - 1 do
    local center = scale * (i + 0.5)
    local xmin = math.max(trunc(center - support + 0.5), 0)
    local xsize = math.min(trunc(center + support + 0.5), n) - xmin
    local w, total = {}, 0
    for j = 0, xsize - 1 do
      w[j + 1] = filter((j + xmin - center + 0.5) * invscale)
      total = total + w[j + 1]
    end
    if total ~= 0 then
      for j = 1, xsize do w[j] = w[j] / total end
    end
    rows[i + 1] = { xmin = xmin, w = w }
    K = math.max(K, xsize)
  end
  local list = {}
  for k = 1, K do
    local idx, w = {}, {}
    for i = 1, out do
      local r = rows[i]
      idx[i] = math.min(r.xmin + k - 1, n - 1) + 1
      w[i] = r.w[k] or 0
    end
    list[k] = { idx = idx, w = w }
  end
  return list
end

-- The taps of one dim: a list of {idx = {1-based positions}, w = {weights} or nil}.
local function taps(mode, n, out, factor, align_corners, antialias)
  if antialias then return aa_taps(mode, n, out, factor, align_corners) end
  if mode == "nearest" or mode == "nearest-exact" then
    local idx = {}
    local scale = f32(factor and 1.0 / factor or n / out)
    local half = mode == "nearest-exact" and 0.5 or 0
    for i = 0, out - 1 do idx[i + 1] = math.min(math.floor(f32(f32(i + half) * scale)), n - 1) + 1 end
    return { { idx = idx } }
  end
  local scale = source_scale(n, out, factor, align_corners)
  local cubic = mode == "bicubic"
  local function source(i)
    if align_corners then return scale * i end
    local x = scale * (i + 0.5) - 0.5
    if not cubic and x < 0 then x = 0 end
    return x
  end
  if not cubic then
    local i0, i1, w0, w1 = {}, {}, {}, {}
    for i = 0, out - 1 do
      local x = source(i)
      local lo = math.floor(x)
      local t = math.min(math.max(x - lo, 0), 1)
      i0[i + 1], i1[i + 1] = lo + 1, (lo < n - 1 and lo + 1 or lo) + 1
      w0[i + 1], w1[i + 1] = 1 - t, t
    end
    return { { idx = i0, w = w0 }, { idx = i1, w = w1 } }
  end
  local A = -0.75
  local function near(x) return ((A + 2) * x - (A + 3)) * x * x + 1 end      -- |x| <= 1
  local function far(x) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A end -- 1 < |x| < 2
  local list = {}
  for k = 1, 4 do list[k] = { idx = {}, w = {} } end
  for i = 0, out - 1 do
    local x = source(i)
    local lo = math.floor(x)
    local t = x - lo
    local w = { far(t + 1), near(t), near(1 - t), far(2 - t) }
    for k = 1, 4 do
      list[k].idx[i + 1] = math.min(math.max(lo - 2 + k, 0), n - 1) + 1
      list[k].w[i + 1] = w[k]
    end
  end
  return list
end

-- x resampled along `dim` to `out` positions.
local function along(x, dim, mode, out, factor, align_corners, antialias)
  local n = x.shape[dim]
  if out == n and (factor == nil or factor == 1) and not antialias then
    -- every mode maps a dim onto itself when the scale is 1 (align_corners too)
    return x
  end
  if mode == "area" then return pool.adaptive_mean(x, dim, out) end
  local opts = { device = x.device }
  local wshape = {}
  for i = 1, x.ndim do wshape[i] = 1 end
  wshape[dim] = out
  local y
  for _, tap in ipairs(taps(mode, n, out, factor, align_corners, antialias)) do
    local part = x:index_select(dim, ember.tensor(tap.idx, { dtype = "int64", device = x.device }))
    if tap.w then
      opts.dtype = x.dtype
      part = part * ember.tensor(tap.w, opts):view(wshape)
    end
    y = y and y + part or part
  end
  return y
end

-- The output sizes of x's nd spatial dims: `size` (a list of nd) or
-- floor(n * scale_factor) (a list of nd); an empty one is an error.
function M.out_sizes(who, x, nd, size, scale_factor)
  local out = {}
  for i = 1, nd do
    local dim = x.ndim - nd + i
    out[i] = size and size[i] or math.floor(x.shape[dim] * scale_factor[i])
    if out[i] < 1 then
      error(("%s: scale_factor %g gives an empty output from dim %d of shape [%s]"):format(who, scale_factor[i], dim,
        table.concat(x.shape, ", ")))
    end
  end
  pool.check_output_size(who, x, nd, out)
  return out
end

-- x [N, C, *spatial] (nd = #spatial, checked by the caller) resampled to
-- `size` (a list of nd) or by `scale_factor` (a list of nd numbers), one of
-- the two; mode a key of MODES (checked), align_corners a boolean or nil;
-- recompute: scale_factor only sizes the output, the scale is n / out;
-- antialias: bilinear's and bicubic's (checked by the caller).
function M.interpolate(who, x, nd, size, scale_factor, mode, align_corners, recompute, antialias)
  local out = M.out_sizes(who, x, nd, size, scale_factor)
  local y = x
  for i = 1, nd do
    local factor = scale_factor and not recompute and scale_factor[i] or nil
    y = along(y, x.ndim - nd + i, mode, out[i], factor, align_corners, antialias)
  end
  return y
end

-- The options of nn.functional.interpolate, in torch's positional order.
M.OPTIONS = { "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor", "antialias" }

-- nn.functional.interpolate's arguments (o: by name, OPTIONS) checked and
-- the resampling done; who names the function in errors.
function M.resample(who, x, o)
  checks.check_tensor(who, "input", x, true)
  if x.ndim < 3 or x.ndim > 5 then
    errors.raise("%s: expected an input [N, C, *spatial] with 1 to 3 spatial dims (3-d to 5-d), got shape %s", who,
      shape_str(x))
  end
  local nd = x.ndim - 2
  local mode = o.mode or "nearest"
  local spec = MODES[mode]
  if not spec then
    errors.raise("%s: mode must be \"nearest\", \"nearest-exact\", \"linear\", \"bilinear\", \"bicubic\", "
      .. "\"trilinear\" or \"area\", got %s", who, conv.fmt(mode))
  end
  if spec.nd and spec.nd ~= nd then
    errors.raise("%s: mode %q needs a %d-d input [N, C, %s], got shape %s (%d-d)", who, mode, spec.nd + 2,
      ({ "L", "H, W", "D, H, W" })[spec.nd], shape_str(x), x.ndim)
  end
  checks.check_bool(who, "align_corners", o.align_corners)
  if o.align_corners ~= nil and not spec.interp then
    errors.raise("%s: align_corners goes only with the interpolating modes (linear, bilinear, bicubic, trilinear), "
      .. "not %q", who, mode)
  end
  checks.check_bool(who, "recompute_scale_factor", o.recompute_scale_factor)
  checks.check_bool(who, "antialias", o.antialias)
  if o.antialias and mode ~= "bilinear" and mode ~= "bicubic" then
    errors.raise("%s: antialias goes only with the modes \"bilinear\" and \"bicubic\" (as PyTorch), not %q", who, mode)
  end
  if (o.size == nil) == (o.scale_factor == nil) then
    errors.raise("%s: give either size or scale_factor (one of them)", who)
  end
  local size, scale
  if o.size ~= nil then
    size = checks.per_dim(o.size, nd, true)
    if not size then
      errors.raise("%s: size must be a positive integer or a table of %d of them, got %s", who, nd, conv.fmt(o.size))
    end
  else
    scale = checks.per_dim(o.scale_factor, nd)
    if not scale then
      errors.raise("%s: scale_factor must be a positive number or a table of %d of them, got %s", who, nd,
        conv.fmt(o.scale_factor))
    end
  end
  return M.interpolate(who, x, nd, size, scale, mode, o.align_corners == true, o.recompute_scale_factor == true,
    o.antialias == true)
end

return M
