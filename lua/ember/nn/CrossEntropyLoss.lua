--- nn.CrossEntropyLoss([{weight=, ignore_index=, label_smoothing=0, reduction="mean"}]):
-- torch.nn.CrossEntropyLoss with the classes in the LAST dim: logits [N, C]
-- with targets [N], [B, L, C] with [B, L] (any number of leading dims), or
-- [C] with a 0-d target. (PyTorch puts them in dim 2, [N, C, d1, ...]:
-- move them last first, logits:permute(1, 3, 2) for [N, C, L].)
-- Targets are 1-based int64 class ids; ignore_index is compared with them
-- (e.g. the padding id; default -100, PyTorch's and Hugging Face's label
-- padding, which no 1-based id can be). `weight` [C] rescales each class as PyTorch's:
-- "mean" then divides by the summed weights of the counted targets, and
-- label smoothing's uniform part is weighted too. One fused C op without
-- weight; with it, log_softmax and the weighted NLL composed. "mean" of
-- targets all ignored is 0 with zero gradients either way (PyTorch: NaN).
-- Targets may also be class probabilities (soft labels, mixup): a float
-- tensor shaped like the logits, as PyTorch's; the loss of a row is
-- -sum_c weight_c t_c log p_c (t smoothed first), "mean" averages the rows.
-- @usage local logits, targets = ember.randn(4, 5), ember.tensor({1, 5, 2, 3}, "int64")
-- local loss = nn.CrossEntropyLoss{label_smoothing = 0.1}(logits, targets)   -- logits [N, C], targets int64 [N], 1-based
-- @classmod nn.CrossEntropyLoss
local errors = require "ember._errors"
local error = errors.error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local CrossEntropyLoss = Module:extend("CrossEntropyLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
CrossEntropyLoss.SIGNATURE = { sizes = {}, options = { "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing" }, string_option = "reduction" }

function CrossEntropyLoss:__init(opts)
  -- the reduction, checked as every loss's; the other options are read here
  opts = losses.setup(self, opts, nil, nil, nil, { "weight", "ignore_index", "label_smoothing" })
  self.ignore_index = opts.ignore_index
  self.label_smoothing = opts.label_smoothing or 0
  if opts.weight ~= nil then
    if not ember.is_tensor(opts.weight) or opts.weight.ndim ~= 1 then
      error("nn.CrossEntropyLoss: weight must be a 1-d tensor [C] of class weights, got "
        .. (ember.is_tensor(opts.weight) and errors.shape_str(opts.weight) or type(opts.weight)), 2)
    end
    self:register_buffer("weight", opts.weight)
  end
  if type(self.label_smoothing) ~= "number" or self.label_smoothing < 0 or self.label_smoothing > 1 then
    error("CrossEntropyLoss: label_smoothing must be in [0, 1], got " .. tostring(self.label_smoothing), 2)
  end
end

-- The weighted loss (PyTorch's formula): (1 - eps) * the weighted NLL of
-- the targets + eps / C * the weighted sum of -log p over the classes;
-- "mean" divides both by the weights of the counted targets.
local function weighted(self, logits, target)
  local logp = logits:log_softmax(-1)
  local red, eps, C = self.reduction, self.label_smoothing, logits.shape[logits.ndim]
  local w = self.weight
  if w.shape[1] ~= C then
    error(("nn.CrossEntropyLoss: weight has %d classes, the logits %d"):format(w.shape[1], C), 3)
  end
  w = w:to(logp.dtype)
  local opts = { weight = w, ignore_index = self.ignore_index, reduction = red == "mean" and "sum" or red }
  local nll = ember.nll_loss(logp, target, opts)
  local denom
  if red == "mean" then denom = ember.nll_loss(ember.zeros_like(logp) - 1, target, opts) end -- sum of w[y]
  if eps > 0 then
    local smooth = -(logp * w:view(1, C)):sum(2)
    smooth = smooth:masked_fill(target:eq(self.ignore_index or -100), 0) -- nll_loss's default, PyTorch's
    if red ~= "none" then smooth = smooth:sum() end
    nll = nll * (1 - eps) + smooth * (eps / C)
  end
  -- every target ignored: 0 with zero gradients, as ember.cross_entropy's fused op
  -- (PyTorch's NaN would poison a training run on a batch of padding)
  if denom then nll = nll / ember.where(denom:eq(0), ember.ones_like(denom), denom) end
  return nll
end

-- The loss against class probabilities shaped like the logits (PyTorch's
-- formula; ignore_index does not apply to them, as in PyTorch).
local function soft(self, logits, target)
  if errors.shape_str(target) ~= errors.shape_str(logits) then
    error(("nn.CrossEntropyLoss: a float target holds class probabilities and must have the logits' shape %s, "
      .. "got %s (class ids are int64)"):format(errors.shape_str(logits), errors.shape_str(target)), 3)
  end
  local C = logits.shape[logits.ndim]
  local logp = logits:log_softmax(-1)
  local t = target:to(logp.dtype)
  local eps = self.label_smoothing
  if eps > 0 then t = t * (1 - eps) + eps / C end
  local prod = logp * t
  if self.weight then
    if self.weight.shape[1] ~= C then
      error(("nn.CrossEntropyLoss: weight has %d classes, the logits %d"):format(self.weight.shape[1], C), 3)
    end
    prod = prod * self.weight:to(logp.dtype)
  end
  return losses.reduce(-prod:sum(-1), self.reduction)
end

--- The loss of logits [..., C] (classes last) against 1-based int64 targets
-- [...], or against class probabilities shaped like the logits.
-- @tparam Tensor logits
-- @tparam Tensor target int64, 1-based class ids; or float probabilities [..., C]
-- @treturn Tensor 0-d (or per element with reduction "none")
function CrossEntropyLoss:forward(logits, target)
  if not ember.is_tensor(logits) or not ember.is_tensor(target) then
    error("nn.CrossEntropyLoss: expected logits and target tensors, got " .. type(logits) .. " and " .. type(target), 2)
  end
  local info = ember.dtype_info(target.dtype)
  if info and info.floating then return soft(self, logits, target) end
  local shape = target.shape
  if logits.ndim > 2 then
    local nd, ok = logits.ndim, target.ndim == logits.ndim - 1
    for i = 1, nd - 1 do ok = ok and target.shape[i] == logits.shape[i] end
    if not ok then
      -- PyTorch's layout [N, C, d...] with target [N, d...]?
      local torch = target.ndim == nd - 1 and target.shape[1] == logits.shape[1]
      for i = 2, nd - 1 do torch = torch and target.shape[i] == logits.shape[i + 1] end
      error(("nn.CrossEntropyLoss: logits %s need a target %s (the classes are the last dim), got %s%s"):format(
        errors.shape_str(logits), "[" .. table.concat(logits.shape, ", ", 1, nd - 1) .. "]",
        errors.shape_str(target), torch and ("; for PyTorch's [N, C, ...] layout move the classes last first: "
        .. "logits:permute(1, %s, 2)"):format(table.concat({ table.unpack({ 3, 4, 5, 6, 7, 8, 9, 10 }, 1, nd - 2) }, ", "))
        or ""), 2)
    end
    logits = logits:reshape(-1, logits.shape[nd])
    target = target:reshape(-1)
  end
  local loss
  if self.weight then
    loss = weighted(self, logits:dim() == 1 and logits:view(1, -1) or logits, target:dim() == 0 and target:view(1) or target)
    if self.reduction == "none" and #shape == 0 then loss = loss:view() end
  else
    loss = ember.cross_entropy(logits, target, {
      ignore_index = self.ignore_index, label_smoothing = self.label_smoothing, reduction = self.reduction,
    })
  end
  if self.reduction == "none" and #shape > 1 then loss = loss:reshape(shape) end
  return loss
end

--- The options, for printing the module.
function CrossEntropyLoss:extra_repr()
  local s = "reduction=" .. self.reduction
  if self.weight then s = s .. ", weight=[" .. self.weight.shape[1] .. "]" end
  if self.ignore_index then s = s .. ", ignore_index=" .. self.ignore_index end
  if self.label_smoothing ~= 0 then s = s .. ", label_smoothing=" .. self.label_smoothing end
  return s
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
CrossEntropyLoss.forward = require("ember._errors").wrap(CrossEntropyLoss.forward)

return CrossEntropyLoss
