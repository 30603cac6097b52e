-- example_lua: plugins/example written in Lua: a learned per-head penalty
-- on the distance |q - k|, clipped at max_distance (zero at first, which is
-- standard attention).
local ember = require "ember"
return {
  name = "example_lua",
  description = "learned per-head distance penalty (plugins/example in Lua)",
  options = { { name = "max_distance", type = "int", default = 32, min = 0, max = 1e6,
    help = "distances from here on share one penalty" } },
  params = function(o, dims)
    return { { name = "distance_bias", tensor = ember.zeros(o.max_distance + 1, dims.heads), learned = true } }
  end,
  score = function(s, b, h, q, k, ctx)
    local d = ember.minimum(ember.abs(q - k), ctx.options.max_distance)
    return s + ctx.distance_bias[d + 1][h]
  end,
}
