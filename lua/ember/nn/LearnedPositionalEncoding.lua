--- nn.LearnedPositionalEncoding(max_len, d_model [, {dropout=0, dtype=,
-- device=}]): a learned [max_len, d_model] table (N(0, 0.02) init, as GPT-2)
-- added to x [B, L, d_model]. forward(x, start) uses positions start ..
-- start+L-1 (1-based, default 1), so a KV-cached decoder can pass the
-- position of its new token.
-- @usage local pe = nn.LearnedPositionalEncoding(512, 64)
-- @classmod nn.LearnedPositionalEncoding
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local Dropout = require "ember.nn.Dropout"

local LPE = Module:extend("LearnedPositionalEncoding")

function LPE:__init(max_len, d_model, opts, ...)
  require("ember._errors").no_extra("nn.LearnedPositionalEncoding", { "max_len", "d_model", "opts" }, 1, max_len, d_model, opts, ...)
  opts = Module.check_options("nn.LearnedPositionalEncoding", opts, { "dropout", "dtype", "device" })
  for what, v in pairs { max_len = max_len, d_model = d_model } do
    if math.type(v) ~= "integer" or v < 1 then
      error(("LearnedPositionalEncoding: %s must be a positive integer, got %s"):format(what, tostring(v)), 2)
    end
  end
  self.max_len, self.d_model = max_len, d_model
  self:register_parameter("weight",
    ember.normal({ max_len, d_model }, 0, 0.02, { dtype = opts.dtype, device = opts.device }))
  self:add_module("dropout", Dropout(opts.dropout or 0))
end

--- x plus the learned vectors of positions start..start+L-1.
-- @tparam Tensor x [B, L, d_model]
-- @tparam[opt=1] integer start 1-based position of x's first token (decoding with a cache)
function LPE:forward(x, start)
  start = start or 1
  local L = x.shape[x.ndim - 1]
  if x.shape[x.ndim] ~= self.d_model then
    error(("LearnedPositionalEncoding.forward: last dim is %d, expected d_model=%d"):format(
      x.shape[x.ndim], self.d_model), 2)
  end
  if start < 1 or start + L - 1 > self.max_len then
    error(("LearnedPositionalEncoding.forward: positions %d..%d outside 1..max_len=%d"):format(
      start, start + L - 1, self.max_len), 2)
  end
  return self.dropout(x + self.weight:narrow(1, start, L))
end

--- The sizes, for printing.
function LPE:extra_repr() return ("max_len=%d, d_model=%d"):format(self.max_len, self.d_model) end

return LPE
