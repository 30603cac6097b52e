--- nn.ParameterList([{p1, p2, ...}]): a list of parameters, registered in order, as
-- torch.nn.ParameterList. Indexing is **1-based** (`list[1]` is the first), while the
-- parameters are **named "0", "1", ...** as PyTorch names them, so state dicts match
-- PyTorch's ("0", "weights.3"). A tensor that is not a parameter becomes one
-- (`nn.Parameter(t)`: the same storage, requires grad), as in PyTorch.
--
-- `#list`, `list[i]` (negative i counts from the end), `list[i] = p` (replaces),
-- `ipairs(list)` and `pairs(list)` (1-based index, parameter) work; `append` and `extend`
-- add; `parameters()` and `state_dict()` see them. A ParameterList has no forward.
-- Errors name nn.ParameterList: a non-tensor or integer entry, an index out of range in an
-- assignment, list[0] (indices are 1-based).
-- @usage local gains = nn.ParameterList()
-- for i = 1, 3 do gains:append(ember.ones(4) * i) end
-- local x = ember.randn(2, 4)
-- for _, g in ipairs(gains) do x = x * g end
-- print(#gains, #gains:parameters(), gains[1].requires_grad)   --> 3   3   true
-- -- state dict names: "0", "1", "2"
-- @classmod nn.ParameterList
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local container = require "ember.nn._param_container"

local ParameterList = Module:extend("ParameterList")

-- The parameter name of 1-based index i, or nil when i is out of range
-- (negative i counts from the end).
local function param_name(self, i)
  local n = #self._params
  if i < 0 then i = n + 1 + i end
  if i < 1 or i > n then return nil end
  return self._params[i]
end

--- list[i] is the i-th parameter (1-based); other keys as any module's.
ParameterList.__index = function(t, k)
  if math.type(k) == "integer" then
    if k == 0 then
      error("ParameterList: index 0: indices are 1-based (list[1] is the first, list[-1] the last; PyTorch's "
        .. "list[0] is list[1] here)", 2)
    end
    local name = param_name(t, k)
    return name and t._reg[name] or nil
  end
  return Module.__index(t, k)
end

--- list[i] = p replaces the i-th parameter (1 <= i <= #list; #list + 1 appends).
ParameterList.__newindex = function(t, k, v)
  if math.type(k) == "integer" then
    if k == #t._params + 1 then return t:append(v) end
    local name = param_name(t, k)
    if not name then
      error(("ParameterList: index %d is out of range for a list of %d parameters"):format(k, #t._params), 2)
    end
    t:register_parameter(name, container.as_parameter("ParameterList", ("list[%d]"):format(k), v))
    return
  end
  return Module.__newindex(t, k, v)
end

function ParameterList:__len() return #self._params end

--- pairs(list) walks (i, parameter) in order, as ipairs.
function ParameterList:__pairs()
  local i = 0
  return function()
    i = i + 1
    local p = self[i]
    if p ~= nil then return i, p end
  end, self, nil
end

function ParameterList:__init(params, ...)
  require("ember._errors").no_extra("nn.ParameterList", { "values" }, 1, params, ...)
  if params == nil then return end
  if type(params) ~= "table" or Module.is_tensor(params) or Module.is_module(params) then
    error("ParameterList: expected a table of tensors, got "
      .. (Module.is_tensor(params) and "a tensor" or Module.is_module(params) and "a module" or type(params)), 2)
  end
  self:extend(params)
end

--- Appends a parameter (name "#list - 1"); returns self so calls chain.
-- @tparam Tensor p a parameter, or a floating-point tensor made one
-- @treturn ParameterList self
function ParameterList:append(p)
  p = container.as_parameter("ParameterList.append", "the value", p)
  self:register_parameter(tostring(#self._params), p)
  return self
end

--- Appends every parameter of a list (a Lua table or another ParameterList).
-- @tparam table params
-- @treturn ParameterList self
function ParameterList:extend(params)
  if type(params) ~= "table" or Module.is_tensor(params) then
    error("ParameterList.extend: expected a list of tensors, got " .. (Module.is_tensor(params) and "a tensor" or type(params)), 2)
  end
  local list = {}
  for i = 1, #params do
    list[i] = container.as_parameter("ParameterList", ("entry %d"):format(i), params[i]) -- read first: params may be self
  end
  for _, p in ipairs(list) do self:append(p) end
  return self
end

--- A ParameterList has no forward; use its parameters in your own.
function ParameterList:forward()
  error("ParameterList.forward: a ParameterList is not callable; use its parameters (for _, p in ipairs(list) do ... end)", 2)
end

--- PyTorch's printing: a line per parameter, "(0): Parameter containing: [float32 of size 3x4]".
function ParameterList:__tostring() return container.repr(self) end

return ParameterList
