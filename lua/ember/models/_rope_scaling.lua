-- Private to models.Llama: Hugging Face's RoPE scaling (config.json's
-- `rope_scaling`, or transformers 5's `rope_parameters`), as
-- transformers' modeling_rope_utils.py computes each type's inverse
-- frequencies and the factor on cos/sin ("attention_factor"):
--
--   default   theta^(-2i/d)
--   linear    default / factor (positions / factor)
--   dynamic   NTK: while the call's length n (its last position + 1) is at
--             most max_position_embeddings, default; past it theta becomes
--             theta * (factor * n / max - (factor - 1))^(d / (d - 2))
--   llama3    per band of wavelength w = 2 pi / inv: w < orig / high_freq_factor
--             kept, w > orig / low_freq_factor divided by factor, between
--             them interpolated by s = (orig / w - low) / (high - low):
--             (1 - s) inv / factor + s inv
--   yarn      inv_extra = theta^(-2i/d), inv_inter = inv_extra / factor,
--             blended by a linear ramp over dims [low, high] (from beta_fast,
--             beta_slow and original_max_position_embeddings, floored and
--             ceiled unless truncate = false); cos and sin times
--             attention_factor (default 0.1 ln(factor) + 1, or
--             mscale(factor, mscale) / mscale(factor, mscale_all_dim))
--
-- yarn's factor is rope_scaling.factor and its ramp's context
-- original_max_position_embeddings (else max_position_embeddings), as
-- transformers 5 computes them; some 4.x releases instead replaced factor
-- by max_position_embeddings / original_max_position_embeddings whenever
-- the latter was given (DeepSeek-V3's configs), which differs where the two
-- disagree.
-- The math is in float64 (transformers computes inv_freq in float32).
-- `check` validates a config's table and returns its normalized form (nil
-- for "default"); `frequencies` gives MultiHeadAttention's rope_table its
-- `freq` argument (nil: plain RoPE, MultiHeadAttention's own table).
local errors = require "ember._errors"

local M = {}

M.TYPES = { "default", "linear", "dynamic", "llama3", "yarn" }

-- required and optional keys per type, besides rope_type/type
-- (original_max_position_embeddings is accepted and unused by linear and
-- dynamic, as transformers)
local KEYS = {
  default = { {}, {} },
  linear = { { "factor" }, { "original_max_position_embeddings" } },
  dynamic = { { "factor" }, { "original_max_position_embeddings" } },
  llama3 = { { "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings" }, {} },
  yarn = { { "factor" }, { "attention_factor", "beta_fast", "beta_slow", "original_max_position_embeddings", "mscale",
                           "mscale_all_dim", "truncate" } },
}

local function number(rs, k, who, what, ok)
  local v = rs[k]
  if type(v) ~= "number" or v ~= v or not ok(v) then
    errors.raise("%s: config.rope_scaling.%s must be %s, got %s", who, k, what, tostring(v))
  end
  return v
end

-- The checked rope_scaling table (rope_type from `rope_type` or the older
-- `type`), or nil when it is absent or "default".
function M.check(rs, who)
  if rs == nil then return nil end
  if type(rs) ~= "table" then errors.raise("%s: config.rope_scaling must be a table (or null), got %s", who, type(rs)) end
  local kind = rs.rope_type
  if kind == nil then kind = rs.type end
  if rs.rope_type ~= nil and rs.type ~= nil and rs.rope_type ~= rs.type then
    errors.raise("%s: config.rope_scaling has rope_type '%s' and type '%s'", who, tostring(rs.rope_type), tostring(rs.type))
  end
  if type(kind) ~= "string" or not KEYS[kind] then
    errors.raise("%s: config.rope_scaling: %s (supported rope_type: %s)", who,
      kind == nil and "no rope_type (or type)" or ("unknown rope_type '" .. tostring(kind) .. "'"),
      table.concat(M.TYPES, ", "))
  end
  local req, opt = KEYS[kind][1], KEYS[kind][2]
  local known = { rope_type = true, type = true }
  for _, k in ipairs(req) do
    known[k] = true
    if rs[k] == nil then errors.raise("%s: config.rope_scaling of rope_type '%s' needs %s", who, kind, k) end
  end
  for _, k in ipairs(opt) do known[k] = true end
  for k in pairs(rs) do
    if not known[k] then
      local names = {}
      for _, n in ipairs(req) do names[#names + 1] = n end
      for _, n in ipairs(opt) do names[#names + 1] = n end
      errors.raise("%s: config.rope_scaling: unknown key '%s' for rope_type '%s' (its keys: %s)", who, tostring(k), kind,
        #names > 0 and table.concat(names, ", ") or "none")
    end
  end
  if kind == "default" then return nil end
  local s = { rope_type = kind, cache = {} }
  s.factor = number(rs, "factor", who, "a number >= 1", function(v) return v >= 1 end)
  local positive = function(v) return v > 0 end
  if rs.original_max_position_embeddings ~= nil then
    local v = rs.original_max_position_embeddings
    if math.type(v) ~= "integer" or v < 1 then
      errors.raise("%s: config.rope_scaling.original_max_position_embeddings must be a positive integer, got %s", who,
        tostring(v))
    end
    s.original_max_position_embeddings = v
  end
  if kind == "llama3" then
    s.low_freq_factor = number(rs, "low_freq_factor", who, "a number > 0", positive)
    s.high_freq_factor = number(rs, "high_freq_factor", who, "a number > low_freq_factor", function(v)
      return v > s.low_freq_factor end)
  elseif kind == "yarn" then
    for _, k in ipairs { "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim" } do
      if rs[k] ~= nil then s[k] = number(rs, k, who, k == "attention_factor" and "a number > 0" or "a number >= 0",
        k == "attention_factor" and positive or function(v) return v >= 0 end) end
    end
    if rs.truncate ~= nil and type(rs.truncate) ~= "boolean" then
      errors.raise("%s: config.rope_scaling.truncate must be a boolean, got %s", who, tostring(rs.truncate))
    end
    s.truncate = rs.truncate ~= false
  end
  return s
end

local function default_inv(dh, base)
  local inv = {}
  for i = 0, dh // 2 - 1 do inv[i + 1] = 1 / base ^ (2 * i / dh) end
  return inv
end

-- inverse frequencies and attention factor of a type that does not depend on the length
local function static(s, dh, base, max_pos)
  local inv, scale = default_inv(dh, base), 1.0
  local kind, factor = s.rope_type, s.factor
  if kind == "linear" then
    for i, f in ipairs(inv) do inv[i] = f / factor end
  elseif kind == "llama3" then
    local orig, low, high = s.original_max_position_embeddings, s.low_freq_factor, s.high_freq_factor
    local low_wavelen, high_wavelen = orig / low, orig / high
    for i, f in ipairs(inv) do
      local wavelen = 2 * math.pi / f
      if wavelen > low_wavelen then
        inv[i] = f / factor
      elseif wavelen >= high_wavelen then -- medium: interpolated
        local smooth = (orig / wavelen - low) / (high - low)
        inv[i] = (1 - smooth) * f / factor + smooth * f
      end
    end
  elseif kind == "yarn" then
    local orig = s.original_max_position_embeddings or max_pos
    local function get_mscale(x, m)
      if x <= 1 then return 1.0 end
      return 0.1 * (m or 1) * math.log(x) + 1.0
    end
    scale = s.attention_factor
    if scale == nil then
      if s.mscale and s.mscale ~= 0 and s.mscale_all_dim and s.mscale_all_dim ~= 0 then
        scale = get_mscale(factor, s.mscale) / get_mscale(factor, s.mscale_all_dim)
      else
        scale = get_mscale(factor)
      end
    end
    local beta_fast = (s.beta_fast and s.beta_fast ~= 0) and s.beta_fast or 32
    local beta_slow = (s.beta_slow and s.beta_slow ~= 0) and s.beta_slow or 1
    local function correction_dim(rot) return dh * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base)) end
    local lo, hi = correction_dim(beta_fast), correction_dim(beta_slow)
    if s.truncate then lo, hi = math.floor(lo), math.ceil(hi) end
    lo, hi = math.max(lo, 0), math.min(hi, dh - 1)
    if lo == hi then hi = hi + 0.001 end
    for i, f in ipairs(inv) do
      local ramp = math.min(math.max((i - 1 - lo) / (hi - lo), 0), 1)
      local extra = 1 - ramp -- the share of the unscaled frequency
      inv[i] = f / factor * (1 - extra) + f * extra
    end
  end
  return inv, scale
end

-- MultiHeadAttention's `freq` for a call whose positions end at n - 1, or
-- nil for plain RoPE.
-- @tparam table s check's result
-- @int dh head dim
-- @number base rope_theta
-- @int max_pos config.max_position_embeddings
-- @int n the call's length
function M.frequencies(s, dh, base, max_pos, n)
  if s.rope_type == "dynamic" then
    if n <= max_pos then return nil end -- as default until the length passes max_position_embeddings
    local b = base * ((s.factor * n / max_pos) - (s.factor - 1)) ^ (dh / (dh - 2))
    return { key = ("dynamic|%d|%.17g"):format(dh, b), inv = default_inv(dh, b), scale = 1.0, once = true }
  end
  local f = s.cache[dh]
  if not f then
    local inv, scale = static(s, dh, base, max_pos)
    local parts = {}
    for i, v in ipairs(inv) do parts[i] = ("%.17g"):format(v) end
    f = { key = ("%s|%d|%.17g|%s"):format(s.rope_type, dh, scale, table.concat(parts, ",")), inv = inv, scale = scale }
    s.cache[dh] = f
  end
  return f
end

return M
