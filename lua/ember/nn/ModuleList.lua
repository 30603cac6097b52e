--- nn.ModuleList([{m1, m2, ...}]): a list of modules, registered in order, as
-- torch.nn.ModuleList (also from another ModuleList or an nn.Sequential: the
-- same modules, as PyTorch's ModuleList(iterable)). Indexing is **1-based** (`list[1]` is the first),
-- while the children are **named "0", "1", ...** as PyTorch names them, so
-- state dicts match PyTorch's ("0.weight", "layers.3.bias") and checkpoints
-- move between the two without renaming. (`nn.Sequential` names its
-- children "1", "2", ... as Torch7 did.)
--
-- `#list`, `list[i]` (negative i counts from the end), `list[i] = m`
-- (replaces), `ipairs(list)` and `pairs(list)` (1-based index, module) work;
-- `append`, `extend`, `insert` and `pop` change it. A ModuleList has no
-- forward: call its modules in your own forward.
-- Errors name nn.ModuleList: a non-module argument, an index out of range
-- in an assignment or insert, list[0] (indices are 1-based). Reading
-- list[i] past the end gives nil, as a Lua list does (so that ipairs
-- stops there), not PyTorch's IndexError.
-- @usage local layers = nn.ModuleList()
-- for i = 1, 4 do layers:append(nn.Linear(16, 16)) end
-- local x = ember.randn(2, 16)
-- for _, layer in ipairs(layers) do x = layer(x):relu() end
-- print(#layers, layers[1])   --> 4   Linear(in_features=16, ...)
-- -- state dict names: "0.weight", "0.bias", ..., "3.bias"
-- @classmod nn.ModuleList
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"

local ModuleList = Module:extend("ModuleList")

-- The child name of 1-based index i, or nil when i is out of range
-- (negative i counts from the end).
local function child_name(self, i)
  local n = #self._children
  if i < 0 then i = n + 1 + i end
  if i < 1 or i > n then return nil end
  return self._children[i]
end

--- list[i] is the i-th module (1-based); other keys as any module's.
ModuleList.__index = function(t, k)
  if math.type(k) == "integer" then
    if k == 0 then
      error("ModuleList: index 0: indices are 1-based (list[1] is the first, list[-1] the last; PyTorch's list[0] "
        .. "is list[1] here)", 2)
    end
    local name = child_name(t, k)
    return name and t._reg[name] or nil
  end
  return Module.__index(t, k)
end

--- list[i] = m replaces the i-th module (1 <= i <= #list; #list + 1 appends).
ModuleList.__newindex = function(t, k, v)
  if math.type(k) == "integer" then
    if k == #t._children + 1 then return t:append(v) end
    local name = child_name(t, k)
    if not name then
      error(("ModuleList: index %d is out of range for a list of %d modules"):format(k, #t._children), 2)
    end
    if not Module.is_module(v) then
      error(("ModuleList: list[%d] must be a module, got %s"):format(k, type(v)), 2)
    end
    t._reg[name] = v
    return
  end
  return Module.__newindex(t, k, v)
end

function ModuleList:__len() return #self._children end

--- pairs(list) walks (i, module) in order, as ipairs.
function ModuleList:__pairs()
  local i = 0
  return function()
    i = i + 1
    local m = self[i]
    if m ~= nil then return i, m end
  end, self, nil
end

-- Renames the children "0".."n-1" after an insertion or removal, in order.
local function renumber(self, mods)
  for _, n in ipairs(self._children) do self._reg[n] = nil end
  for i = #self._children, 1, -1 do self._children[i] = nil end
  for i, m in ipairs(mods) do self:add_module(tostring(i - 1), m) end
end

local function check_module(m, what)
  if not Module.is_module(m) then error(("ModuleList.%s: expected a module, got %s"):format(what, Module.describe_non_module(m)), 3) end
end

function ModuleList:__init(mods, ...)
  require("ember._errors").no_extra("nn.ModuleList", { "modules" }, 1, mods, ...)
  if mods == nil then return end
  if Module.is_module(mods) and mods:isinstance({ ModuleList, require "ember.nn.Sequential" }) then
    -- another list's modules, as PyTorch's ModuleList(iterable): the same modules, not copies
    local list = {}
    for i = 1, #mods do list[i] = mods[i] end
    mods = list
  end
  if type(mods) ~= "table" or Module.is_module(mods) then
    error("ModuleList: expected a table of modules (or a ModuleList or Sequential), got "
      .. (Module.is_module(mods) and "a module (" .. mods.__name .. ")" or type(mods)), 2)
  end
  for i, m in ipairs(mods) do
    if not Module.is_module(m) then
      error(("ModuleList: entry %d is a %s, not a module"):format(i, type(m)), 2)
    end
    self:append(m)
  end
end

--- Appends a module (child name "#list - 1"); returns self so calls chain.
-- @tparam Module m
-- @treturn ModuleList self
function ModuleList:append(m)
  check_module(m, "append")
  self:add_module(tostring(#self._children), m)
  return self
end

--- Appends every module of a list (a Lua table or another ModuleList).
-- On the class, `nn.ModuleList:extend("Name")` makes a subclass (Module.extend).
-- @tparam table mods
-- @treturn ModuleList self
function ModuleList:extend(mods)
  -- on the class, or with a name: a subclass (Module.extend), as every class's extend
  if rawget(self, "_reg") == nil or type(mods) == "string" then return Module.extend(self, mods) end
  if type(mods) ~= "table" then error("ModuleList.extend: expected a list of modules, got " .. type(mods), 2) end
  local list = {}
  for i = 1, #mods do list[i] = mods[i] end -- read first: mods may be self
  for _, m in ipairs(list) do check_module(m, "extend") end
  for _, m in ipairs(list) do self:append(m) end
  return self
end

--- Inserts a module before the one at 1-based position i (#list + 1
-- appends; negative i counts from the end, as list[-1]: insert(-1, m) puts m
-- before the last, as Python's list.insert); the children are renamed "0",
-- "1", ... in their new order.
-- @int i
-- @tparam Module m
-- @treturn ModuleList self
function ModuleList:insert(i, m)
  local n = #self._children
  if math.type(i) ~= "integer" then error("ModuleList.insert: index must be an integer, got " .. tostring(i), 2) end
  local given = i
  if i < 0 then i = n + 1 + i end
  if given == 0 or i < 1 or i > n + 1 then
    error(("ModuleList.insert: index %d is out of range 1..%d (or -%d..-1)"):format(given, n + 1, n), 2)
  end
  check_module(m, "insert")
  local mods = {}
  for k = 1, n do mods[k] = self[k] end
  table.insert(mods, i, m)
  renumber(self, mods)
  return self
end

--- Removes and returns the module at 1-based position i (default the last).
-- @int[opt] i
-- @treturn Module
function ModuleList:pop(i)
  local n = #self._children
  i = i or n
  local name = math.type(i) == "integer" and child_name(self, i)
  if not name then
    error(("ModuleList.pop: index %s is out of range for a list of %d modules"):format(tostring(i), n), 2)
  end
  if i < 0 then i = n + 1 + i end
  local mods = {}
  for k = 1, n do mods[k] = self[k] end
  local m = table.remove(mods, i)
  renumber(self, mods)
  return m
end

--- A ModuleList has no forward; iterate over it in your own.
function ModuleList:forward()
  error("ModuleList.forward: a ModuleList is not callable; call its modules (for _, m in ipairs(list) do ... end)", 2)
end

return ModuleList
