--- ember.data.rng: a small seeded generator (SplitMix64) for data
-- generators that run in Lua, independent of ember's global tensor
-- generator and of math.random, so that data sets are the same for a given
-- seed whatever the script does with the others.
-- @classmod data.Rng
local error = require("ember._errors").error -- raises at the user's line
local Rng = {}
Rng.__index = Rng

--- A generator with its own seed (independent of ember's global one).
-- @tparam[opt=0] integer seed
function Rng.new(seed)
  return setmetatable({state = math.tointeger(seed or 0) or error("Rng.new: seed must be an integer", 2)}, Rng)
end

--- The next 64-bit integer (Lua integers wrap, as SplitMix64 wants).
function Rng:next64()
  self.state = self.state + 0x9E3779B97F4A7C15
  local z = self.state
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return z ~ (z >> 31)
end

--- A float in [0, 1) with 53 random bits.
function Rng:uniform()
  return (self:next64() >> 11) * 0x1p-53
end

--- An integer in [lo, hi].
function Rng:int(lo, hi)
  return lo + math.floor(self:uniform() * (hi - lo + 1))
end

--- Shuffles list in place (Fisher-Yates) and returns it.
function Rng:shuffle(list)
  for i = #list, 2, -1 do
    local j = self:int(1, i)
    list[i], list[j] = list[j], list[i]
  end
  return list
end

return Rng
