--- nn.AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs [, {div_value = 4, head_bias = false,
-- dtype =, device =}]): the efficient softmax approximation of Grave et al. (2016), as
-- torch.nn.AdaptiveLogSoftmaxWithLoss. The classes are cut into a shortlist (the first cutoffs[1]) and
-- clusters (the next cutoffs[2] - cutoffs[1], ..., the last up to n_classes): the head scores the
-- shortlist and one entry per cluster, each cluster's tail is a projection to in_features //
-- div_value^i and its classes. Class ids are **1-based** (1..n_classes; cutoffs are counts, as
-- PyTorch's). forward(input [N, in_features] or [in_features], target [N] or 0-d int64) returns
-- a table with `output` (each row's log-probability of its target) and `loss` (their negated mean),
-- as PyTorch's named tuple (also [1] and [2]); `log_prob(input)` gives all n_classes log-probabilities
-- and `predict(input)` the most likely class ids. The state dict names are PyTorch's (head.weight,
-- tail.0.0.weight, tail.0.1.weight, ...): each tail is a ModuleList of its two Linear layers.
-- Errors name nn.AdaptiveLogSoftmaxWithLoss: bad sizes or cutoffs, targets out of range, shapes.
-- @usage local asm = nn.AdaptiveLogSoftmaxWithLoss(16, 100, {10, 40})
-- local r = asm(ember.randn(8, 16), ember.randint(1, 101, {8}))
-- print(r.output.shape, r.loss.shape, asm:log_prob(ember.randn(2, 16)).shape)   --> ember.Size{8}   ember.Size{}   ember.Size{2, 100}
-- @classmod nn.AdaptiveLogSoftmaxWithLoss
local errors = require "ember._errors"
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local Linear = require "ember.nn.Linear"
local ModuleList = require "ember.nn.ModuleList"

local ASM = Module:extend("AdaptiveLogSoftmaxWithLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ASM.SIGNATURE = { sizes = { "in_features", "n_classes", "cutoffs" }, options = { "div_value", "head_bias" } }

function ASM:__init(in_features, n_classes, cutoffs, opts)
  local name = "AdaptiveLogSoftmaxWithLoss"
  opts = Module.check_options("nn." .. name, opts, { "div_value", "head_bias", "dtype", "device" })
  for what, v in pairs({ in_features = in_features, n_classes = n_classes }) do
    if math.type(v) ~= "integer" or v < 1 then errors.raise("%s: %s must be a positive integer, got %s", name, what, tostring(v)) end
  end
  local ok = type(cutoffs) == "table" and #cutoffs >= 1
  for i = 1, ok and #cutoffs or 0 do
    local c = cutoffs[i]
    ok = ok and math.type(c) == "integer" and c >= 1 and c <= n_classes - 1 and (i == 1 or c > cutoffs[i - 1])
  end
  if not ok then
    errors.raise("%s: cutoffs must be a list of unique, positive integers in increasing order, each between 1 and "
      .. "n_classes - 1 (%d), got %s", name, n_classes - 1, require("ember.nn._conv").fmt(cutoffs))
  end
  local div = opts.div_value == nil and 4 or opts.div_value
  if type(div) ~= "number" or div <= 0 then errors.raise("%s: div_value must be a positive number, got %s", name, tostring(div)) end
  local head_bias = opts.head_bias == true
  if opts.head_bias ~= nil and type(opts.head_bias) ~= "boolean" then
    errors.raise("%s: head_bias must be true or false, got %s", name, tostring(opts.head_bias))
  end
  self.in_features, self.n_classes, self.div_value, self.head_bias = in_features, n_classes, div, head_bias
  self.cutoffs = table.move(cutoffs, 1, #cutoffs, 1, {})
  self.cutoffs[#self.cutoffs + 1] = n_classes
  self.shortlist_size, self.n_clusters = self.cutoffs[1], #cutoffs
  self.head_size = self.shortlist_size + self.n_clusters
  local lopts = { dtype = opts.dtype, device = opts.device }
  self.head = Linear(in_features, self.head_size, { bias = head_bias, dtype = opts.dtype, device = opts.device })
  self.tail = ModuleList()
  lopts.bias = false
  for i = 1, self.n_clusters do
    local hsz = math.floor(in_features // (div ^ i)) -- PyTorch's int(in_features // div_value ** (i + 1))
    if hsz < 1 then
      errors.raise("%s: cluster %d's projection would have %d features (in_features // div_value^%d); use a smaller "
        .. "div_value", name, i, hsz, i)
    end
    local osz = self.cutoffs[i + 1] - self.cutoffs[i]
    self.tail:append(ModuleList({ Linear(in_features, hsz, lopts), Linear(hsz, osz, lopts) }))
  end
end

-- input [B, in] (or [in]) checked; returns it batched and whether it was.
local function batch(self, who, input)
  Module.check_float_input(who, input)
  if (input.ndim ~= 1 and input.ndim ~= 2) or input.shape[input.ndim] ~= self.in_features then
    errors.raise("%s: expected an input [N, %d] or [%d] (in_features), got %s", who, self.in_features,
      self.in_features, errors.shape_str(input))
  end
  return input.ndim == 1 and input:unsqueeze(1) or input, input.ndim == 2
end

-- cluster i's log-probabilities of its classes for the rows x
local function tail_logprob(self, i, x)
  local t = self.tail[i]
  return t[2](t[1](x)):log_softmax(2)
end

--- Each row's log-probability of its target, and the loss (their negated mean).
-- @tparam Tensor input [N, in_features] or [in_features]
-- @tparam Tensor target int64 [N] (or 0-d), 1-based class ids
-- @treturn table {output = [N] (or 0-d), loss = 0-d}, also as [1] and [2]
function ASM:forward(input, target)
  local who = "AdaptiveLogSoftmaxWithLoss.forward"
  local x, batched = batch(self, who, input)
  if not ember.is_tensor(target) or target.dtype ~= "int64" or target.ndim ~= (batched and 1 or 0)
      or (batched and target.shape[1] ~= x.shape[1]) then
    errors.raise("%s: expected an int64 target %s of 1-based class ids, got %s", who,
      batched and ("[" .. x.shape[1] .. "]") or "(0-d, for an unbatched input)",
      ember.is_tensor(target) and (target.dtype .. " " .. errors.shape_str(target)) or type(target))
  end
  local ids = batched and target:totable() or { target:item() }
  local B, S = #ids, self.shortlist_size
  local head_index, rows = {}, {} -- each row's head column; the rows of each cluster
  for i = 1, self.n_clusters do rows[i] = {} end
  for r, c in ipairs(ids) do
    if c < 1 or c > self.n_classes then
      errors.raise("%s: target ids must lie in 1..%d (1-based), got %d", who, self.n_classes, c)
    end
    if c <= S then
      head_index[r] = c
    else
      local i = 1
      while c > self.cutoffs[i + 1] do i = i + 1 end
      head_index[r] = S + i
      rows[i][#rows[i] + 1] = { r, c - self.cutoffs[i] }
    end
  end
  local io = { dtype = "int64", device = x.device }
  local head = self.head(x):log_softmax(2)
  local output = head:gather(2, ember.tensor(head_index, io):view({ B, 1 })):squeeze(2)
  for i = 1, self.n_clusters do
    if #rows[i] > 0 then
      local r, rel = {}, {}
      for k, p in ipairs(rows[i]) do r[k], rel[k] = p[1], p[2] end
      local rt = ember.tensor(r, io)
      local lp = tail_logprob(self, i, x:index_select(1, rt)):gather(2, ember.tensor(rel, io):view({ #r, 1 })):squeeze(2)
      output = output:index_add(1, rt, lp)
    end
  end
  local loss = (-output):mean()
  if not batched then output = output:squeeze(1) end
  return { output = output, loss = loss, output, loss }
end

--- The log-probabilities of all the classes.
-- @tparam Tensor input [N, in_features] or [in_features]
-- @treturn Tensor [N, n_classes] (or [n_classes])
function ASM:log_prob(input)
  local x, batched = batch(self, "AdaptiveLogSoftmaxWithLoss.log_prob", input)
  local head = self.head(x):log_softmax(2)
  local parts = { head:narrow(2, 1, self.shortlist_size) }
  for i = 1, self.n_clusters do
    parts[#parts + 1] = tail_logprob(self, i, x) + head:narrow(2, self.shortlist_size + i, 1)
  end
  local out = ember.cat(parts, 2)
  return batched and out or out:squeeze(1)
end

--- The most likely class of each row (1-based), as PyTorch's predict.
-- @tparam Tensor input [N, in_features] or [in_features]
-- @treturn Tensor int64 [N] (or 0-d)
function ASM:predict(input)
  local _, id = self:log_prob(input):max(input.ndim)
  return id
end

--- Its sizes, for printing.
function ASM:extra_repr()
  return ("in_features=%d, n_classes=%d, cutoffs={%s}, div_value=%g, head_bias=%s"):format(self.in_features,
    self.n_classes, table.concat(self.cutoffs, ", ", 1, #self.cutoffs - 1), self.div_value, tostring(self.head_bias))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ASM.forward = errors.wrap(ASM.forward)
ASM.log_prob = errors.wrap(ASM.log_prob)
ASM.predict = errors.wrap(ASM.predict)

return ASM
