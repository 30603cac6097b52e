--- optim.ReduceLROnPlateau(optimizer [, {mode = "min", factor = 0.1, patience = 10,
-- threshold = 1e-4, threshold_mode = "rel", cooldown = 0, min_lr = 0, eps = 1e-8,
-- verbose = false}]) (or PyTorch's positional order, `(opt, "max", 0.5, 3)`):
-- torch.optim.lr_scheduler.ReduceLROnPlateau. `sched:step(metric)` after each
-- evaluation: when the metric has not improved (by more than threshold, relative
-- or absolute) for more than `patience` steps, every group's lr is multiplied
-- by `factor` (not below its `min_lr`: a number, or one per group; a change
-- smaller than eps is skipped), then `cooldown` steps pass before bad steps
-- count again. Unlike the other schedules the lr depends on the metrics'
-- history, which state_dict() saves with the lrs.
-- @usage local opt = optim.SGD(nn.Linear(4, 2), {lr = 0.1})
-- local sched = optim.ReduceLROnPlateau(opt, {patience = 2})
-- for _, val_loss in ipairs({1.0, 0.9, 0.9, 0.9, 0.9}) do sched:step(val_loss) end
-- print(opt.param_groups[1].lr)   --> 0.01
-- @classmod optim.ReduceLROnPlateau
local Scheduler = require "ember.optim.Scheduler"

local ReduceLROnPlateau = Scheduler:extend("ReduceLROnPlateau")

local NAMES = { "mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps", "verbose" }

function ReduceLROnPlateau:__init(optimizer, ...)
  local first = ...
  if first ~= nil and type(first) ~= "table" and type(first) ~= "string" then
    self:_error("options must be a table (or PyTorch's positional mode, factor, ...), got %s",
      type(first))
  end
  -- a list (min_lr's per-group values) is not the options table
  local opts = self:_torch_opts(NAMES, ...)
  if opts.last_epoch ~= nil then self:_error("takes no last_epoch (its position is the metrics' history)") end
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    self:_error("expected an optimizer, got %s", type(optimizer))
  end
  self.optimizer = optimizer
  self:_settings(opts)
  self.best = self.mode == "min" and math.huge or -math.huge
  self.num_bad_steps, self.cooldown_counter = 0, 0
  -- not a schedule of PyTorch's _LRScheduler: no initial_lr, no initial step
  self.verbose, self.last_step = opts.verbose or false, 0
  self.base_lrs = self:_lrs()
end

-- Checks and sets the settings (mode, factor, ..., min_lr: a number or one per group)
-- from opts, the defaults for those not there: for the constructor and load_state_dict.
function ReduceLROnPlateau:_settings(opts)
  local function number(k, default, ok, what)
    local v = opts[k] == nil and default or opts[k]
    if type(v) ~= "number" or not ok(v) then self:_error("%s must be %s, got %s", k, what, tostring(v)) end
    return v
  end
  self.mode = opts.mode or "min"
  if self.mode ~= "min" and self.mode ~= "max" then self:_error("mode must be \"min\" or \"max\", got %s", tostring(self.mode)) end
  self.threshold_mode = opts.threshold_mode or "rel"
  if self.threshold_mode ~= "rel" and self.threshold_mode ~= "abs" then
    self:_error("threshold_mode must be \"rel\" or \"abs\", got %s", tostring(self.threshold_mode))
  end
  self.factor = number("factor", 0.1, function(v) return v < 1 and v >= 0 end, "a number in [0, 1)")
  self.patience = number("patience", 10, function(v) return math.type(v) == "integer" and v >= 0 end, "an integer >= 0")
  self.threshold = number("threshold", 1e-4, function(v) return v >= 0 end, "a number >= 0")
  self.cooldown = number("cooldown", 0, function(v) return math.type(v) == "integer" and v >= 0 end, "an integer >= 0")
  self.eps = number("eps", 1e-8, function(v) return v >= 0 end, "a number >= 0")
  local n = #self.optimizer.param_groups
  local m = opts.min_lr or 0
  self.min_lrs = {}
  for i = 1, n do
    local v = type(m) == "table" and m[i] or m
    if type(v) ~= "number" or not (v >= 0) then
      self:_error("min_lr must be a number >= 0 or one per parameter group (%d), got %s", n, tostring(v))
    end
    self.min_lrs[i] = v
  end
  if type(m) == "table" and #m ~= n then self:_error("min_lr lists %d lrs for %d parameter groups", #m, n) end
  if opts.verbose ~= nil and type(opts.verbose) ~= "boolean" then
    self:_error("verbose must be a boolean, got %s", tostring(opts.verbose))
  end
end

-- The lrs are the optimizer's own: nothing to apply at construction.
function ReduceLROnPlateau:_apply() end

--- Not a factor schedule: the lr follows the metrics (see step).
function ReduceLROnPlateau:factor() self:_error("has no factor: the lr follows the metrics given to step") end

function ReduceLROnPlateau:_is_better(a)
  local best, t = self.best, self.threshold
  if self.mode == "min" then
    return self.threshold_mode == "rel" and a < best * (1 - t) or (self.threshold_mode == "abs" and a < best - t)
  end
  return self.threshold_mode == "rel" and a > best * (1 + t) or (self.threshold_mode == "abs" and a > best + t)
end

--- One evaluation's metric (a number, or a one-element tensor): may reduce the lrs.
-- @param metric
function ReduceLROnPlateau:step(metric)
  if type(metric) == "userdata" and metric.item then
    if metric:numel() ~= 1 then -- torch's float(metrics): one element
      self:_error("step needs the metric (a number or a one-element tensor), got a tensor of %d elements",
        metric:numel())
    end
    metric = metric:item()
  end
  if type(metric) ~= "number" then self:_error("step needs the metric (a number), got %s", type(metric)) end
  self.last_step = self.last_step + 1
  if self:_is_better(metric) then
    self.best, self.num_bad_steps = metric, 0
  else
    self.num_bad_steps = self.num_bad_steps + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_steps = 0
  end
  if self.num_bad_steps > self.patience then
    for i, g in ipairs(self:_groups()) do
      local new = math.max(g.lr * self.factor, self.min_lrs[i])
      if g.lr - new > self.eps then
        g.lr = new
        if self.verbose then
          print(("Epoch %05d: reducing learning rate of group %d to %.4e."):format(self.last_step, i, new))
        end
      end
    end
    self.cooldown_counter, self.num_bad_steps = self.cooldown, 0
  end
end

--- The groups' lrs now (they follow the metrics).
function ReduceLROnPlateau:get_last_lr() return require("ember._listing").list(self:_lrs()) end

--- Its position, the metrics' history and its settings (PyTorch's fields:
-- mode, factor, patience, threshold, threshold_mode, cooldown, min_lrs, eps,
-- verbose, best, num_bad_epochs, cooldown_counter), with the lrs, for checkpoints.
function ReduceLROnPlateau:state_dict()
  local sd = Scheduler.state_dict(self)
  -- best is +-inf before the first step: left out (files write numbers)
  sd.best = self.best ~= math.huge and self.best ~= -math.huge and self.best or nil
  sd.num_bad_steps, sd.cooldown_counter = self.num_bad_steps, self.cooldown_counter
  sd.num_bad_epochs = self.num_bad_steps -- PyTorch's name
  sd.lrs = self:get_last_lr()
  sd.mode, sd.factor, sd.patience, sd.threshold = self.mode, self.factor, self.patience, self.threshold
  sd.threshold_mode, sd.cooldown, sd.eps, sd.verbose = self.threshold_mode, self.cooldown, self.eps, self.verbose
  sd.min_lrs = {}
  for i, v in ipairs(self.min_lrs) do sd.min_lrs[i] = v end
  return sd
end

local SETTINGS = { "mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "eps" }

--- Restores a state_dict() (or torch's, read by ember.load), the lrs and settings included (a state dict
-- saved without the settings keeps the scheduler's own).
-- @tparam table sd
function ReduceLROnPlateau:load_state_dict(sd)
  sd = self:_from_torch(sd) -- torch's layout, from a file torch.save wrote
  Scheduler.load_state_dict(self, sd)
  if type(sd.lrs) ~= "table" or #sd.lrs ~= #self.optimizer.param_groups then
    self:_error("load_state_dict: expected one lr per parameter group")
  end
  local opts = { min_lr = sd.min_lrs == nil and self.min_lrs or sd.min_lrs }
  for _, k in ipairs(SETTINGS) do opts[k] = sd[k] == nil and self[k] or sd[k] end
  self:_settings(opts)
  if sd.verbose ~= nil then self.verbose = sd.verbose end
  self.best = sd.best or (self.mode == "min" and math.huge or -math.huge)
  self.num_bad_steps = sd.num_bad_steps or sd.num_bad_epochs or 0
  self.cooldown_counter = sd.cooldown_counter or 0
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = sd.lrs[i] end
  return self
end

return ReduceLROnPlateau
