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
    -- with more queries than keys the first queries sit before key 1: they
    -- take the first position's document
    return ctx.doc[b][ember.maximum(q, 1)]:eq(ctx.doc[b][k])
  end,
}
