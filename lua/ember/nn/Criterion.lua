--- nn.Criterion: Torch7's criterions, each one of ember's losses under
-- Torch7's name and constructor arguments. `crit:forward(input, target)`
-- returns the loss as a Lua number (as Torch7's; nothing is recorded) and
-- `crit:backward(input, target)` returns dL/d(input), computed by autograd
-- on a detached copy of input (no state kept between the two: backward
-- needs no forward before it); both also leave it in `crit.output` and
-- `crit.gradInput`, as Torch7's. `sizeAverage` (a constructor argument,
-- or the field set later, as Torch7 code does: `crit.sizeAverage = false`)
-- is the reduction: true (the default) "mean", false "sum".
--
--   nn.MSECriterion([sizeAverage])                 ember.mse_loss
--   nn.AbsCriterion([sizeAverage])                 ember.l1_loss
--   nn.SmoothL1Criterion([sizeAverage])            ember.smooth_l1_loss (beta 1)
--   nn.ClassNLLCriterion([weights, sizeAverage, ignoreIndex])  ember.nll_loss
--   nn.CrossEntropyCriterion([weights, sizeAverage])           log_softmax then ember.nll_loss
--   nn.BCECriterion([weights, sizeAverage])        ember.binary_cross_entropy
--   nn.DistKLDivCriterion([sizeAverage])           ember.kl_div (input log-probabilities)
--   nn.SoftMarginCriterion([sizeAverage])          F.soft_margin_loss
--   nn.HingeEmbeddingCriterion([margin, sizeAverage])          F.hinge_embedding_loss
--   nn.MultiMarginCriterion([p, weights, margin, sizeAverage]) F.multi_margin_loss
--   nn.MultiLabelMarginCriterion([sizeAverage])    F.multilabel_margin_loss
--   nn.MultiLabelSoftMarginCriterion([weights, sizeAverage])   F.multilabel_soft_margin_loss
--   nn.MarginRankingCriterion([margin, sizeAverage])  input {x1, x2}: F.margin_ranking_loss
--   nn.CosineEmbeddingCriterion([margin, sizeAverage]) input {x1, x2}: F.cosine_embedding_loss
--
-- Targets follow ember's conventions, which are Torch7's: class ids are
-- 1-based int64 (ClassNLLCriterion, CrossEntropyCriterion, MultiMarginCriterion),
-- MultiLabelMarginCriterion's target lists 1-based ids ended by 0, and the
-- margin criterions take 1 / -1. A weighted mean (weights given,
-- sizeAverage true) divides by the targets' total weight, as Torch7's and
-- torch's. The input pairs {x1, x2} give a pair of gradients back.
-- @usage local crit = nn.MSECriterion()
-- local x, y = ember.tensor{1, 2}, ember.tensor{0, 0}
-- print(crit:forward(x, y), crit:backward(x, y))   --> 2.5	tensor([1.0000, 2.0000], ...)
-- @classmod nn.Criterion
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local Module = require "ember.nn.Module"

local Criterion = Module:extend("Criterion")

local function F() return require "ember.nn.functional" end

-- The reduction sizeAverage means (read at each call: Torch7 code sets the field).
function Criterion:_reduction()
  local s = rawget(self, "sizeAverage")
  if s ~= nil and type(s) ~= "boolean" then
    errors.raise("%s: sizeAverage must be a boolean, got %s", self.__name, type(s))
  end
  return s == false and "sum" or "mean"
end

--- The loss tensor of input against target (each criterion defines it).
function Criterion:loss()
  errors.raise("%s: a criterion defines loss(input, target)", self.__name)
end

local function check_input(who, input, pair)
  if pair then
    if type(input) ~= "table" or Module.is_tensor(input) or not (Module.is_tensor(input[1]) and Module.is_tensor(input[2])) then
      errors.raise("%s: input must be a pair of tensors {x1, x2}, got %s", who, Module.is_tensor(input) and "a tensor" or type(input))
    end
  elseif not Module.is_tensor(input) then
    errors.raise("%s: input must be a tensor, got %s", who, type(input))
  end
end

--- The loss as a Lua number (also `self.output`), not recorded.
-- @tparam Tensor|{Tensor,Tensor} input
-- @tparam Tensor target
-- @treturn number
function Criterion:forward(input, target)
  check_input(self.__name .. ".forward", input, self.PAIR)
  local l = ember.no_grad(function() return self:loss(input, target) end)
  local v = l:item()
  rawset(self, "output", v)
  return v
end

--- dL/d(input) (also `self.gradInput`): autograd's gradient of the loss
-- at a detached copy of input (a pair of them for a pair input).
-- @tparam Tensor|{Tensor,Tensor} input
-- @tparam Tensor target
-- @treturn Tensor|{Tensor,Tensor}
function Criterion:backward(input, target)
  local who = self.__name .. ".backward"
  check_input(who, input, self.PAIR)
  local xs = self.PAIR and { input[1], input[2] } or { input }
  for i, x in ipairs(xs) do
    if not ember.dtype_info(x.dtype).floating then
      errors.raise("%s: input must be floating-point to have a gradient, got %s", who, x.dtype)
    end
    xs[i] = x:detach():requires_grad_(true)
  end
  local g = ember.enable_grad(function()
    local l = self:loss(self.PAIR and xs or xs[1], target)
    return ember.grad(l, xs, { allow_unused = true })
  end)
  for i, x in ipairs(xs) do g[i] = g[i] or ember.zeros_like(x) end
  local gi = self.PAIR and { g[1], g[2] } or g[1]
  rawset(self, "gradInput", gi)
  return gi
end

--- Torch7's updateOutput: forward.
function Criterion:updateOutput(input, target) return self:forward(input, target) end
--- Torch7's updateGradInput: backward.
function Criterion:updateGradInput(input, target) return self:backward(input, target) end

--- The settings, for printing.
function Criterion:extra_repr() return "sizeAverage=" .. tostring(rawget(self, "sizeAverage") ~= false) end

-- A criterion class: `args` names its constructor arguments in Torch7's
-- order ("weights" becomes a buffer: m:to moves it), `loss(self, input,
-- target, reduction)` computes.
local function criterion(name, args, loss, pair)
  local C = Criterion:extend(name)
  C.PAIR = pair
  function C:__init(...)
    Module.torch7_activate() -- a Torch7 script: m:forward keeps its output for m:backward
    local n = select("#", ...)
    if n > #args then
      errors.raise("nn.%s: takes at most %d arguments (%s), got %d", name, #args, table.concat(args, ", "), n)
    end
    for i, a in ipairs(args) do
      local v = select(i, ...)
      if v ~= nil then
        if a == "weights" then
          if not Module.is_tensor(v) then errors.raise("nn.%s: weights must be a tensor, got %s", name, type(v)) end
          self:register_buffer("weights", v)
        elseif a == "sizeAverage" then
          if type(v) ~= "boolean" then errors.raise("nn.%s: sizeAverage must be a boolean, got %s", name, type(v)) end
          rawset(self, a, v)
        else
          if type(v) ~= "number" then errors.raise("nn.%s: %s must be a number, got %s", name, a, type(v)) end
          rawset(self, a, v)
        end
      end
    end
    if rawget(self, "sizeAverage") == nil then rawset(self, "sizeAverage", true) end
  end
  function C:loss(input, target) return loss(self, input, target, self:_reduction()) end
  C.forward = errors.wrap(Criterion.forward)
  C.backward = errors.wrap(Criterion.backward)
  return C
end

local C = {}
C.MSECriterion = criterion("MSECriterion", { "sizeAverage" },
  function(_, x, y, r) return ember.mse_loss(x, y, r) end)
C.AbsCriterion = criterion("AbsCriterion", { "sizeAverage" },
  function(_, x, y, r) return ember.l1_loss(x, y, { reduction = r }) end)
C.SmoothL1Criterion = criterion("SmoothL1Criterion", { "sizeAverage" },
  function(_, x, y, r) return ember.smooth_l1_loss(x, y, { reduction = r }) end)
C.ClassNLLCriterion = criterion("ClassNLLCriterion", { "weights", "sizeAverage", "ignoreIndex" },
  function(self, x, y, r)
    return ember.nll_loss(x, y, { weight = self.weights, ignore_index = rawget(self, "ignoreIndex"), reduction = r })
  end)
C.CrossEntropyCriterion = criterion("CrossEntropyCriterion", { "weights", "sizeAverage" },
  function(self, x, y, r) -- Torch7's: LogSoftMax then ClassNLLCriterion (the classes in the last dim)
    return ember.nll_loss(x:log_softmax(-1), y, { weight = self.weights, reduction = r })
  end)
C.BCECriterion = criterion("BCECriterion", { "weights", "sizeAverage" },
  function(self, x, y, r) return ember.binary_cross_entropy(x, y, { weight = self.weights, reduction = r }) end)
C.DistKLDivCriterion = criterion("DistKLDivCriterion", { "sizeAverage" },
  function(_, x, y, r) return ember.kl_div(x, y, { reduction = r }) end)
C.SoftMarginCriterion = criterion("SoftMarginCriterion", { "sizeAverage" },
  function(_, x, y, r) return F().soft_margin_loss(x, y, { reduction = r }) end)
C.HingeEmbeddingCriterion = criterion("HingeEmbeddingCriterion", { "margin", "sizeAverage" },
  function(self, x, y, r) return F().hinge_embedding_loss(x, y, { margin = rawget(self, "margin"), reduction = r }) end)
C.MultiMarginCriterion = criterion("MultiMarginCriterion", { "p", "weights", "margin", "sizeAverage" },
  function(self, x, y, r)
    return F().multi_margin_loss(x, y, { p = rawget(self, "p"), margin = rawget(self, "margin"), weight = self.weights,
      reduction = r })
  end)
C.MultiLabelMarginCriterion = criterion("MultiLabelMarginCriterion", { "sizeAverage" },
  function(_, x, y, r) return F().multilabel_margin_loss(x, y, { reduction = r }) end)
C.MultiLabelSoftMarginCriterion = criterion("MultiLabelSoftMarginCriterion", { "weights", "sizeAverage" },
  function(self, x, y, r) return F().multilabel_soft_margin_loss(x, y, { weight = self.weights, reduction = r }) end)
C.MarginRankingCriterion = criterion("MarginRankingCriterion", { "margin", "sizeAverage" },
  function(self, x, y, r) return F().margin_ranking_loss(x[1], x[2], y, { margin = rawget(self, "margin"), reduction = r }) end,
  true)
C.CosineEmbeddingCriterion = criterion("CosineEmbeddingCriterion", { "margin", "sizeAverage" },
  function(self, x, y, r) return F().cosine_embedding_loss(x[1], x[2], y, { margin = rawget(self, "margin"), reduction = r }) end,
  true)

Criterion.classes = C
return Criterion
