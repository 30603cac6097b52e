-- nn/_param_container.lua (internal): what nn.ParameterList and nn.ParameterDict share: a value
-- made a parameter as torch.nn.Parameter makes one (a leaf that requires grad is kept, the same
-- tensor; any other floating-point tensor becomes nn.Parameter(t), sharing its storage), and
-- PyTorch's printing of the parameters, one "(name): Parameter containing: [float32 of size 3x4]"
-- line each.
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"

local M = {}

-- t as a parameter; `who` and `what` name the container and the entry in errors.
function M.as_parameter(who, what, t)
  if not ember.is_tensor(t) then error(("%s: %s must be a tensor, got %s"):format(who, what, type(t)), 3) end
  if t.requires_grad and t.is_leaf then return t end
  if not t:is_floating_point() then
    error(("%s: %s must be a floating-point tensor (a parameter requires grad), got %s"):format(who, what, t.dtype), 3)
  end
  return require("ember.nn.Parameter").Parameter(t)
end

-- The container as PyTorch prints it: `Name(` and a line per parameter, or `Name()` when empty.
function M.repr(self)
  if #self._params == 0 then return self.__name .. "()" end
  local lines = { self.__name .. "(" }
  for _, n in ipairs(self._params) do
    local p = self._reg[n]
    local device = p.device ~= "cpu" and (" (" .. tostring(p.device) .. ")") or ""
    lines[#lines + 1] = ("    (%s): Parameter containing: [%s of size %s%s]"):format(n, p.dtype,
      table.concat(p.shape, "x"), device)
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

return M
