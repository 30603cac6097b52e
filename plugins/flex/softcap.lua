-- softcap: logit soft-capping (Gemma 2): s = cap * tanh(s / cap), which
-- keeps every score inside (-cap, cap).
local ember = require "ember"
return {
  name = "softcap",
  description = "logit soft-capping, s = cap * tanh(s / cap) (Gemma 2)",
  options = { { name = "cap", type = "float", default = 50, min = 1e-6, max = 1e9,
    help = "the cap: scores stay inside (-cap, cap)" } },
  score = function(s, b, h, q, k, ctx)
    local cap = ctx.options.cap
    -- times 1/cap, not divided by cap: one division per score less (the
    -- kernel's tanh has its own), forward and backward; within an ulp
    return cap * ember.tanh(s * (1 / cap))
  end,
}
