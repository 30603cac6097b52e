--- optim.clip_grad_value(params, clip_value), as
-- torch.nn.utils.clip_grad_value_: every gradient is clamped in place to
-- [-clip_value, clip_value]. params: a list of tensors, one tensor or a module;
-- parameters without a gradient are skipped.
-- @module optim.clip_grad_value
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"

local function clip_grad_value(params, clip_value)
  if type(clip_value) ~= "number" or not (clip_value >= 0) then -- NaN too
    error("clip_grad_value: clip_value must be a number >= 0, got " .. tostring(clip_value), 2)
  end
  if type(params) ~= "table" and type(params) ~= "userdata" then
    error("clip_grad_value: params must be a list of tensors, a tensor or a module, got " .. type(params), 2)
  end
  if require("ember.core").is_tensor(params) then
    params = { params } -- one tensor, as torch's
  elseif params.parameters and getmetatable(params) then
    params = params:parameters()
  end
  for i, p in ipairs(params) do
    if not require("ember.core").is_tensor(p) then
      error(("clip_grad_value: params[%d] is a %s, not a tensor"):format(i, type(p)), 2)
    end
  end
  ember.no_grad(function()
    for _, p in ipairs(params) do
      local g = p.grad
      if g ~= nil then g:copy_(g:clamp(-clip_value, clip_value)) end
    end
  end)
end

return clip_grad_value
