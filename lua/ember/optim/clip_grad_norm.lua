--- optim.clip_grad_norm(params, max_norm [, norm_type=2 [, error_if_nonfinite=false]])
-- -> total norm (a number), as torch.nn.utils.clip_grad_norm_: the norm of
-- all gradients together; every gradient is scaled in place by
-- min(1, max_norm / (norm + 1e-6)). norm_type: any p > 0 (the p-norm, 2 by
-- default) or math.huge or "inf" (the max abs value). Torch's keywords may come as
-- a table after max_norm or after norm_type: `{norm_type =,
-- error_if_nonfinite =, foreach =}` (foreach accepted and unused; torch
-- 2.x's fifth positional foreach too). With error_if_nonfinite a NaN or
-- infinite norm is an error, before any gradient is touched; without it
-- the gradients are scaled by the non-finite norm as torch's are (a NaN
-- norm makes them all NaN, an infinite one zeroes them -- NaN where they
-- were infinite), so a step after it shows the problem.
-- params: a list of tensors, one tensor or a module. Parameters without a gradient are
-- skipped; with none at all the norm is 0.
-- @module optim.clip_grad_norm
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local core = require "ember.core"

local KEYWORDS = { norm_type = true, error_if_nonfinite = true, foreach = true }

-- torch's keywords given as a table: checked, then read.
local function keywords(op, t, allow_norm_type)
  for k in pairs(t) do
    if not KEYWORDS[k] or (k == "norm_type" and not allow_norm_type) then
      error(("%s: unknown option '%s' (options are %s)"):format(op, tostring(k),
        allow_norm_type and "norm_type, error_if_nonfinite, foreach" or "error_if_nonfinite, foreach"), 3)
    end
  end
  return t
end

-- `op`, after torch's arguments, is the name errors give: nn.utils.clip_grad_norm_ passes its own.
local function clip_grad_norm(params, max_norm, norm_type, error_if_nonfinite, foreach, op)
  op = op or "clip_grad_norm"
  if type(norm_type) == "table" then
    if error_if_nonfinite ~= nil then
      error(op .. ": give norm_type and error_if_nonfinite either by position or in the options table, not both", 2)
    end
    local kw = keywords(op, norm_type, true)
    norm_type, error_if_nonfinite, foreach = kw.norm_type, kw.error_if_nonfinite, kw.foreach
  elseif type(error_if_nonfinite) == "table" then
    local kw = keywords(op, error_if_nonfinite, false)
    error_if_nonfinite, foreach = kw.error_if_nonfinite, kw.foreach
  end
  norm_type = norm_type or 2
  if norm_type == "inf" then norm_type = math.huge end -- torch's 'inf' (its docs' spelling)
  if type(max_norm) ~= "number" or not (max_norm >= 0) then -- NaN too
    error(op .. ": max_norm must be a number >= 0, got " .. tostring(max_norm), 2)
  end
  if type(norm_type) ~= "number" or not (norm_type > 0) then
    error(op .. ": norm_type must be a number > 0, math.huge or \"inf\", got " .. tostring(norm_type), 2)
  end
  if error_if_nonfinite ~= nil and type(error_if_nonfinite) ~= "boolean" then
    error(op .. ": error_if_nonfinite must be a boolean, got " .. tostring(error_if_nonfinite), 2)
  end
  if foreach ~= nil and type(foreach) ~= "boolean" then
    error(op .. ": foreach must be a boolean or nil, got " .. tostring(foreach), 2)
  end
  local inf = norm_type == math.huge
  if core.is_tensor(params) then
    params = { params } -- one tensor, as torch's
  elseif type(params) ~= "table" then
    error(op .. ": params must be a list of tensors, a tensor or a module, got " .. type(params), 2)
  elseif params.parameters and getmetatable(params) then
    params = params:parameters()
  end
  local grads = {}
  for i, p in ipairs(params) do
    if not core.is_tensor(p) then error(("%s: params[%d] is a %s, not a tensor"):format(op, i, type(p)), 2) end
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
  if error_if_nonfinite and (total ~= total or total == math.huge) then
    error(("%s: the total norm of order %s for gradients from `parameters` is non-finite, so it cannot be "
      .. "clipped (error_if_nonfinite = false scales the gradients by it anyway)"):format(op,
      norm_type == math.huge and "inf" or tostring(norm_type)), 2)
  end
  local coef = max_norm / (total + 1e-6)
  if not (coef >= 1) then -- a NaN norm too: torch's clamp(coef, max = 1) keeps NaN
    ember.no_grad(function() for _, g in ipairs(grads) do g:mul_(coef) end end)
  end
  return total
end

return clip_grad_norm
