-- tests/lua/helpers/tiny_lm.lua -- a small decoder language model with the
-- decode(ids, {cache=, start=, memory=, memory_key_padding_mask=,
-- key_padding_mask=}) method ember.generate calls: embedding, positions,
-- nn.TransformerDecoder and a linear head, random weights everywhere
-- (variant tables included).
--
--   local TinyLM = require "tests.lua.helpers.tiny_lm"   -- from the source root
--   local m = TinyLM{cross = false, rope = true, positions = "none"}
--
-- Options: vocab (11), d (8), dtype ("float64"), layers (2), heads (2),
-- kv_heads, cross, attention, attention_options, cross_attention, rope,
-- norm_first, positions ("sinusoidal", "learned" or "none"; learned_pos =
-- true is "learned"). m.inputs lists the length of every decode call's ids.
local ember = require "ember"
local nn = require "ember.nn"

local TinyLM = nn.Module:extend("TinyLM")

function TinyLM:__init(opts)
  local V, d, dt = opts.vocab or 11, opts.d or 8, opts.dtype or "float64"
  self:add_module("embed", nn.Embedding(V, d, { dtype = dt }))
  local positions = opts.positions or (opts.learned_pos and "learned" or "sinusoidal")
  if positions == "learned" then
    self:add_module("pos", nn.LearnedPositionalEncoding(64, d, { dtype = dt }))
  elseif positions == "sinusoidal" then
    self:add_module("pos", nn.SinusoidalPositionalEncoding(d, { max_len = 64, dtype = dt }))
  end
  self:add_module("decoder", nn.TransformerDecoder(d, opts.heads or 2, opts.layers or 2, { dim_feedforward = 2 * d,
    dropout = 0, dtype = dt, cross = opts.cross, attention = opts.attention,
    attention_options = opts.attention_options, cross_attention = opts.cross_attention,
    rope = opts.rope, norm_first = opts.norm_first, kv_heads = opts.kv_heads }))
  self:add_module("head", nn.Linear(d, V, { dtype = dt }))
  self.inputs = {}
  ember.no_grad(function()
    for _, p in ipairs(self:parameters()) do p:copy_(ember.randn(p.shape, { dtype = dt }) * 0.5) end
  end)
end

function TinyLM:decode(ids, o)
  self.inputs[#self.inputs + 1] = ids.shape[2]
  local x = self.embed(ids)
  if self.pos then x = self.pos(x, o.start) end
  x = self.decoder(x, o.memory, { cache = o.cache, memory_key_padding_mask = o.memory_key_padding_mask,
    tgt_key_padding_mask = o.key_padding_mask })
  self.last_cache = o.cache
  return self.head(x)
end

-- The loaded attention variants that run without per-call tensors
-- (variants written in Lua may need some, e.g. document ids): the ones a
-- generic loop over variants can run.
function TinyLM.plain_variants()
  local names = {}
  local q = ember.randn({ 1, 2, 3, 4 }, { dtype = "float64" })
  for _, v in ipairs(ember.attention_variants()) do
    local ok, err = pcall(function()
      return ember.Attention { attention = v.name, heads = 2, head_dim = 4, dtype = "float64" }(q, q, q)
    end)
    if ok then
      names[#names + 1] = v.name
    elseif not tostring(err):find("needs the per-call tensor", 1, true) then
      error(v.name .. ": " .. tostring(err))
    end
  end
  return names
end

return TinyLM
