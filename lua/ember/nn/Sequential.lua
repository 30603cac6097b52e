--- nn.Sequential(m1, m2, ...) or nn.Sequential{m1, m2, ...}: applies the
-- modules in order. Children are named "1", "2", ... (1-based, as Torch7);
-- seq[i] (negative i counts from the end: seq[-1] is the last; seq[0] is
-- an error) and #seq work, and seq:add(m) appends.
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
  for i, m in ipairs(mods) do
    if not Module.is_module(m) then
      error(("Sequential: argument %d is a %s, not a module"):format(i, type(m)), 3)
    end
    self:add(m)
  end
end

--- Appends a module; returns self (so calls chain).
-- @param m the module
function Sequential:add(m)
  self:add_module(tostring(#self._children + 1), m)
  return self
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
