--- nn.TripletMarginLoss([{margin=1, p=2, eps=1e-6, swap=false, reduction="mean"}]):
-- max(d(a, p) - d(a, n) + margin, 0) for anchors a, positives p and
-- negatives n, as torch.nn.TripletMarginLoss; d is nn.PairwiseDistance's
-- (||x1 - x2 + eps||_p over the last dim). With swap=true, d(a, n) is
-- min(d(a, n), d(p, n)) (the distance swap of Balntas et al.).
-- Inputs [N, D] (or unbatched [D]), all of one shape; gradients reach all three.
-- Errors name nn.TripletMarginLoss at the caller's line.
-- @usage local loss = nn.TripletMarginLoss({margin = 0.5})
-- print(loss(ember.randn(8, 16), ember.randn(8, 16), ember.randn(8, 16)).shape)   --> ember.Size{}
-- @classmod nn.TripletMarginLoss
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"
local PairwiseDistance = require "ember.nn.PairwiseDistance"

local TripletMarginLoss = Module:extend("TripletMarginLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
TripletMarginLoss.SIGNATURE = { sizes = {}, options = { "margin", "p", "eps", "swap", "size_average", "reduce", "reduction" }, string_option = "reduction" }

function TripletMarginLoss:__init(opts)
  opts = losses.setup(self, opts, nil, { "margin", "p", "eps" }, nil, { "swap" })
  self.margin, self.p, self.eps = self.margin or 1, self.p or 2, self.eps or 1e-6
  if not (self.p > 0) then error("TripletMarginLoss: p must be a number > 0, got " .. tostring(self.p)) end
  if opts.swap ~= nil and type(opts.swap) ~= "boolean" then
    error("TripletMarginLoss: swap must be a boolean, got " .. type(opts.swap))
  end
  self.swap = opts.swap == true
  -- the distance (not a child: PyTorch's module has none, so neither does its printout)
end

--- The triplet loss.
-- @tparam Tensor anchor [N, D] or [D]
-- @tparam Tensor positive anchor's shape
-- @tparam Tensor negative anchor's shape
-- @treturn Tensor a scalar, or [N] with reduction "none"
function TripletMarginLoss:forward(anchor, positive, negative)
  if not (losses.same_shape(anchor, positive, negative) and (anchor.ndim == 1 or anchor.ndim == 2)) then
    local s = losses.describe
    error(("TripletMarginLoss.forward: expected anchor, positive and negative of one shape [N, D] or [D], got %s, %s "
      .. "and %s"):format(s(anchor), s(positive), s(negative)))
  end
  return TripletMarginLoss._loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap, self.reduction)
end

-- max(d(a, p) - d(a, n) + margin, 0) reduced, d the pairwise distance (with
-- swap, d(a, n) is min(d(a, n), d(p, n))): the module's forward and
-- nn.functional.triplet_margin_loss's (shapes checked by the caller).
function TripletMarginLoss._loss(anchor, positive, negative, margin, p, eps, swap, reduction)
  local dist = PairwiseDistance._distance
  local d_ap = dist(anchor, positive, p, eps)
  local d_an = dist(anchor, negative, p, eps)
  if swap then d_an = ember.minimum(d_an, dist(positive, negative, p, eps)) end
  return losses.reduce((d_ap - d_an + margin):clamp_min(0), reduction)
end

--- Its options, for printing.
function TripletMarginLoss:extra_repr()
  return ("margin=%g, p=%g, eps=%g, swap=%s, reduction=%s"):format(self.margin, self.p, self.eps,
    tostring(self.swap), self.reduction)
end

-- C errors (bad shapes, dtypes) name the user's line, not this file's.
TripletMarginLoss.forward = require("ember._errors").wrap(TripletMarginLoss.forward)

return TripletMarginLoss
