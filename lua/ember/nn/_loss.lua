-- nn/_loss.lua (internal): the options every loss module of
-- lua/ember/_functional.lua's losses reads the same way (BCELoss,
-- BCEWithLogitsLoss, NLLLoss, L1Loss, SmoothL1Loss).
-- setup(module, opts, buffers [, numbers [, reductions [, others]]]):
-- opts is a table (or a string, the reduction); the reduction is checked
-- and kept; the tensor options named in `buffers` become buffers (so that
-- :to(device) moves them); the number options named in `numbers` are kept
-- as fields; `reductions` (a list) replaces the usual "mean", "sum",
-- "none" (KLDivLoss adds "batchmean"); `others` names the options the
-- module reads itself. Any other key is an error. Returns opts.
local errors = require "ember._errors"
local ember = require "ember.nn._ember"

local M = {}

local REDUCTIONS = { mean = true, sum = true, none = true }

function M.setup(self, opts, buffers, numbers, reductions, others)
  opts = opts or {}
  if type(opts) == "string" then opts = { reduction = opts } end
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
