--- nn.ModuleDict([mods]): modules by name, registered in order, as
-- torch.nn.ModuleDict. The state dict names are "name.weight", as PyTorch.
--
-- `mods` is a list of `{name, module}` pairs (kept in that order) or a
-- table name -> module (a Lua table has no order: its names are sorted).
-- `dict.name` and `dict["name"]` read a module, `dict.name = m` adds or
-- replaces one, `dict.name = nil` removes it; `#dict`, `pairs(dict)` (name,
-- module, in order), `keys()`, `values()`, `items()`, `update()`, `pop()`,
-- `clear()` and `contains()` work. Names that are methods of ModuleDict (`keys`,
-- `train`, `to`, ...) or contain "." are refused, since they would hide the
-- method. A ModuleDict has no forward.
-- Errors name nn.ModuleDict: a bad name, a non-module value, a missing key in pop.
-- @usage local heads = nn.ModuleDict{ {"cls", nn.Linear(64, 10)}, {"box", nn.Linear(64, 4)} }
-- local h, out = ember.randn(2, 64), {}
-- for name, head in pairs(heads) do out[name] = head(h) end
-- print(heads.cls, #heads)   -- state dict: "cls.weight", "cls.bias", "box.weight", ...
-- @classmod nn.ModuleDict
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local list_of = require("ember._listing").list
local pair_list = require("ember.nn._iterable").pair_list

local ModuleDict = Module:extend("ModuleDict")

local function check_key(self, k, what, level)
  if type(k) ~= "string" or k == "" or k:find(".", 1, true) then
    error(("ModuleDict%s: a key must be a non-empty string without '.', got %s"):format(what, tostring(k)), level)
  end
  if ModuleDict[k] ~= nil or k == "training" or k:sub(1, 1) == "_" then
    error(("ModuleDict%s: the key '%s' would hide ModuleDict's own field or method of that name"):format(what, k), level)
  end
end

--- dict.name = m adds or replaces a module; nil removes it.
ModuleDict.__newindex = function(t, k, v)
  if rawget(t, "_reg") == nil or (type(k) == "string" and k:sub(1, 1) == "_") or k == "training" then
    return Module.__newindex(t, k, v)
  end
  check_key(t, k, "", 2)
  if v ~= nil and not Module.is_module(v) then
    error(("ModuleDict: '%s' must be a module, got %s"):format(k, type(v)), 2)
  end
  return Module.__newindex(t, k, v)
end

function ModuleDict:__len() return #self._children end

--- pairs(dict) walks (name, module) in registration order.
function ModuleDict:__pairs()
  local i = 0
  local names = {}
  for k, n in ipairs(self._children) do names[k] = n end
  return function()
    i = i + 1
    local n = names[i]
    if n ~= nil then return n, self._reg[n] end
  end, self, nil
end

--- Adds the modules of `mods` in order: a list of {name, module} pairs, a
-- table name -> module (sorted by name), or another ModuleDict.
-- @tparam table mods
-- @treturn ModuleDict self
function ModuleDict:update(mods)
  if type(mods) ~= "table" then error("ModuleDict.update: expected a table of modules, got " .. type(mods), 2) end
  local pairs_list = {}
  if getmetatable(mods) == ModuleDict then
    for n, m in pairs(mods) do pairs_list[#pairs_list + 1] = { n, m } end
  elseif Module.is_module(mods) then
    error("ModuleDict.update: expected a table of modules, got a module", 2)
  elseif #mods > 0 then
    for i, p in ipairs(mods) do
      if type(p) ~= "table" or Module.is_module(p) or #p ~= 2 then
        error(("ModuleDict.update: entry %d must be a {name, module} pair"):format(i), 2)
      end
      pairs_list[i] = p
    end
  else
    local names = {}
    for k in pairs(mods) do
      if type(k) ~= "string" then
        error(("ModuleDict.update: a key must be a string, got %s"):format(type(k)), 2)
      end
      names[#names + 1] = k
    end
    table.sort(names)
    for i, k in ipairs(names) do pairs_list[i] = { k, mods[k] } end
  end
  for _, p in ipairs(pairs_list) do
    check_key(self, p[1], ".update", 2)
    if not Module.is_module(p[2]) then
      error(("ModuleDict.update: '%s' must be a module, got %s"):format(p[1], type(p[2])), 2)
    end
  end
  for _, p in ipairs(pairs_list) do self:add_module(p[1], p[2]) end
  return self
end

function ModuleDict:__init(mods, ...)
  require("ember._errors").no_extra("nn.ModuleDict", { "modules" }, 1, mods, ...)
  if mods ~= nil then self:update(mods) end
end

--- The names, in order.
-- @treturn {string,...}
function ModuleDict:keys()
  local out = {}
  for i, n in ipairs(self._children) do out[i] = n end
  return list_of(out)
end

--- The modules, in order: every value, a module registered under two
-- names twice, as PyTorch's values().
-- @treturn {Module,...}
function ModuleDict:values()
  local out = {}
  for i, n in ipairs(self._children) do out[i] = self._reg[n] end
  return out
end

--- The {name, module} pairs, in order (ipairs gives the pairs; `for name, m in d:items() do` the two).
-- @treturn {{string, Module},...}
function ModuleDict:items()
  local out = {}
  for i, n in ipairs(self._children) do out[i] = { n, self._reg[n] } end
  return pair_list(out) -- also `for name, v in d:items() do`, as Python's loop
end

--- Whether a module is registered under `name`.
-- @string name
-- @treturn boolean
function ModuleDict:contains(name)
  for _, n in ipairs(self._children) do if n == name then return true end end
  return false
end

--- Removes and returns the module under `name`.
-- @string name
-- @treturn Module
function ModuleDict:pop(name)
  if not self:contains(name) then
    error(("ModuleDict.pop: no module named '%s' (keys: %s)"):format(tostring(name),
      table.concat(self._children, ", ")), 2)
  end
  local m = self._reg[name]
  Module.__newindex(self, name, nil)
  return m
end

--- Removes every module, as PyTorch's dict.clear(); returns self.
-- @treturn ModuleDict self
function ModuleDict:clear()
  for _, n in ipairs(table.move(self._children, 1, #self._children, 1, {})) do Module.__newindex(self, n, nil) end
  return self
end

--- A ModuleDict has no forward; call its modules in your own.
function ModuleDict:forward()
  error("ModuleDict.forward: a ModuleDict is not callable; call its modules (dict.name(x))", 2)
end

return ModuleDict
