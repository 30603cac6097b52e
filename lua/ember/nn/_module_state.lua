-- nn/_module_state.lua (internal): how nn.Module maps and loads state
-- dicts (the methods and their documentation are Module.lua's): the
-- per-module name mapping upgrade_state_dict runs at every depth, the walk
-- torch_state_dict makes to PyTorch's names, and load_state_dict's checks
-- (types, shapes, missing and unexpected names, a "module." prefix named)
-- made before anything is copied. `require(this)(Module, kind_of)` gives
-- {upgrade_state_dict =, torch_state_dict =, load_state_dict =}, each
-- taking the module first; kind_of(self, name) is Module.lua's rule for
-- what a registered name is.
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local list_of = require("ember._listing").list -- lists that print(): readable, not an address
local ordered = require("ember._listing").ordered -- maps that pairs() walks in registration order

local shape_str = errors.shape_str

return function(Module, kind_of)
  local S = {}

  -- sd's names grouped by their first component: child name -> {rest -> value};
  -- the names with no child's prefix stay in `own`.
  local function by_child(self, sd)
    local own, parts = {}, {}
    for k, v in pairs(sd) do
      local head, rest = nil, nil
      if type(k) == "string" then head, rest = k:match("^([^.]+)%.(.+)$") end
      if head and kind_of(self, head) == "child" then
        parts[head] = parts[head] or {}
        parts[head][rest] = v
      else
        own[k] = v
      end
    end
    return own, parts
  end

  local SD_ARGS = { destination = true, prefix = true, keep_vars = true }
  local ORDERED_MT = getmetatable(ordered({}, {}))

  -- Module:state_dict([destination [, prefix [, keep_vars]]]) or state_dict{destination =, prefix =,
  -- keep_vars =}, as torch's: a lone table of those names (none a tensor) is the keywords.
  function S.state_dict(self, ...)
    local who = self.__name .. ".state_dict"
    local destination, prefix, keep_vars = ...
    if select("#", ...) > 3 then errors.raise("%s: takes at most 3 arguments (destination, prefix, keep_vars), got %d",
      who, select("#", ...)) end
    if select("#", ...) == 1 and type(destination) == "table" and next(destination) ~= nil then
      local keywords = true
      for k, v in pairs(destination) do
        if not SD_ARGS[k] or Module.is_tensor(v) then keywords = false end
      end
      if keywords then destination, prefix, keep_vars = destination.destination, destination.prefix, destination.keep_vars end
    end
    if destination ~= nil and type(destination) ~= "table" then
      errors.raise("%s: destination must be a table or nil, got %s", who, type(destination))
    end
    if prefix == nil then prefix = "" end
    if type(prefix) ~= "string" then errors.raise("%s: prefix must be a string, got %s", who, type(prefix)) end
    if keep_vars ~= nil and type(keep_vars) ~= "boolean" then
      errors.raise("%s: keep_vars must be a boolean, got %s", who, type(keep_vars))
    end
    local sd, names = destination or {}, {}
    for k in pairs(sd) do names[#names + 1] = k end -- what destination held keeps its order, first
    self:_each_tensor(function(n, t, kind)
      if kind ~= "nonpersistent" then
        local key = prefix .. n
        if sd[key] == nil then names[#names + 1] = key end
        sd[key] = keep_vars and t or t:detach()
      end
    end)
    if getmetatable(sd) ~= nil and not rawequal(getmetatable(sd), ORDERED_MT) then
      return sd -- a destination of the user's own kind keeps its metatable
    end
    return ordered(sd, names) -- print(m:state_dict()) lists the names, as PyTorch's
  end

  -- Module:upgrade_state_dict: legacy_names' renames at this level, then each
  -- child's part through the child's own upgrade_state_dict (prefix taken off,
  -- put back after).
  function S.upgrade_state_dict(self, sd, prefix)
    local out, n = {}, 0
    for k, v in pairs(sd) do out[k] = v end
    for old, new in pairs(self:legacy_names() or {}) do
      if out[old] ~= nil and out[new] == nil and sd[new] == nil then
        out[new], out[old], n = out[old], nil, n + 1
      end
    end
    local own, parts = by_child(self, out)
    for name, sub in pairs(parts) do
      local up, m = self._reg[name]:upgrade_state_dict(sub, (prefix or "") .. name .. ".")
      n = n + (m or 0)
      for k, v in pairs(up) do own[name .. "." .. k] = v end
    end
    return own, n
  end

  -- Module:torch_state_dict: own tensors detached, the children's parts under
  -- their names, then this module's to_torch_names hook.
  function S.torch_state_dict(self)
    local own, reg = {}, self._reg
    for _, n in ipairs(self._params) do own[n] = reg[n]:detach() end
    for _, n in ipairs(self._buffers) do
      if not self._nonpersistent[n] then own[n] = reg[n]:detach() end
    end
    for _, c in ipairs(self._children) do
      for k, v in pairs(reg[c]:torch_state_dict()) do own[c .. "." .. k] = v end
    end
    return self:to_torch_names(own)
  end

  -- Module:load_state_dict: map the names, check every name and shape (nothing
  -- is copied unless all fit), then copy into the module's tensors.
  function S.load_state_dict(self, sd, strict)
    local who = self.__name .. ".load_state_dict"
    if type(sd) ~= "table" then errors.raise("%s: expected a table of tensors, got %s", who, type(sd)) end
    if type(strict) == "table" then strict = Module.check_options(who, strict, { "strict" }).strict end
    if strict == nil then strict = true end
    if type(strict) ~= "boolean" then
      errors.raise("%s: strict must be a boolean (or {strict = ...}), got %s", who, type(strict))
    end
    sd = self:upgrade_state_dict(sd)
    local own = self:state_dict()
    local missing, unexpected, mismatched = {}, {}, {}
    for n, dst in pairs(own) do
      local src = sd[n]
      if src == nil then
        missing[#missing + 1] = n
      elseif not Module.is_tensor(src) then
        errors.raise("%s: '%s' is a %s, expected a tensor", who, n, type(src))
      elseif dst.ndim == 0 and src.ndim == 1 and src.shape[1] == 1 then
        sd[n] = src:reshape({}) -- a scalar saved as [1] (PyTorch before 0.4), as PyTorch loads it
      elseif shape_str(src) ~= shape_str(dst) then
        mismatched[#mismatched + 1] = n
      end
    end
    if #mismatched > 0 then -- every one, in name order (as PyTorch lists them)
      table.sort(mismatched)
      for i, n in ipairs(mismatched) do
        mismatched[i] = ("'%s' has shape %s in the state dict, the module expects %s"):format(n, shape_str(sd[n]),
          shape_str(own[n]))
      end
      errors.raise("%s: %s", who, table.concat(mismatched, "; "))
    end
    for n in pairs(sd) do if own[n] == nil then unexpected[#unexpected + 1] = tostring(n) end end
    table.sort(missing)
    table.sort(unexpected)
    if strict and (#missing > 0 or #unexpected > 0) then
      local parts = {}
      if #missing > 0 then parts[#parts + 1] = "missing " .. table.concat(missing, ", ") end
      if #unexpected > 0 then parts[#parts + 1] = "unexpected " .. table.concat(unexpected, ", ") end
      -- a checkpoint of a model wrapped in DataParallel / DistributedDataParallel:
      -- every name under "module."
      local wrapped, inner = #unexpected > 0, {}
      for _, n in ipairs(unexpected) do
        if n:sub(1, 7) == "module." then inner[n:sub(8)] = sd[n] else wrapped = false end
      end
      if wrapped then
        for n in pairs(self:upgrade_state_dict(inner)) do if own[n] == nil then wrapped = false end end
      end
      if wrapped then
        parts[#parts + 1] = "the state dict's names start with 'module.' (a model wrapped in PyTorch's "
          .. "DistributedDataParallel or DataParallel): take that prefix off each name"
      end
      -- ember.load of a checkpoint.save file: the optimizer's tensors sit beside the model's
      local opt_state = #missing == 0 and #unexpected > 0
      for _, n in ipairs(unexpected) do
        if n:sub(1, 16) ~= "optimizer.state." then opt_state = false end
      end
      if opt_state then
        parts[#parts + 1] = "the unexpected names are an optimizer's state (a checkpoint.save file): "
          .. "checkpoint.load(path, {model = m}) loads the model's part"
      end
      errors.raise("%s: names do not match the module: %s", who, table.concat(parts, "; "))
    end
    ember.no_grad(function()
      for n, dst in pairs(own) do
        local src = sd[n]
        if src ~= nil then
          if src.device ~= dst.device then src = src:to(dst.device) end
          dst:copy_(src)
        end
      end
    end)
    return self, list_of(missing), list_of(unexpected)
  end

  return S
end
