--- nn.Sequential(m1, m2, ...) or nn.Sequential{m1, m2, ...}: applies the
-- modules in order. Children are named "1", "2", ... (1-based, as Torch7);
-- seq[i] (negative i counts from the end: seq[-1] is the last; seq[0] is
-- an error) and #seq work; seq:add(m) and seq:append(m) append, and
-- seq:insert(i, m), seq:extend(list) and seq:pop([i]) work as PyTorch's (1-based
-- positions; the children are renamed "1", "2", ... in their new order);
-- Torch7's seq:size(), seq:get(i) and seq:remove([i]) work too.
-- The modules come as a list: PyTorch's Sequential(OrderedDict(...)) of
-- named modules has no order in a Lua table (an error says so).
-- @usage local mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
-- print(mlp[1], #mlp)   --> Linear(in_features=4, out_features=8, bias=true)   3
-- @classmod nn.Sequential
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local torch_names = require "ember.nn._torch_names"

local Sequential = Module:extend("Sequential")

-- seq[i] finds child "i"; other keys as any module's (a subclass of
-- Sequential inherits this function as its __index).
Sequential.__index = function(t, k)
  if math.type(k) == "integer" then
    if k == 0 then
      error("Sequential: index 0: indices are 1-based (seq[1] is the first, seq[-1] the last; PyTorch's seq[0] "
        .. "is seq[1] here)", 2)
    end
    if k < 0 then -- from the end, as PyTorch's seq[-1]
      local name = t._children[#t._children + 1 + k]
      return name and t._reg[name] or nil
    end
    k = tostring(k)
  end
  return Module.__index(t, k)
end

--- seq[i] = m replaces the i-th module (negative i counts from the end), as
-- PyTorch's seq[i] = m; seq:add(m) appends.
Sequential.__newindex = function(t, k, v)
  if math.type(k) == "integer" then
    local n = #t._children
    local i = k < 0 and n + 1 + k or k
    if k == 0 then
      error("Sequential: index 0: indices are 1-based (seq[1] is the first, seq[-1] the last; PyTorch's seq[0] "
        .. "is seq[1] here)", 2)
    end
    if i < 1 or i > n then
      error(("Sequential: index %d is out of range for a Sequential of %d modules (seq:add(m) appends)")
        :format(k, n), 2)
    end
    if not Module.is_module(v) then
      error(("Sequential: seq[%d] must be a module, got %s"):format(k, type(v)), 2)
    end
    t._reg[t._children[i]] = v
    return
  end
  return Module.__newindex(t, k, v)
end

function Sequential:__len() return #self._children end

function Sequential:__init(...)
  local mods = { ... }
  if #mods == 1 and type(mods[1]) == "table" and getmetatable(mods[1]) == nil then mods = mods[1] end
  for k in pairs(mods) do
    if math.type(k) ~= "integer" then -- was: dropped without a word
      error(("Sequential: got a module named %s: a Lua table of names has no order (PyTorch's OrderedDict); "
        .. "give the modules as a list, or register named ones with add_module in a Module's __init"):format(
        type(k) == "string" and ("'" .. k .. "'") or tostring(k)), 3)
    end
  end
  for i, m in ipairs(mods) do
    if not Module.is_module(m) then
      error(("Sequential: argument %d is a %s, not a module"):format(i, type(m)), 3)
    end
    self:add(m)
  end
end

--- Appends a module; returns self (so calls chain).
-- @param m the module
function Sequential:add(m, ...)
  if not Module.is_module(m) then error("Sequential.add: expected a module, got " .. Module.describe_non_module(m), 2) end
  if (...) ~= nil then -- add(m, i): a position goes to insert(i, m)
    error("Sequential.add: takes one module (seq:insert(i, m) puts one at a 1-based position)", 2)
  end
  self:add_module(tostring(#self._children + 1), m)
  return self
end

--- Appends a module, as PyTorch's seq.append(m); returns self.
-- @tparam Module m
-- @treturn Sequential self
function Sequential:append(m)
  if not Module.is_module(m) then error("Sequential.append: expected a module, got " .. type(m), 2) end
  return self:add(m)
end

-- The modules in order; renames the children "1".."n" after `mods` (a
-- changed list of them).
local function modules_of(self)
  local mods = {}
  for k, n in ipairs(self._children) do mods[k] = self._reg[n] end
  return mods
end
local function renumber(self, mods)
  for _, n in ipairs(self._children) do self._reg[n] = nil end
  for i = #self._children, 1, -1 do self._children[i] = nil end
  for _, m in ipairs(mods) do self:add(m) end
end

--- Appends every module of a list (a Lua table, a Sequential or a
-- ModuleList), as PyTorch's seq.extend; returns self. On the class,
-- `nn.Sequential:extend("Name")` still makes a subclass (Module.extend).
-- @tparam table mods
-- @treturn Sequential self
function Sequential:extend(mods)
  if rawget(self, "_reg") == nil or type(mods) == "string" then return Module.extend(self, mods) end
  if type(mods) ~= "table" then error("Sequential.extend: expected a list of modules, got " .. type(mods), 2) end
  local list = {}
  for i = 1, #mods do list[i] = mods[i] end -- read first: mods may be self
  for i, m in ipairs(list) do
    if not Module.is_module(m) then error(("Sequential.extend: entry %d is a %s, not a module"):format(i, type(m)), 2) end
  end
  for _, m in ipairs(list) do self:add(m) end
  return self
end

--- Inserts a module before the one at 1-based position i (#seq + 1
-- appends; negative i counts from the end, as seq[-1]: insert(-1, m) puts m
-- before the last, as PyTorch's seq.insert(-1, m)); returns self.
-- @int i
-- @tparam Module m
-- @treturn Sequential self
function Sequential:insert(i, m)
  local n = #self._children
  if Module.is_module(i) and (m == nil or math.type(m) == "integer") then -- Torch7's insert(m [, i])
    error("Sequential.insert: takes the position first, as PyTorch's: seq:insert(i, m) (Torch7's insert(m, i)); "
      .. "seq:add(m) appends", 2)
  end
  if math.type(i) ~= "integer" then error("Sequential.insert: index must be an integer, got " .. tostring(i), 2) end
  local at = i < 0 and n + 1 + i or i
  if i == 0 or at < 1 or at > n + 1 then
    error(("Sequential.insert: index %d is out of range 1..%d (or -%d..-1)"):format(i, n + 1, n), 2)
  end
  if not Module.is_module(m) then error("Sequential.insert: expected a module, got " .. type(m), 2) end
  local mods = modules_of(self)
  table.insert(mods, at, m)
  renumber(self, mods)
  return self
end

--- Removes and returns the module at 1-based position i (default the
-- last; negative i counts from the end), as PyTorch's seq.pop.
-- @int[opt] i
-- @treturn Module
function Sequential:pop(i)
  local n = #self._children
  i = i or -1
  local at = math.type(i) == "integer" and (i < 0 and n + 1 + i or i) or 0
  if at < 1 or at > n then
    error(("Sequential.pop: index %s is out of range for a Sequential of %d modules"):format(tostring(i), n), 2)
  end
  local mods = modules_of(self)
  local m = table.remove(mods, at)
  renumber(self, mods)
  return m
end

--- Torch7's size(): the number of modules (#seq).
-- @treturn integer
function Sequential:size() return #self._children end

--- Torch7's get(i): the i-th module (seq[i]; negative i counts from the end).
-- @int i
-- @treturn Module
function Sequential:get(i)
  local m = math.type(i) == "integer" and i ~= 0 and self[i] or nil
  if m == nil then
    error(("Sequential.get: index %s is out of range for a Sequential of %d modules"):format(tostring(i), #self._children), 2)
  end
  return m
end

--- Torch7's remove([i]): removes and returns the module at i (default the
-- last), as `pop(i)`.
-- @int[opt] i
-- @treturn Module
function Sequential:remove(i)
  local n = #self._children
  local at = i == nil and n or (math.type(i) == "integer" and (i < 0 and n + 1 + i or i)) or 0
  if at < 1 or at > n then
    error(("Sequential.remove: index %s is out of range for a Sequential of %d modules"):format(tostring(i), n), 2)
  end
  return self:pop(at)
end

--- x through each module in turn.
-- @param x the first module's input
function Sequential:forward(x, ...)
  for _, n in ipairs(self._children) do x = self[n](x, ...) end
  return x
end

--- PyTorch's state-dict numbering loads as it is: a state dict whose names
-- start at "0." (torch.nn.Sequential's children "0", "1", ...) is read
-- 1-based ("0.weight" -> "1.weight"), then each child maps its own part
-- (Module.upgrade_state_dict).
-- @tparam table sd name -> tensor
-- @string[opt] prefix as Module.upgrade_state_dict's
-- @treturn table
-- @treturn integer how many earlier-ember names were mapped
function Sequential:upgrade_state_dict(sd, prefix)
  return Module.upgrade_state_dict(self, torch_names.one_based(self, sd), prefix)
end

--- PyTorch's numbering for `torch_state_dict`: "1.weight" -> "0.weight".
-- @tparam table sd
-- @treturn table
function Sequential:to_torch_names(sd) return torch_names.zero_based(sd) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Sequential.forward = require("ember._errors").wrap(Sequential.forward)

return Sequential
