-- ember/data/_transforms_util.lua (internal): what the transforms of
-- ember.data.transforms share: the class of a transform (a callable object
-- with torchvision's printout), the reading of their arguments (torchvision's
-- positional order, one table of names, or both), the checks of an image,
-- the random draws (from `generator` or ember's default generator) and
-- Python's way of printing and rounding numbers.
local errors = require "ember._errors"
local gen = require "ember._generator"

local M = {}
M.raise = errors.raise -- at the user's line
local raise = errors.raise

function M.ember() return require "ember" end

function M.is_tensor(v)
  local mt = getmetatable(v)
  return mt ~= nil and mt.__name == "ember.Tensor"
end
local is_tensor = M.is_tensor

function M.shape_str(t) return errors.shape_str(t) end

-- ---- printing as Python does ----------------------------------------------

-- Python's repr of a number: integers as they are, floats in the fewest
-- digits that read back to the same double, with ".0" when integral.
function M.num(v)
  if math.type(v) == "integer" then return tostring(v) end
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" elseif v == -math.huge then return "-inf" end
  local s
  for p = 1, 17 do
    s = ("%." .. p .. "g"):format(v)
    if tonumber(s) == v then break end
  end
  if not s:find("[%.eEn]") then s = s .. ".0" end
  return s
end

-- A value as torchvision's repr prints it: nil None, booleans True/False,
-- a list as a tuple (or a Python list with brackets = "[]").
function M.py(v, brackets)
  if v == nil then return "None" end
  if type(v) == "boolean" then return v and "True" or "False" end
  if type(v) == "number" then return M.num(v) end
  if type(v) == "table" and not is_tensor(v) and getmetatable(v) == nil then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = M.py(x) end
    local open, close = "(", ")"
    if brackets == "[]" then open, close = "[", "]" end
    if #parts == 1 and open == "(" then return "(" .. parts[1] .. ",)" end
    return open .. table.concat(parts, ", ") .. close
  end
  return tostring(v)
end

-- Python's round(): halves go to the even neighbour (round(2.5) == 2).
function M.round(x)
  local f = math.floor(x)
  local d = x - f
  if d > 0.5 or (d == 0.5 and f % 2 ~= 0) then f = f + 1 end
  return math.tointeger(f) or f
end

-- ---- the class of a transform ------------------------------------------------

-- Indents every line but the first of s by four spaces (a nested printout).
function M.indent(s) return (tostring(s):gsub("\n", "\n    ")) end

-- A transform class: `Cls(...)` makes one (Cls.new), `t(x)` is
-- `t:forward(x)`, and tostring(t) is t:_repr() (torchvision's printout).
function M.class(name)
  local c = {}
  c.__index = c
  c.__name = "data.transforms." .. name
  c.name = name
  c.__call = function(self, ...) return self:forward(...) end
  c.__tostring = function(self) return self:_repr() end
  return setmetatable(c, { __call = function(cls, ...) return cls.new(...) end })
end

-- Whether v is a transform: a function, or a table or userdata that can be called.
function M.is_callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return mt ~= nil and type(mt) == "table" and mt.__call ~= nil
end

-- ---- arguments -----------------------------------------------------------

-- A table of options by name: plain, not a list, and with a string key.
local function is_options(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil or rawget(v, 1) ~= nil then return false end
  return next(v) ~= nil and type(next(v)) == "string"
end

-- The arguments of who: given in torchvision's positional order `names`,
-- or by name in a last table of options (or both; a name given twice is an
-- error), plus the options only by name in `named` (a list, e.g.
-- {"generator"}). Returns the table name -> value.
function M.args(who, names, named, ...)
  local n = select("#", ...)
  local o, pos = {}, {}
  local allowed = {}
  for _, k in ipairs(names) do allowed[k] = true end
  for _, k in ipairs(named or {}) do allowed[k] = true end
  for i = 1, n do
    local v = select(i, ...)
    -- the last table, when it holds names or is empty ({generator = g} with g nil)
    if i == n and (is_options(v) or (type(v) == "table" and getmetatable(v) == nil and next(v) == nil)) then
      for k, val in pairs(v) do
        if not allowed[k] then
          local all = {}
          for _, a in ipairs(names) do all[#all + 1] = a end
          for _, a in ipairs(named or {}) do all[#all + 1] = a end
          raise("%s: unknown option '%s' (options: %s)", who, tostring(k), table.concat(all, ", "))
        end
        if pos[k] then raise("%s: %s is given twice, by position and by name", who, k) end
        o[k] = val
      end
    elseif i > #names then
      raise("%s: %d arguments given, but it takes at most %d (%s) before its table of options", who, n, #names,
        table.concat(names, ", "))
    else
      o[names[i]], pos[names[i]] = v, v ~= nil
    end
  end
  if o.generator ~= nil and not gen.is_generator(o.generator) then
    raise("%s: generator must be an ember.Generator (ember.Generator()), got %s", who,
      is_tensor(o.generator) and "a tensor" or type(o.generator))
  end
  return o
end

-- A probability p in [0, 1] (default d).
function M.prob(who, p, d)
  if p == nil then return d end
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    raise("%s: p must be a probability between 0 and 1, got %s", who, tostring(p))
  end
  return p
end

local function positive_int(v) return math.type(v) == "integer" and v > 0 end

-- A size {h, w}: an integer (a square) or a list of one or two positive integers.
function M.size2(who, name, v)
  if positive_int(v) then return { v, v } end
  if type(v) == "table" and not is_tensor(v) and (#v == 1 or #v == 2) then
    local h, w = v[1], v[#v]
    if positive_int(h) and positive_int(w) then return { h, w } end
  end
  raise("%s: %s must be a positive integer or a list {h, w} of them, got %s", who, name,
    type(v) == "table" and M.py(v) or tostring(v))
end

-- An interval {lo, hi}: a pair of numbers with lo <= hi.
function M.pair(who, name, v, lo_min)
  if type(v) ~= "table" or #v ~= 2 or type(v[1]) ~= "number" or type(v[2]) ~= "number" or not (v[1] <= v[2]) then
    raise("%s: %s must be a pair {min, max} of numbers with min <= max, got %s", who, name,
      type(v) == "table" and M.py(v) or tostring(v))
  end
  if lo_min ~= nil and v[1] < lo_min then
    raise("%s: %s must be >= %s, got %s", who, name, M.num(lo_min), M.py(v))
  end
  return { v[1], v[2] }
end

-- The image dims of x: checks it is a tensor with at least `min_dims`
-- dims ([H, W] 2, [C, H, W] 3; a batch [N, C, H, W] has one more).
-- Returns C (1 for a 2-d x), H, W.
function M.image(who, x, min_dims)
  if not is_tensor(x) then
    raise("%s: expected an image tensor [C, H, W] or a batch [N, C, H, W], got %s", who, type(x))
  end
  min_dims = min_dims or 2
  if x.ndim < min_dims then
    raise("%s: expected an image [%s] or a batch [N, C, H, W], got shape %s%s", who,
      min_dims == 3 and "C, H, W" or "H, W", M.shape_str(x),
      x.ndim == 2 and " (give a channel dim: x:unsqueeze(1))" or "")
  end
  local s = x.shape
  return x.ndim >= 3 and s[x.ndim - 2] or 1, s[x.ndim - 1], s[x.ndim]
end

-- Checks x is a floating-point image (the color transforms and Normalize).
function M.float_image(who, x)
  local c, h, w = M.image(who, x, 3)
  if not x:is_floating_point() then
    raise("%s: expects a floating-point image (values in [0, 1]), got %s; convert it first with "
      .. "transforms.ConvertImageDtype(\"float32\")", who, x.dtype)
  end
  return c, h, w
end

-- ---- random draws ------------------------------------------------------------
-- From g, an ember.Generator, or (nil) ember's default generator, in
-- float32 as torch.rand / torch.empty(1).uniform_ draw.

local function opts(g) if g then return { generator = g } end end

-- A float in [0, 1).
function M.rand(g) return M.ember().rand(1, opts(g)):item() end

-- A float in [a, b).
function M.uniform(g, a, b)
  local t = M.ember().empty(1)
  if g then t:uniform_(a, b, { generator = g }) else t:uniform_(a, b) end
  return t:item()
end

-- An integer in [lo, hi) (torch.randint(lo, hi, (1,))).
function M.randint(g, lo, hi) return M.ember().randint(lo, hi, { 1 }, opts(g)):item() end

-- A random order of 1..n, as a Lua list.
function M.randperm(g, n) return M.ember().randperm(n, opts(g)):totable() end

-- Normal draws of the given shape (float32).
function M.randn(g, shape) return M.ember().randn(shape, opts(g)) end

return M
