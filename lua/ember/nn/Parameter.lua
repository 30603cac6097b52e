--- nn.Parameter(tensor [, requires_grad = true]): the tensor as a leaf that
-- requires grad (detached from any graph, the same storage), as
-- torch.nn.Parameter; assigned to a module's field it becomes a parameter,
-- as any tensor with requires_grad does (`self.w = nn.Parameter(...)`).
-- @usage local Scale = nn.Module:extend("Scale")
-- function Scale:__init(n) self.gain = nn.Parameter(ember.ones(n)) end
-- function Scale:forward(x) return x * self.gain end
-- local m = Scale(4)
-- print(#m:parameters())   --> 1
-- @module nn.Parameter
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"

local M = {}

--- The tensor as a parameter.
-- @tparam Tensor t a floating-point tensor (any when requires_grad is false)
-- @bool[opt=true] requires_grad
-- @treturn Tensor a leaf sharing t's storage
function M.Parameter(t, requires_grad)
  if not ember.is_tensor(t) then error("nn.Parameter: expected a tensor, got " .. type(t), 2) end
  local p = t:detach()
  if requires_grad ~= false then
    if not p:is_floating_point() then
      error("nn.Parameter: only floating-point tensors can require grad, got " .. p.dtype, 2)
    end
    p:requires_grad_(true)
  end
  return p
end

return M
