--- nn.BCELoss([{reduction = "mean", weight =}]): binary cross-entropy on
-- probabilities, as torch.nn.BCELoss (each log at least -100;
-- `ember.binary_cross_entropy`). On logits prefer nn.BCEWithLogitsLoss.
-- @usage local loss = nn.BCELoss()(ember.rand(4), ember.tensor{0, 1, 1, 0})
-- @classmod nn.BCELoss
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local BCELoss = Module:extend("BCELoss")

local REDUCTIONS = { mean = true, sum = true, none = true }

-- Reads the reduction and the tensor options `buffers` names (registered
-- as buffers, so that :to(device) moves them); nn.BCEWithLogitsLoss too.
function BCELoss:_init(opts, buffers)
  opts = opts or {}
  if type(opts) == "string" then opts = { reduction = opts } end
  if type(opts) ~= "table" then error(self.__name .. ": options must be a table, got " .. type(opts), 3) end
  self.reduction = opts.reduction or "mean"
  if not REDUCTIONS[self.reduction] then
    error(self.__name .. ": reduction must be \"mean\", \"sum\" or \"none\", got " .. tostring(self.reduction), 3)
  end
  for _, k in ipairs(buffers) do
    if opts[k] ~= nil then
      if not ember.is_tensor(opts[k]) then error(self.__name .. ": " .. k .. " must be a tensor, got " .. type(opts[k]), 3) end
      self:register_buffer(k, opts[k])
    end
  end
end

function BCELoss:__init(opts) self:_init(opts, { "weight" }) end

--- The loss of probabilities against targets.
-- @tparam Tensor input
-- @tparam Tensor target the same shape (0 or 1, or probabilities)
function BCELoss:forward(input, target)
  return ember.binary_cross_entropy(input, target, { weight = self.weight, reduction = self.reduction })
end

--- The reduction, for printing.
function BCELoss:extra_repr() return "reduction=" .. self.reduction end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
BCELoss.forward = require("ember._errors").wrap(BCELoss.forward)

return BCELoss
