-- sinks: a learned sink logit per head (as gpt-oss): each softmax's
-- normaliser gets exp(sink[h]) more, with no value, so a head can attend to
-- "nothing". The table starts at zero and trains with the model.
local ember = require "ember"
return {
  name = "sinks",
  description = "learned per-head attention sink logit (gpt-oss)",
  params = function(options, dims)
    return { { name = "sink", tensor = ember.zeros(dims.heads), learned = true } }
  end,
  sink = function(b, h, q, ctx) return ctx.sink[h] end,
  -- the sink takes its share of each row: the weights of the keys sum to less than 1
  check = { weights_sum_tol = 1 },
}
