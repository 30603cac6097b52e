-- document: attention within documents packed into one row. Per call,
-- variant_inputs = {doc = ids}, ids [B, L] (int64), one id per position
-- (ember.data.pack makes them); a query sees the keys of its own document.
-- Add causal = true for a decoder. Tiles across documents are skipped.
local ember = require "ember"
return {
  name = "document",
  description = "document mask for packed sequences (variant_inputs = {doc = ids [B, L]})",
  inputs = { doc = 2 },
  mask = function(b, h, q, k, ctx)
    return ctx.doc[b][q]:eq(ctx.doc[b][k])
  end,
}
