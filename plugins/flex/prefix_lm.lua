-- prefix_lm: a prefix language model's mask. Per call, variant_inputs =
-- {prefix = n}, n [B] (int64): the first n[b] positions of row b see each
-- other both ways; the rest is causal.
local ember = require "ember"
return {
  name = "prefix_lm",
  description = "prefix-LM mask: bidirectional over a prefix of prefix[b] positions, causal after",
  inputs = { prefix = 1 },
  mask = function(b, h, q, k, ctx)
    return ember.logical_or(k:le(q), k:le(ctx.prefix[b]))
  end,
}
