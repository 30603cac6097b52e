-- sliding_sinks: a sliding window that always keeps the first `sinks`
-- positions in view (StreamingLLM's attention sinks). With causal = true
-- (a decoder) only the left side of the window counts.
local ember = require "ember"
return {
  name = "sliding_sinks",
  description = "sliding window (left/right) plus sink tokens that every query sees",
  options = {
    { name = "window_left", type = "int", default = 128, min = 0, help = "keys this many positions before the query" },
    { name = "window_right", type = "int", default = 128, min = 0, help = "keys this many positions after the query" },
    { name = "sinks", type = "int", default = 4, min = 0, help = "leading positions every query sees" },
  },
  mask = function(b, h, q, k, ctx)
    local o = ctx.options
    local in_window = ember.logical_and((q - k):le(o.window_left), (k - q):le(o.window_right))
    return ember.logical_or(in_window, k:le(o.sinks))
  end,
}
