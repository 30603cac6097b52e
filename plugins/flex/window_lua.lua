-- window_lua: local's sliding window (mode = "sliding") written in Lua:
-- query q sees keys q - window_left .. q + window_right.
local ember = require "ember"
return {
  name = "window_lua",
  description = "sliding window (local mode = sliding written in Lua)",
  options = {
    { name = "window_left", type = "int", default = 64, min = 0, help = "keys this many positions before the query" },
    { name = "window_right", type = "int", default = 64, min = 0, help = "keys this many positions after the query" },
  },
  mask = function(b, h, q, k, ctx)
    return ember.logical_and((q - k):le(ctx.options.window_left), (k - q):le(ctx.options.window_right))
  end,
}
