-- nn/_loss.lua (internal): the options every loss module of
-- lua/ember/_functional.lua's losses reads the same way (BCELoss,
-- BCEWithLogitsLoss, NLLLoss, L1Loss, SmoothL1Loss, and the others'
-- reduction: MSELoss, CrossEntropyLoss, the ranking losses).
-- setup(module, opts, buffers [, numbers [, reductions [, others]]]):
-- opts is a table (or a string, the reduction); the reduction is checked
-- and kept; the tensor options named in `buffers` become buffers (so that
-- :to(device) moves them); the number options named in `numbers` are kept
-- as fields; `reductions` (a list) replaces the usual "mean", "sum",
-- "none" (KLDivLoss adds "batchmean"); `others` names the options the
-- module reads itself. Any other key is an error. Returns opts.
-- reduce(loss, reduction): the per-element loss reduced ("mean", "sum";
-- "none" keeps it), _functional.lua's rule, for the losses composed here.
-- same_shape(...): whether all arguments are tensors of one shape;
-- describe(v): a tensor's shape "[2, 3]" or v's type, for their messages.
local errors = require "ember._errors"
local ember = require "ember.nn._ember"
local functional = require "ember._functional"

local M = {}

local REDUCTIONS = functional.REDUCTIONS
M.reduce = functional.reduce

function M.same_shape(...)
  local s
  for i = 1, select("#", ...) do
    local t = select(i, ...)
    if not ember.is_tensor(t) then return false end
    local si = table.concat(t.shape, ",")
    if s and si ~= s then return false end
    s = si
  end
  return true
end

function M.describe(v)
  return ember.is_tensor(v) and errors.shape_str(v) or type(v)
end

-- torch's size_average and reduce, deprecated there in favour of reduction: refused saying what to
-- write (the losses' modules and nn.functional's). `position` is the argument's number, if by position.
function M.deprecated_reduction(who, k, position)
  errors.raise("%s: %s is torch's %s, deprecated: give reduction (\"mean\", \"sum\" or \"none\") instead, as "
    .. "{reduction = ...} or by position after size_average and reduce", who,
    position and ("argument " .. position) or "the option " .. k, k)
end

function M.setup(self, opts, buffers, numbers, reductions, others)
  if opts == nil then opts = {} end -- not `opts or {}`: a false (PyTorch's positional log_input=False) is refused
  if type(opts) == "string" then opts = { reduction = opts } end
  if type(opts) == "table" then
    for _, k in ipairs { "size_average", "reduce" } do
      if opts[k] ~= nil then M.deprecated_reduction("nn." .. self.__name, k) end
    end
  end
  -- every option a loss reads is named here, so a misspelt one is an error
  opts = require("ember.nn.Module").check_options("nn." .. self.__name, opts, { "reduction" }, buffers or {},
    numbers or {}, others or {})
  self.reduction = opts.reduction or "mean"
  if reductions then
    local ok = false
    for _, r in ipairs(reductions) do ok = ok or r == self.reduction end
    if not ok then
      errors.raise("%s: reduction must be \"%s\" or \"%s\", got %s", self.__name,
        table.concat(reductions, "\", \"", 1, #reductions - 1), reductions[#reductions], tostring(self.reduction))
    end
  elseif not REDUCTIONS[self.reduction] then
    errors.raise("%s: reduction must be \"mean\", \"sum\" or \"none\", got %s", self.__name, tostring(self.reduction))
  end
  for _, k in ipairs(buffers or {}) do
    if opts[k] ~= nil then
      if not ember.is_tensor(opts[k]) then errors.raise("%s: %s must be a tensor, got %s", self.__name, k, type(opts[k])) end
      self:register_buffer(k, opts[k])
    end
  end
  for _, k in ipairs(numbers or {}) do
    if opts[k] ~= nil and math.type(opts[k]) == nil then
      errors.raise("%s: %s must be a number, got %s", self.__name, k, type(opts[k]))
    end
    self[k] = opts[k]
  end
  return opts
end

return M
