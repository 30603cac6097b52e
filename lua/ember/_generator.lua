-- ember/_generator.lua: ember.Generator (torch.Generator) and the
-- `{generator = g}` option of the random functions that take one in torch:
-- rand, randn, randint, randperm, multinomial, bernoulli, normal (its
-- shape-and-numbers forms) and Tensor:uniform_ / normal_. _compat.lua loads it.
--
-- ember's core has one generator: a Philox key (the seed) and a counter
-- (ember.get_rng_state() is {seed =, offset =}). A Generator is such a
-- pair of its own. A call given {generator = g} swaps g's state into the
-- core generator, runs, keeps the advanced state in g and puts the global
-- state back (also when the call fails), so the global sequence goes on
-- as if the call had not happened. The swap is not atomic: ember runs one
-- Lua state per process and draws only from its thread, so nothing else
-- draws in between; two Lua states drawing concurrently in one process
-- would see each other's swaps.
local core = require "ember.core"
local raise = require("ember._errors").raise -- at the user's line
-- C errors (a bad shape) raised again at the user's line: fn is called from
-- this file's wrapper, which a C function's error would otherwise name
local guard = require("ember._errors").wrap

local function fail(op, fmt, ...) raise("ember." .. op .. ": " .. fmt, ...) end

local T = core.Tensor

-- torch.Generator().initial_seed(): a fresh generator's seed is torch's too.
local DEFAULT_SEED = 67280421310721

local Generator = {}
Generator.__index = Generator
Generator.__name = "ember.Generator"

local function is_generator(g) return getmetatable(g) == Generator end

local function new(device)
  if device ~= nil and device ~= "cpu" and not (type(device) == "table" and (device.device == nil or device.device == "cpu")) then
    fail("Generator", "only the cpu generator is supported (it also seeds the draws on other devices), got %s",
      type(device) == "table" and tostring(device.device) or tostring(device))
  end
  return setmetatable({ device = "cpu", _state = { seed = DEFAULT_SEED, offset = 0 } }, Generator)
end

-- The generator's state, and a way to set it (the global one's is the core's).
local function get(g)
  if g._global then return core.get_rng_state() end
  return { seed = g._state.seed, offset = g._state.offset }
end

local function put(g, s)
  if g._global then core.set_rng_state(s) else g._state = { seed = s.seed, offset = s.offset } end
end

function Generator:manual_seed(seed)
  if math.type(seed) ~= "integer" then
    if math.type(seed) == "float" and seed == math.floor(seed) and math.abs(seed) < 2 ^ 63 then
      seed = math.tointeger(seed)
    else
      fail("Generator:manual_seed", "seed must be an integer, got %s", tostring(seed))
    end
  end
  put(self, { seed = seed, offset = 0 })
  return self
end

-- A non-deterministic seed in [0, 2^63): /dev/urandom where it exists,
-- else the clock and an address.
local function fresh_seed()
  local f = io.open("/dev/urandom", "rb")
  local bytes = f and f:read(8)
  if f then f:close() end
  local s
  if bytes and #bytes == 8 then
    s = string.unpack("<i8", bytes)
  else
    s = math.tointeger(os.time()) ~ (math.tointeger(math.floor(os.clock() * 1e9)) or 0)
      ~ (tonumber(tostring({}):match("0x(%x+)") or "0", 16) or 0)
  end
  return s & 0x7fffffffffffffff
end

function Generator:seed()
  local s = fresh_seed()
  self:manual_seed(s)
  return s
end

function Generator:initial_seed() return get(self).seed end

function Generator:get_state() return get(self) end

function Generator:set_state(state)
  if type(state) ~= "table" or math.type(state.seed) ~= "integer" or math.type(state.offset) ~= "integer" then
    fail("Generator:set_state", "expected the table get_state returns ({seed =, offset =} integers), got %s",
      type(state) == "table" and "a table without integer seed and offset" or type(state))
  end
  put(self, state)
  return self
end

function Generator:__tostring()
  local s = get(self)
  return ("ember.Generator(seed=%d, offset=%d%s)"):format(s.seed, s.offset, self._global and ", default" or "")
end

-- Runs fn(...) drawing from g (see the header); errors pass through.
local function under(g, fn, ...)
  if g._global then return fn(...) end
  local saved = core.get_rng_state()
  core.set_rng_state(g._state)
  local res = table.pack(pcall(fn, ...))
  g._state = core.get_rng_state()
  core.set_rng_state(saved)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- fn with a `generator` option: the last argument, when it is a plain
-- table holding `generator`, loses that key and fn runs under it.
local function takes_generator(name, fn)
  return guard(function(...)
    local n = select("#", ...)
    local last = n > 0 and select(n, ...) or nil
    if type(last) ~= "table" or getmetatable(last) ~= nil or last.generator == nil then return fn(...) end
    local g = last.generator
    if not is_generator(g) then
      fail(name, "generator must be an ember.Generator (ember.Generator()), got %s",
        core.is_tensor(g) and "a tensor" or type(g))
    end
    local rest = {}
    for k, v in pairs(last) do if k ~= "generator" then rest[k] = v end end
    local args = table.pack(...)
    args[n] = rest
    return under(g, fn, table.unpack(args, 1, n))
  end)
end

for _, name in ipairs { "rand", "randn", "randint", "randperm", "multinomial", "bernoulli", "normal" } do
  local old = core[name]
  local new_fn = takes_generator(name, old)
  core[name] = new_fn
  if rawequal(T[name], old) then T[name] = new_fn end -- x:multinomial(n, {generator = g}) too
end
for _, name in ipairs { "uniform_", "normal_" } do T[name] = takes_generator(name, T[name]) end

-- The default generator: ember.manual_seed's, as torch.default_generator.
local default = setmetatable({ device = "cpu", _global = true }, Generator)

core.Generator = setmetatable({}, {
  __call = function(_, device) return new(device) end,
  __index = Generator,
  __name = "ember.Generator",
})
core.default_generator = default

return { Generator = Generator, under = under, is_generator = is_generator, default = default }
