-- Shared by the attention-bearing layers: the options of one
-- MultiHeadAttention from a layer's options table.
--   attention = "standard" | "linear" | "local" | "relpos" | ...
--   attention_options = { <the variant's own options> }
--   rope, bias, dtype, device, kv_heads (grouped-query attention)
--   attention_dropout: dropout on the attention weights. Given, it is used
--     as is (a variant without dropout on its weights then refuses it).
--     Not given, it is the layer's dropout (default 0.1, as PyTorch's
--     layers) where the variant has dropout on its weights, and 0 where it
--     has none (linear attention): so giving dropout=0.1 explicitly behaves
--     exactly as leaving it out.
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local Module = require "ember.nn.Module"

local M = {}

-- Does the variant drop attention weights? (nil when it is unknown: the
-- module then reports the unknown name.)
local function has_dropout(name)
  local ok, v = pcall(ember.attention_variants, name)
  if not ok then return nil end
  return v.caps.dropout
end

-- The attention dropout a layer with `dropout` uses when none is given:
-- `dropout` itself, or 0 where the variant has no dropout on its weights
-- (then also true, so that a command line can say so).
function M.default_attention_dropout(attention, dropout)
  if (dropout or 0) ~= 0 and has_dropout(attention or "standard") == false then return 0, true end
  return dropout
end

-- A layer's options checked as Module.check_options does; a key that is
-- an option of the layer's attention variant (given as to
-- nn.MultiHeadAttention, which takes them directly) is refused saying
-- where it goes: attention_options (or cross_attention_options).
function M.check_layer_options(who, opts, known)
  if type(opts) == "table" then
    local set = {}
    for _, n in ipairs(known) do set[n] = true end
    for key in pairs(opts) do
      if not set[key] then
        for _, field in ipairs { "attention", "cross_attention" } do
          local name = opts[field] or "standard"
          local ok, v = pcall(ember.attention_variants, name)
          if set[field] and ok and type(v) == "table" then
            for _, o in ipairs(v.options or {}) do
              if o.name == key then
                errors.raise("%s: '%s' is an option of attention '%s': give it as %s_options = {%s = ...}",
                  who, tostring(key), name, field, tostring(key))
              end
            end
          end
        end
      end
    end
  end
  return Module.check_options(who, opts, known)
end

function M.mha_spec(d_model, heads, opts, extra)
  local attention = opts.attention or "standard"
  local dropout = opts.attention_dropout
  if dropout == nil then dropout = M.default_attention_dropout(attention, opts.dropout or 0.1) end
  local spec = {
    d_model = d_model, heads = heads, attention = attention, dropout = dropout,
    bias = opts.bias, rope = opts.rope, dtype = opts.dtype, device = opts.device, kv_heads = opts.kv_heads,
  }
  for k, v in pairs(opts.attention_options or {}) do spec[k] = v end
  for k, v in pairs(extra or {}) do spec[k] = v end
  return spec
end

return M
