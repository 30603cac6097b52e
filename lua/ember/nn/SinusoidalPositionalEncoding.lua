--- nn.SinusoidalPositionalEncoding(d_model [, {max_len=5000, dropout=0,
-- dtype=, device=}]): adds the fixed table of "Attention Is All You Need",
--   pe[pos, 2i] = sin(pos / 10000^(2i/d)),  pe[pos, 2i+1] = cos(...)
-- (pos counted from 0), to x [B, L, d_model]. forward(x, start) adds the rows
-- for positions start .. start+L-1 (1-based, default 1): a decoder with a KV
-- cache passes the position of its new token. The table is a non-persistent
-- buffer: it moves with :to() but is not saved.
-- @usage local pe = nn.SinusoidalPositionalEncoding(64)
-- local x = pe(ember.randn(2, 10, 64))   -- the same shape
-- @classmod nn.SinusoidalPositionalEncoding
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local Dropout = require "ember.nn.Dropout"

local PE = Module:extend("SinusoidalPositionalEncoding")

function PE:__init(d_model, opts, ...)
  require("ember._errors").no_extra("nn.SinusoidalPositionalEncoding", { "d_model", "opts" }, 1, d_model, opts, ...)
  opts = Module.check_options("nn.SinusoidalPositionalEncoding", opts, { "max_len", "dropout", "dtype", "device" })
  if math.type(d_model) ~= "integer" or d_model < 1 then
    error("SinusoidalPositionalEncoding: d_model must be a positive integer, got " .. tostring(d_model), 2)
  end
  local max_len = opts.max_len or 5000
  self.d_model, self.max_len = d_model, max_len
  -- The table in float64 tensor ops, then rounded once to the dtype: the
  -- same values as Lua's own sin and cos of pos / 10000^(k/d) (libm's, as
  -- float64 sin and cos are on the CPU), without a Lua loop over every
  -- element (max_len 5000 by d_model 512 took 0.3 s there). Column pair
  -- 2j, 2j+1 (0-based) shares its angle: sin fills the first, cos the second.
  local half = (d_model + 1) // 2
  local denom = {}
  for j = 0, half - 1 do denom[j + 1] = 10000 ^ (2 * j / d_model) end
  local angle = ember.arange(0, max_len, { dtype = "float64" }):view(max_len, 1)
      / ember.tensor(denom, { dtype = "float64" }):view(1, half)
  local pe = ember.zeros(max_len, d_model, { dtype = opts.dtype or ember.get_default_dtype(), device = opts.device })
  pe:slice(2, 1, d_model, 2):copy_(angle:sin())
  if d_model > 1 then pe:slice(2, 2, d_model, 2):copy_(angle:narrow(2, 1, d_model // 2):cos()) end
  self:register_buffer("pe", pe, false)
  self:add_module("dropout", Dropout(opts.dropout or 0))
end

--- x plus the sinusoid table of positions start..start+L-1.
-- @tparam Tensor x [B, L, d_model]
-- @tparam[opt=1] integer start 1-based position of x's first token
function PE:forward(x, start)
  start = start or 1
  local L = x.shape[x.ndim - 1]
  if x.shape[x.ndim] ~= self.d_model then
    error(("SinusoidalPositionalEncoding.forward: last dim is %d, expected d_model=%d"):format(
      x.shape[x.ndim], self.d_model), 2)
  end
  if start < 1 or start + L - 1 > self.max_len then
    error(("SinusoidalPositionalEncoding.forward: positions %d..%d outside 1..max_len=%d"):format(
      start, start + L - 1, self.max_len), 2)
  end
  return self.dropout(x + self.pe:narrow(1, start, L))
end

--- The sizes, for printing.
function PE:extra_repr() return ("d_model=%d, max_len=%d"):format(self.d_model, self.max_len) end

return PE
