-- alibi_lua: ALiBi (relpos mode = "alibi") written in Lua: a fixed slope per
-- head times the distance, s - slope[h] * |q - k|, the ALiBi paper's slopes.
local ember = require "ember"
return {
  name = "alibi_lua",
  description = "ALiBi: s - slope[h] * |q - k| (relpos alibi written in Lua)",
  params = function(o, dims)
    return { { name = "slopes", tensor = ember.tensor(ember.alibi_slopes(dims.heads)), learned = false } }
  end,
  score = function(s, b, h, q, k, ctx) return s - ctx.slopes[h] * ember.abs(q - k) end,
}
