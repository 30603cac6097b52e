-- t5_lua: relpos mode = "t5" written in Lua: a learned bias per head on
-- T5's bucket of the relative position k - q (exact below half the
-- buckets, log-spaced up to max_distance, the rest in the last bucket).
-- In float32 the log is taken in float32, so a distance that lands exactly
-- on a bucket edge may fall one bucket off relpos's double-precision rule.
local ember = require "ember"
return {
  name = "t5_lua",
  description = "T5 relative-position buckets (relpos mode = t5 written in Lua)",
  options = {
    { name = "num_buckets", type = "int", default = 32, min = 4, help = "rows of the bias table" },
    { name = "max_distance", type = "int", default = 128, min = 1, help = "distances from here on share the last bucket" },
    { name = "bidirectional", type = "bool", default = true, help = "separate buckets for keys before and after" },
  },
  params = function(o, dims)
    return { { name = "bias", tensor = ember.zeros(o.num_buckets, dims.heads), learned = true } }
  end,
  score = function(s, b, h, q, k, ctx)
    local o = ctx.options
    local nb, rel, base, n = o.num_buckets, k - q, 0, nil
    if o.bidirectional then
      nb = nb // 2
      base = ember.where(rel:gt(0), nb, 0)
      n = ember.abs(rel)
    else
      n = ember.maximum(-rel, 0)
    end
    local exact = nb // 2
    -- as relpos t5: the log-spaced buckets run from the exact ones up to
    -- max_distance, so it must lie past them (else they leave the table)
    if o.max_distance <= exact then
      error(("max_distance (%d) must exceed the %d exact buckets (num_buckets / %d%s)"):format(o.max_distance, exact,
        o.bidirectional and 4 or 2, o.bidirectional and ", bidirectional" or ""), 0)
    end
    local large = exact + ember.floor(ember.log(n / exact) / math.log(o.max_distance / exact) * (nb - exact))
    local bucket = base + ember.where(n:lt(exact), n, ember.minimum(large, nb - 1))
    return s + ctx.bias[bucket + 1][h]
  end,
}
