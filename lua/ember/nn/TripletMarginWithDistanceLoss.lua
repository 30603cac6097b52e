--- nn.TripletMarginWithDistanceLoss([{distance_function =, margin = 1, swap = false, reduction =
-- "mean"}]): max(d(a, p) - d(a, n) + margin, 0) with a distance function of (x1, x2) (a function or a
-- module; default nn.PairwiseDistance's), as torch.nn.TripletMarginWithDistanceLoss
-- (`nn.functional.triplet_margin_with_distance_loss`).
-- Errors name nn.TripletMarginWithDistanceLoss (its options) at the caller's line; the inputs are checked as nn.functional's.
-- @usage local loss = nn.TripletMarginWithDistanceLoss{distance_function = nn.CosineSimilarity()}
-- print(loss(ember.randn(4, 3), ember.randn(4, 3), ember.randn(4, 3)).shape)   --> ember.Size{}
-- @classmod nn.TripletMarginWithDistanceLoss
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local TripletMarginWithDistanceLoss = Module:extend("TripletMarginWithDistanceLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
TripletMarginWithDistanceLoss.SIGNATURE = { sizes = {}, options = { "distance_function", "margin", "swap", "reduction" }, string_option = "reduction" }

-- one option's check (the constructor's)
local function check(what, v, ok, want)
  if not ok then error(("TripletMarginWithDistanceLoss: %s must be %s, got %s"):format(what, want, tostring(v)), 4) end
end

function TripletMarginWithDistanceLoss:__init(opts)
  opts = losses.setup(self, opts, nil, { "margin" }, nil, { "distance_function", "swap" })
  local v = opts.distance_function
  check("distance_function", v, v == nil or type(v) == "function" or Module.is_module(v), "a function or a module")
  self.distance_function = v
  if self.margin == nil then self.margin = 1 end
  local v = opts.swap
  if v == nil then v = false end
  check("swap", v, type(v) == "boolean", "a boolean")
  self.swap = v
end

--- The loss.
-- @tparam Tensor anchor
-- @tparam Tensor positive
-- @tparam Tensor negative
-- @treturn Tensor
function TripletMarginWithDistanceLoss:forward(anchor, positive, negative)
  Module.check_tensor_input("TripletMarginWithDistanceLoss.forward", anchor)
  return require("ember.nn.functional").triplet_margin_with_distance_loss(anchor, positive, negative, {
    distance_function = self.distance_function, margin = self.margin, swap = self.swap, reduction = self.reduction,
  })
end

--- Its options, for printing.
function TripletMarginWithDistanceLoss:extra_repr()
  return ("margin=%g, swap=%s, reduction=%s"):format(
    self.margin, tostring(self.swap), self.reduction)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
TripletMarginWithDistanceLoss.forward = require("ember._errors").wrap(TripletMarginWithDistanceLoss.forward)

return TripletMarginWithDistanceLoss
