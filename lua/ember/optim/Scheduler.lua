--- optim.Scheduler: the base of the learning-rate schedules. A schedule is a
-- factor f(s) of each group's base lr, s = the number of :step() calls so
-- far (0 at construction, as torch.optim.lr_scheduler.LambdaLR):
--   sched = optim.WarmupCosine(opt, {warmup_steps=100, total_steps=10000})
--   for each batch: opt:step(); sched:step()
-- The base lr is the group's initial_lr (PyTorch's name, set from its lr by
-- the first schedule made on the optimizer, and saved in its state_dict).
-- The optimizer's groups get lr = base_lr * f(s) at construction and after
-- every step -- or, for the schedules PyTorch writes in its chainable form
-- (a `chain` method: StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR,
-- LinearLR, ConstantLR, PolynomialLR, MultiplicativeLR), the group's
-- current lr times the step's change, so that two schedules stepped on one
-- optimizer (ChainedScheduler) multiply, and an lr set by hand goes on from
-- there, as PyTorch's. `step(epoch)` jumps to a step (the closed form, as
-- PyTorch's deprecated step(epoch)). Every schedule takes PyTorch's
-- last_epoch (-1: a new schedule; k >= 0: resume from the groups'
-- initial_lr -- the optimizer's state_dict carries it -- and, as PyTorch's
-- initial step does, go to step k + 1 at once) and verbose (print each change, the groups numbered from 1
-- where PyTorch counts from 0); sched.last_epoch reads s
-- (last_step). state_dict() / load_state_dict() save and restore s, the
-- base lrs and the lrs.
-- @classmod optim.Scheduler
local error = require("ember._errors").error -- raises at the user's line
local Scheduler = {}
Scheduler.__index = Scheduler
Scheduler.__name = "Scheduler"

--- A subclass: `local S = Scheduler:extend("S")`, then define `S:factor(step)`.
-- @tparam string name
function Scheduler:extend(name)
  local cls = setmetatable({}, { __index = self, __call = function(c, ...)
    local o = setmetatable({}, c)
    o:__init(...)
    return o
  end })
  -- PyTorch's names read ember's: sched.last_epoch (last_step),
  -- ReduceLROnPlateau's num_bad_epochs (num_bad_steps)
  cls.__index = function(t, k)
    if k == "last_epoch" then return rawget(t, "last_step") end
    if k == "num_bad_epochs" then return rawget(t, "num_bad_steps") end
    return cls[k]
  end
  cls.__name, cls.__tostring = name, self.__tostring
  return cls
end

function Scheduler:_error(fmt, ...) error(self.__name .. ": " .. fmt:format(...), 3) end

-- The base lrs are the groups' initial_lr (PyTorch's: set from the lr by
-- the first schedule, last_epoch = -1; required to resume, last_epoch >= 0),
-- or `own` (CyclicLR's base_lr). Then PyTorch's initial step: step 0, or
-- last_epoch + 1 when resuming.
function Scheduler:__init(optimizer, last_epoch, verbose, own)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    self:_error("expected an optimizer, got %s", type(optimizer))
  end
  if last_epoch == nil then last_epoch = -1 end
  if math.type(last_epoch) ~= "integer" or last_epoch < -1 then
    self:_error("last_epoch must be an integer >= -1 (-1: a new schedule), got %s", tostring(last_epoch))
  end
  if verbose ~= nil and type(verbose) ~= "boolean" then
    self:_error("verbose must be a boolean, got %s", tostring(verbose))
  end
  self.optimizer, self.verbose = optimizer, verbose or false
  self.base_lrs = {}
  for i, g in ipairs(optimizer.param_groups) do
    if last_epoch == -1 then
      if g.initial_lr == nil then g.initial_lr = g.lr end
    elseif g.initial_lr == nil then
      self:_error("last_epoch = %d resumes a schedule, but param_groups[%d] has no initial_lr: load the "
        .. "optimizer's state_dict (saved while it had a schedule) first, or give last_epoch = -1", last_epoch, i)
    end
    self.base_lrs[i] = own and own[i] or g.initial_lr
  end
  self.last_step, self._step_count = last_epoch, 0
  self:_initial_step()
end

-- PyTorch's _initial_step: one step (to 0, or past the resumed step).
function Scheduler:_initial_step() self:step() end

-- Back to step 0 (SequentialLR at a milestone: PyTorch's step(0)).
function Scheduler:_restart() self:step(0) end

--- The learning-rate factor at a (1-based) step; every schedule defines it.
-- @tparam integer s the step
function Scheduler:factor(s) error(self.__name .. ".factor: not defined", 2) end

--- The lr of a group whose base lr is `base` at step s: base * factor(s)
-- (a schedule with a floor in lr units, CosineAnnealingLR's eta_min,
-- overrides this instead).
-- @number base
-- @tparam integer s the step
-- @tparam integer i the group's index (LambdaLR's per-group functions)
function Scheduler:lr_at(base, s, i) return base * self:factor(s, i) end

--- The parameter groups the schedule was made for, `{i, group}` pairs: a
-- group added later (Optimizer:add_param_group) keeps its own lr under a
-- closed-form schedule, as PyTorch's leave it (they zip the groups with
-- their base lrs); a chainable one changes it too, as PyTorch's (its
-- formula runs over every group; see Scheduler:_chain).
-- @treturn table
function Scheduler:_groups()
  local out, groups = {}, self.optimizer.param_groups
  for i = 1, math.min(#groups, #self.base_lrs) do out[i] = groups[i] end
  return out
end

function Scheduler:_apply()
  for i, g in ipairs(self:_groups()) do g.lr = self:lr_at(self.base_lrs[i], self.last_step, i) end
end

-- The groups' lrs as a list (they are what a step leaves: get_last_lr).
function Scheduler:_lrs()
  local lrs = {}
  for i, g in ipairs(self.optimizer.param_groups) do lrs[i] = g.lr end
  return lrs
end

-- The options of torch.optim.lr_scheduler's classes, given either as
-- PyTorch's positional arguments (`StepLR(opt, 30, 0.1)`) or as a table
-- (`StepLR(opt, {step_size = 30, gamma = 0.1})`): a table of `names`, and
-- every schedule's last_epoch and verbose (after them, positionally). A
-- list first (OneCycleLR's per-group max_lr) is a positional argument.
function Scheduler:_torch_opts(names, ...)
  local first = ...
  if type(first) == "table" and getmetatable(first) == nil and first[1] == nil then
    for k in pairs(first) do
      local known = k == "last_epoch" or k == "verbose"
      for _, n in ipairs(names) do known = known or n == k end
      if not known then self:_error("unknown option '%s' (expected %s)", tostring(k), table.concat(names, ", ")) end
    end
    return first
  end
  local o, args = {}, table.pack(...)
  for i, n in ipairs(names) do o[n] = args[i] end
  o.last_epoch, o.verbose = args[#names + 1], args[#names + 2]
  return o
end

-- PyTorch's _format_param: `v` (nil: `default`) is a number for every
-- group or a list of one per group; each must pass ok(v). Returns the list.
function Scheduler:_per_group(optimizer, name, v, default, what, ok)
  if v == nil then v = default end
  local n, out = #optimizer.param_groups, {}
  if type(v) == "table" and #v ~= n then self:_error("%s lists %d values for %d parameter groups", name, #v, n) end
  for i = 1, n do
    local x = type(v) == "table" and v[i] or v
    if type(x) ~= "number" or not ok(x) then
      self:_error("%s must be %s (or a list of one per parameter group), got %s", name, what, tostring(x))
    end
    out[i] = x
  end
  return out
end

-- The momentum a cyclic schedule drives (cycle_momentum): "betas" (beta1,
-- the Adam family, where `betas_ok`) or "momentum" (SGD, RMSprop).
function Scheduler:_momentum_option(optimizer, betas_ok)
  local d = optimizer.DEFAULTS or {}
  if betas_ok and d.betas ~= nil then return "betas" end
  if d.momentum ~= nil then return "momentum" end
  self:_error("cycle_momentum needs an optimizer with a momentum option%s (%s has none): give cycle_momentum = false",
    betas_ok and " or betas" or "", tostring(optimizer.__name))
end

-- Sets a group's momentum (or beta1: a new betas table, the defaults' own
-- table is shared between optimizers).
function Scheduler._set_momentum(g, option, m)
  if option == "betas" then g.betas = { m, g.betas[2] } else g.momentum = m end
end

-- gamma > 0 (a number); nil gives `default` (nil: required).
function Scheduler:_check_gamma(g, default)
  if g == nil then g = default end
  if type(g) ~= "number" or not (g > 0) then self:_error("gamma must be a number > 0, got %s", tostring(g)) end
  return g
end

--- Advances one step: each group's lr becomes base_lr * factor(step), or
-- (a chainable schedule) its lr times the step's change. `step(epoch)`
-- jumps to step `epoch` (the closed form, as PyTorch's step(epoch)).
-- @tparam[opt] integer epoch
function Scheduler:step(epoch)
  self._step_count = (self._step_count or 0) + 1
  if epoch == nil then
    self.last_step = self.last_step + 1
  else
    if math.type(epoch) ~= "integer" or epoch < 0 then
      self:_error("step(epoch): epoch must be an integer >= 0, got %s", tostring(epoch))
    end
    self.last_step = epoch
  end
  if self.chain and (epoch == nil or self.chain_only) then
    self:_chain()
  else
    self:_apply()
  end
  self:_record(epoch)
end

-- A chainable schedule's step: every group's lr through chain(), a group
-- added after the schedule was made too (PyTorch's formulas run over all
-- the optimizer's groups); chain() returns nil where PyTorch's formula
-- leaves a group out (it zips with the base lrs there).
function Scheduler:_chain(apply)
  local lrs = {}
  for i, g in ipairs(self.optimizer.param_groups) do
    local v = self:chain(g.lr, self.last_step, i)
    lrs[i] = v == nil and g.lr or v
  end
  if apply ~= false then
    for i, g in ipairs(self.optimizer.param_groups) do g.lr = lrs[i] end
  end
  return lrs
end

-- After a step: the lrs it left (get_last_lr), printed with verbose as PyTorch's.
function Scheduler:_record(epoch)
  self._last_lr = self:_lrs()
  if not self.verbose then return end
  for i, g in ipairs(self:_groups()) do
    if epoch == nil then
      print(("Adjusting learning rate of group %d to %.4e."):format(i, g.lr))
    else
      print(("Epoch %05d: adjusting learning rate of group %d to %.4e."):format(epoch, i, g.lr))
    end
  end
end

--- The learning rates set by the last step, one per parameter group.
function Scheduler:get_last_lr()
  local lrs = {}
  for i, v in ipairs(self._last_lr or self:_lrs()) do lrs[i] = v end
  return require("ember._listing").list(lrs) -- print(sched:get_last_lr()) shows them
end

--- PyTorch's get_lr(): the lrs the schedule's formula gives at the current
-- step. For a chainable schedule that is its step's change applied once
-- more to the lrs in use (PyTorch warns about it: get_last_lr() is the lrs
-- in use); for a closed-form one, the lrs in use.
function Scheduler:get_lr()
  if not self.chain then return self:get_last_lr() end
  return require("ember._listing").list(self:_chain(false))
end

--- {last_step=, last_epoch= (the same, PyTorch's name), base_lrs=, _last_lr=}, for checkpoints.
function Scheduler:state_dict()
  local base, last = {}, {}
  for i, v in ipairs(self.base_lrs) do base[i] = v end
  for i, v in ipairs(self:get_last_lr()) do last[i] = v end
  return { last_step = self.last_step, last_epoch = self.last_step, base_lrs = base, _last_lr = last }
end

-- A state_dict that torch.optim.lr_scheduler wrote (torch.save, read back by
-- ember.load) for a schedule whose state holds no base lrs (ChainedScheduler,
-- SequentialLR, ReduceLROnPlateau): a copy with the fields ember's
-- load_state_dict reads -- the schedules' states (torch's _schedulers), the
-- position (ChainedScheduler's, which torch does not keep, its first
-- schedule's), the lrs (torch's _last_lr) and this scheduler's own base lrs.
-- Any other table (ember's own state_dict has base_lrs) comes back as it is.
function Scheduler:_from_torch(sd)
  if type(sd) ~= "table" or sd.base_lrs ~= nil then return sd end
  local out = {}
  for k, v in pairs(sd) do out[k] = v end
  out.schedulers = out.schedulers or out._schedulers
  local first = type(out.schedulers) == "table" and out.schedulers[1]
  if out.last_step == nil and out.last_epoch == nil and type(first) == "table" then
    out.last_step = first.last_step or first.last_epoch
  end
  out.lrs = out.lrs or out._last_lr
  out.base_lrs = { table.unpack(self.base_lrs) }
  return out
end

--- Restores a state_dict() (checked against the optimizer's groups).
-- @tparam table sd
function Scheduler:load_state_dict(sd)
  if type(sd) == "table" and sd.last_step == nil then sd.last_step = sd.last_epoch end -- PyTorch's name
  if type(sd) ~= "table" or math.type(sd.last_step) ~= "integer" or type(sd.base_lrs) ~= "table" then
    self:_error("load_state_dict: expected {last_step = integer, base_lrs = {...}}")
  end
  -- one per group the schedule was made for (a group added later has none, as in PyTorch)
  if #sd.base_lrs ~= #self.base_lrs then
    self:_error("load_state_dict: %d base lrs for %d parameter groups", #sd.base_lrs, #self.base_lrs)
  end
  self.last_step = sd.last_step
  for i, v in ipairs(sd.base_lrs) do self.base_lrs[i] = v end
  self:_apply() -- the closed form (a cycled momentum too)
  if type(sd._last_lr) == "table" and #sd._last_lr == #self.optimizer.param_groups then
    -- then the lrs it left (a chained schedule's are not its own factor's;
    -- a state_dict saved before ember kept them has none)
    self._last_lr = {}
    for i, g in ipairs(self.optimizer.param_groups) do
      g.lr = sd._last_lr[i]
      self._last_lr[i] = g.lr
    end
  end
  return self
end

function Scheduler:__tostring()
  return ("%s(step=%d, lr=%s)"):format(self.__name, self.last_step,
    table.concat(self:get_last_lr(), ", "))
end

-- Shared by the warmup schedules: reads and checks their options.
function Scheduler:_warmup_opts(opts)
  opts = opts or {}
  local w, t = opts.warmup_steps or 0, opts.total_steps
  if math.type(w) ~= "integer" or w < 0 then self:_error("warmup_steps must be an integer >= 0, got %s", tostring(w)) end
  if math.type(t) ~= "integer" or t < 1 then self:_error("total_steps must be a positive integer, got %s", tostring(t)) end
  if w > t then self:_error("warmup_steps (%d) exceeds total_steps (%d)", w, t) end
  local m = opts.min_lr_ratio or 0
  if type(m) ~= "number" or not (m >= 0 and m <= 1) then self:_error("min_lr_ratio must be in [0, 1], got %s", tostring(m)) end
  self.warmup_steps, self.total_steps, self.min_lr_ratio = w, t, m
end

-- Linear warmup: steps 0 .. warmup-1 use (s+1)/warmup of the lr, so the
-- first update already learns and step warmup-1 uses the full lr. Then the
-- decay's progress runs from 0 (step warmup) to 1 (step total_steps), and
-- stays at the floor after.
function Scheduler:_warmup_progress(s)
  if s < self.warmup_steps then return nil, (s + 1) / self.warmup_steps end
  local span = math.max(1, self.total_steps - self.warmup_steps)
  return math.min(1, (s - self.warmup_steps) / span)
end

return Scheduler
