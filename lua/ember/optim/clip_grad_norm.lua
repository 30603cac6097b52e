--- optim.clip_grad_norm(params, max_norm [, norm_type=2]) -> total norm
-- (a number), as torch.nn.utils.clip_grad_norm_: the norm of all gradients
-- together; when it exceeds max_norm every gradient is scaled in place by
-- max_norm / (norm + 1e-6). norm_type: any p > 0 (the p-norm, 2 by
-- default) or math.huge (the max abs value).
-- params: a list of tensors, one tensor or a module. Parameters without a gradient are
-- skipped; with none at all the norm is 0.
-- @module optim.clip_grad_norm
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local core = require "ember.core"

local function clip_grad_norm(params, max_norm, norm_type)
  norm_type = norm_type or 2
  if type(max_norm) ~= "number" or not (max_norm >= 0) then -- NaN too
    error("clip_grad_norm: max_norm must be a number >= 0, got " .. tostring(max_norm), 2)
  end
  if type(norm_type) ~= "number" or not (norm_type > 0) then
    error("clip_grad_norm: norm_type must be a number > 0 or math.huge, got " .. tostring(norm_type), 2)
  end
  local inf = norm_type == math.huge
  if core.is_tensor(params) then
    params = { params } -- one tensor, as torch's
  elseif type(params) ~= "table" then
    error("clip_grad_norm: params must be a list of tensors, a tensor or a module, got " .. type(params), 2)
  elseif params.parameters and getmetatable(params) then
    params = params:parameters()
  end
  local grads = {}
  for _, p in ipairs(params) do
    local g = p.grad
    if g ~= nil then grads[#grads + 1] = g end
  end
  if #grads == 0 then return 0 end
  local total
  if norm_type == 2 then
    -- one C call: each gradient's squares summed in one pass, in float64
    total = math.sqrt(core._sum_squares(grads))
  else
    total = ember.no_grad(function()
      local acc
      for _, g in ipairs(grads) do
        -- per-tensor partial results in float64, one host sync at the end
        local part
        if inf then part = g:abs():max():double()
        elseif norm_type == 1 then part = g:abs():sum():double()
        else part = (g:double():abs() ^ norm_type):sum() end
        if acc == nil then acc = part
        elseif inf then acc = acc:maximum(part)
        else acc = acc + part end
      end
      local v = acc:item()
      if inf or norm_type == 1 then return v end
      return v ^ (1 / norm_type)
    end)
  end
  local coef = max_norm / (total + 1e-6)
  if coef < 1 then
    ember.no_grad(function() for _, g in ipairs(grads) do g:mul_(coef) end end)
  end
  return total
end

return clip_grad_norm
