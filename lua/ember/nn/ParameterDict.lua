--- nn.ParameterDict([params]): parameters by name, registered in order, as
-- torch.nn.ParameterDict. The state dict names are the keys ("alpha", "heads.alpha").
--
-- `params` is a list of `{name, tensor}` pairs (kept in that order) or a table name -> tensor
-- (a Lua table has no order: its names are sorted, as PyTorch sorts a plain dict's). A
-- tensor that is not a parameter becomes one (`nn.Parameter(t)`: the same storage, requires
-- grad). `dict.name` and `dict["name"]` read a parameter, `dict.name = t` adds or replaces one,
-- `dict.name = nil` removes it; `#dict`, `pairs(dict)` (name, parameter, in order), `keys()`,
-- `values()`, `items()`, `update()`, `get()`, `pop()`, `clear()` and `contains()` work; `parameters()` and
-- `state_dict()` see them. Names that are methods of ParameterDict (`keys`, `train`, `to`, ...)
-- or contain "." are refused, since they would hide the method. A ParameterDict has no forward.
-- Errors name nn.ParameterDict: a bad name, a non-tensor or integer value, a missing key in pop.
-- @usage local scales = nn.ParameterDict{ {"text", ember.ones(8)}, {"image", ember.zeros(8)} }
-- print(scales:keys(), #scales:parameters())   --> {"text", "image"}   2
-- local y = ember.randn(2, 8) * scales.text
-- @classmod nn.ParameterDict
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local container = require "ember.nn._param_container"
local list_of = require("ember._listing").list
local pair_list = require("ember.nn._iterable").pair_list

local ParameterDict = Module:extend("ParameterDict")

local function check_key(k, what)
  if type(k) ~= "string" or k == "" or k:find(".", 1, true) then
    error(("ParameterDict%s: a key must be a non-empty string without '.', got %s"):format(what, tostring(k)), 3)
  end
  if ParameterDict[k] ~= nil or k == "training" or k:sub(1, 1) == "_" then
    error(("ParameterDict%s: the key '%s' would hide ParameterDict's own field or method of that name"):format(what, k), 3)
  end
end

--- dict.name = t adds or replaces a parameter; nil removes it.
ParameterDict.__newindex = function(t, k, v)
  if rawget(t, "_reg") == nil or (type(k) == "string" and k:sub(1, 1) == "_") or k == "training" then
    return Module.__newindex(t, k, v)
  end
  check_key(k, "")
  if v == nil then return Module.__newindex(t, k, nil) end
  t:register_parameter(k, container.as_parameter("ParameterDict", ("'%s'"):format(k), v))
end

function ParameterDict:__len() return #self._params end

--- pairs(dict) walks (name, parameter) in registration order.
function ParameterDict:__pairs()
  local i = 0
  local names = table.move(self._params, 1, #self._params, 1, {})
  return function()
    i = i + 1
    local n = names[i]
    if n ~= nil then return n, self._reg[n] end
  end, self, nil
end

--- Adds the parameters of `params` in order: a list of {name, tensor} pairs, a table
-- name -> tensor (sorted by name), or another ParameterDict. A name already there is replaced.
-- @tparam table params
-- @treturn ParameterDict self
function ParameterDict:update(params)
  if type(params) ~= "table" or Module.is_tensor(params) or Module.is_module(params) and getmetatable(params) ~= ParameterDict then
    error("ParameterDict.update: expected a table of tensors, got "
      .. (Module.is_tensor(params) and "a tensor" or Module.is_module(params) and "a module" or type(params)), 2)
  end
  local list = {}
  if getmetatable(params) == ParameterDict then
    for n, p in pairs(params) do list[#list + 1] = { n, p } end
  elseif #params > 0 then
    for i, pair in ipairs(params) do
      if type(pair) ~= "table" or Module.is_tensor(pair) or #pair ~= 2 then
        error(("ParameterDict.update: entry %d must be a {name, tensor} pair"):format(i), 2)
      end
      list[i] = pair
    end
  else
    local names = {}
    for k in pairs(params) do
      if type(k) ~= "string" then error(("ParameterDict.update: a key must be a string, got %s"):format(type(k)), 2) end
      names[#names + 1] = k
    end
    table.sort(names)
    for i, k in ipairs(names) do list[i] = { k, params[k] } end
  end
  for i, pair in ipairs(list) do
    check_key(pair[1], ".update")
    list[i] = { pair[1], container.as_parameter("ParameterDict.update", ("'%s'"):format(pair[1]), pair[2]) }
  end
  for _, pair in ipairs(list) do self:register_parameter(pair[1], pair[2]) end
  return self
end

function ParameterDict:__init(params, ...)
  require("ember._errors").no_extra("nn.ParameterDict", { "parameters" }, 1, params, ...)
  if params ~= nil then self:update(params) end
end

--- The names, in order.
-- @treturn {string,...}
function ParameterDict:keys() return list_of(table.move(self._params, 1, #self._params, 1, {})) end

--- The parameters, in order.
-- @treturn {Tensor,...}
function ParameterDict:values()
  local out = {}
  for i, n in ipairs(self._params) do out[i] = self._reg[n] end
  return out
end

--- The {name, parameter} pairs, in order (ipairs gives the pairs; `for name, p in d:items() do` the two).
-- @treturn {{string, Tensor},...}
function ParameterDict:items()
  local out = {}
  for i, n in ipairs(self._params) do out[i] = { n, self._reg[n] } end
  return pair_list(out) -- also `for name, v in d:items() do`, as Python's loop
end

--- Whether a parameter is registered under `name`.
-- @string name
-- @treturn boolean
function ParameterDict:contains(name)
  for _, n in ipairs(self._params) do if n == name then return true end end
  return false
end

--- The parameter under `name`, or `default` (nil) when there is none, as dict.get.
-- @string name
-- @param[opt] default
-- @return Tensor or default
function ParameterDict:get(name, default)
  if self:contains(name) then return self._reg[name] end
  return default
end

--- Removes and returns the parameter under `name`.
-- @string name
-- @treturn Tensor
function ParameterDict:pop(name)
  if not self:contains(name) then
    error(("ParameterDict.pop: no parameter named '%s' (keys: %s)"):format(tostring(name),
      table.concat(self._params, ", ")), 2)
  end
  local p = self._reg[name]
  Module.__newindex(self, name, nil)
  return p
end

--- Removes every parameter, as PyTorch's dict.clear(); returns self.
-- @treturn ParameterDict self
function ParameterDict:clear()
  for _, n in ipairs(table.move(self._params, 1, #self._params, 1, {})) do Module.__newindex(self, n, nil) end
  return self
end

--- A ParameterDict has no forward; use its parameters in your own.
function ParameterDict:forward()
  error("ParameterDict.forward: a ParameterDict is not callable; use its parameters (dict.name)", 2)
end

--- PyTorch's printing: a line per parameter, "(name): Parameter containing: [float32 of size 3x4]".
function ParameterDict:__tostring() return container.repr(self) end

return ParameterDict
