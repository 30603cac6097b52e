-- A stand-in for the `ember` table that loads it on first use. The nn,
-- optim, checkpoint and generate modules use it instead of a top-level
-- require "ember", so ember/init.lua may itself require them without a
-- require loop. After the first lookup it is a plain __index table.
local proxy = {}
return setmetatable(proxy, {
  __index = function(t, k)
    local real = require "ember"
    setmetatable(t, { __index = real })
    return real[k]
  end,
})
