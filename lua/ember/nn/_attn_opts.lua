-- Shared by the attention-bearing layers: the options of one
-- MultiHeadAttention from a layer's options table.
--   attention = "standard" | "linear" | "local" | "relpos" | ...
--   attention_options = { <the variant's own options> }
--   rope, bias, dtype, device, attention_dropout (default: dropout)
local M = {}

function M.mha_spec(d_model, heads, opts, extra)
  local spec = {
    d_model = d_model, heads = heads,
    attention = opts.attention or "standard",
    dropout = opts.attention_dropout or opts.dropout or 0,
    bias = opts.bias, rope = opts.rope, dtype = opts.dtype, device = opts.device,
  }
  for k, v in pairs(opts.attention_options or {}) do spec[k] = v end
  for k, v in pairs(extra or {}) do spec[k] = v end
  return spec
end

return M
