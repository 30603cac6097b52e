--- optim.swa_utils: torch.optim.swa_utils, stochastic weight averaging:
-- swa_model = optim.swa_utils.AveragedModel(model) and swa_sched =
-- optim.swa_utils.SWALR(opt, {swa_lr = 0.05}); each epoch past swa_start,
-- swa_model:update_parameters(model) and swa_sched:step(); at the end,
-- optim.swa_utils.update_bn(loader, swa_model).
-- AveragedModel(model [, {device =, avg_fn =, use_buffers = false}]) keeps
-- a copy of model (its own tensors, tied ones still tied) whose parameters
-- are the running mean of model's at each update_parameters (avg_fn(avg, p,
-- n) for another average: n, the updates so far, is a number here, a 0-d
-- tensor in PyTorch); n_averaged is its int64 buffer, as PyTorch's, and its
-- state dict names are PyTorch's (module.<name>, n_averaged).
-- SWALR(optimizer, swa_lr [, anneal_epochs = 10 [, anneal_strategy = "cos"]])
-- (or a table of them) anneals each group's lr to swa_lr over anneal_epochs
-- steps ("cos" or "linear") and holds it there, as PyTorch's.
-- update_bn(loader, model [, device]) recomputes the BatchNorm running
-- statistics in one pass over loader (an ember DataLoader, a list of
-- batches or an iterator; a batch that is a list gives its first element).
-- @usage local m = nn.Linear(2, 1)
-- local swa = optim.swa_utils.AveragedModel(m)
-- swa:update_parameters(m)
-- local b0 = m.bias:item()
-- ember.no_grad(function() m.bias:fill_(b0 + 1) end)
-- swa:update_parameters(m)
-- print(swa.n_averaged:item(), math.abs(swa.module.bias:item() - (b0 + 0.5)) < 1e-6)   --> 2	true
-- @module optim.swa_utils
local ember = require "ember.nn._ember"
local core = require "ember.core"
local errors = require "ember._errors"
local Module = require "ember.nn.Module"
local Scheduler = require "ember.optim.Scheduler"

local M = {}

local function is_module(v) return type(v) == "table" and rawget(v, "_reg") ~= nil end

-- PyTorch's deepcopy of a module: its tables copied (module instances and
-- plain tables; classes and other tables with a metatable shared), its
-- tensors cloned (requires_grad kept), a tensor or table reached twice
-- (tied weights) copied once.
local function deepcopy(v, memo)
  if core.is_tensor(v) then
    local c = memo[v]
    if c == nil then
      c = v:detach():clone()
      if v.requires_grad then c:requires_grad_(true) end
      memo[v] = c
    end
    return c
  end
  if type(v) ~= "table" then return v end
  if memo[v] then return memo[v] end
  local mt = getmetatable(v)
  if mt ~= nil and not is_module(v) then return v end
  local c = {}
  memo[v] = c
  for k, x in pairs(v) do rawset(c, deepcopy(k, memo), deepcopy(x, memo)) end
  return setmetatable(c, mt)
end

local AveragedModel = Module:extend("AveragedModel")
M.AveragedModel = AveragedModel

-- The default average: the running mean.
local function mean(avg, p, n) return avg + (p - avg) / (n + 1) end

function AveragedModel:__init(model, opts)
  if not is_module(model) then
    errors.raise("swa_utils.AveragedModel: expected a module, got %s", type(model))
  end
  opts = Module.check_options("swa_utils.AveragedModel", opts, { "device", "avg_fn", "use_buffers" })
  if opts.avg_fn ~= nil and type(opts.avg_fn) ~= "function" then
    errors.raise("swa_utils.AveragedModel: avg_fn must be a function(averaged, param, n), got %s", type(opts.avg_fn))
  end
  if opts.use_buffers ~= nil and type(opts.use_buffers) ~= "boolean" then
    errors.raise("swa_utils.AveragedModel: use_buffers must be a boolean, got %s", tostring(opts.use_buffers))
  end
  local copy = deepcopy(model, {})
  if opts.device ~= nil then copy = copy:to(opts.device) end
  self.module = copy
  self:register_buffer("n_averaged", ember.zeros({}, { dtype = "int64", device = opts.device }))
  rawset(self, "avg_fn", opts.avg_fn or mean)
  rawset(self, "use_buffers", opts.use_buffers or false)
end

--- The copy's forward.
function AveragedModel:forward(...) return self.module(...) end

-- The tensors averaged: the parameters, and with use_buffers the buffers too.
local function averaged(m, use_buffers)
  local out = {}
  for _, p in ipairs(m:parameters()) do out[#out + 1] = p end
  if use_buffers then for _, b in ipairs(m:buffers()) do out[#out + 1] = b end end
  return out
end

--- Folds model's parameters (and buffers, with use_buffers) into the average.
-- @param model the module being trained (the same architecture)
function AveragedModel:update_parameters(model)
  if not is_module(model) then
    errors.raise("swa_utils.AveragedModel.update_parameters: expected a module, got %s", type(model))
  end
  local mine, theirs = averaged(self.module, self.use_buffers), averaged(model, self.use_buffers)
  if #mine ~= #theirs then
    errors.raise("swa_utils.AveragedModel.update_parameters: the model has %d tensors to average, the average %d",
      #theirs, #mine)
  end
  local n = self.n_averaged:item()
  ember.no_grad(function()
    for i, a in ipairs(mine) do
      local p = theirs[i]:detach()
      if p.device ~= a.device then p = p:to(a.device) end
      if n == 0 then a:copy_(p) else a:copy_(self.avg_fn(a:detach(), p, n)) end
    end
    self.n_averaged:fill_(n + 1)
  end)
end

-- The first tensor of a batch: the batch, or its first element.
local function first(b)
  if type(b) == "table" and not core.is_tensor(b) then return b[1] end
  return b
end

--- Recomputes every BatchNorm's running statistics over one pass of loader
-- (the cumulative average: momentum nil, as PyTorch's), in training mode,
-- then restores the momenta and the mode.
-- @param loader an ember DataLoader, a list of batches, or an iterator function
-- @param model a module
-- @param[opt] device the batches are moved there first
function M.update_bn(loader, model, device)
  if not is_module(model) then errors.raise("swa_utils.update_bn: expected a module, got %s", type(model)) end
  local nn = require "ember.nn"
  local bns = {}
  for _, m in ipairs(model:modules()) do
    if m:isinstance({ nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d }) and m.running_mean ~= nil then
      bns[#bns + 1] = m
    end
  end
  if #bns == 0 then return end
  local momenta = {}
  ember.no_grad(function()
    for i, m in ipairs(bns) do
      m.running_mean = ember.zeros_like(m.running_mean)
      m.running_var = ember.ones_like(m.running_var)
      momenta[i] = m.momentum
      m.momentum = nil
      if m.num_batches_tracked ~= nil then m.num_batches_tracked:zero_() end
    end
  end)
  local was_training = model.training
  model:train()
  local iter
  if type(loader) == "function" then
    iter = loader
  elseif type(loader) == "table" and type(loader.iter) == "function" then
    iter = loader:iter()
  elseif type(loader) == "table" then
    local i = 0
    iter = function() i = i + 1; return loader[i] end
  else
    errors.raise("swa_utils.update_bn: loader must be a DataLoader, a list of batches or an iterator, got %s",
      type(loader))
  end
  ember.no_grad(function()
    while true do
      local x = first(iter())
      if x == nil then break end
      if device ~= nil then x = x:to(device) end
      model(x)
    end
  end)
  for i, m in ipairs(bns) do m.momentum = momenta[i] end
  model:train(was_training)
end

local SWALR = Scheduler:extend("SWALR")
M.SWALR = SWALR
SWALR.chain_only = true -- no closed form, as PyTorch's

local ANNEAL = {
  cos = function(t) return (1 - math.cos(math.pi * t)) / 2 end,
  linear = function(t) return t end,
}

function SWALR:__init(optimizer, ...)
  local o = self:_torch_opts({ "swa_lr", "anneal_epochs", "anneal_strategy" }, ...)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    self:_error("expected an optimizer, got %s", type(optimizer))
  end
  if o.swa_lr == nil then self:_error("swa_lr is required (a number, or one per parameter group)") end
  local swa = self:_per_group(optimizer, "swa_lr", o.swa_lr, nil, "a number >= 0",
    function(x) return x >= 0 and x < math.huge end)
  local strategy = o.anneal_strategy or "cos"
  if not ANNEAL[strategy] then
    self:_error("anneal_strategy must be \"cos\" or \"linear\", got %s", tostring(strategy))
  end
  local epochs = o.anneal_epochs == nil and 10 or o.anneal_epochs
  if math.type(epochs) ~= "integer" or epochs < 0 then
    self:_error("anneal_epochs must be an integer >= 0, got %s", tostring(epochs))
  end
  for i, g in ipairs(optimizer.param_groups) do g.swa_lr = swa[i] end
  self.anneal_epochs, self.anneal_strategy, self.anneal_func = epochs, strategy, ANNEAL[strategy]
  Scheduler.__init(self, optimizer, o.last_epoch, o.verbose)
end

--- PyTorch's formula: the lr moves from where it was towards swa_lr by the
-- anneal's share of the step (a group without swa_lr is left).
-- @number lr the group's lr
-- @tparam integer s the step (unused: the formula counts the steps taken)
-- @tparam integer i the group
function SWALR:chain(lr, s, i)
  local swa = self.optimizer.param_groups[i].swa_lr
  if swa == nil then return nil end
  local step = self._step_count - 1
  if self.anneal_epochs == 0 then step = math.max(1, step) end
  local span = math.max(1, self.anneal_epochs)
  local prev_alpha = self.anneal_func(math.max(0, math.min(1, (step - 1) / span)))
  local prev_lr = prev_alpha == 1 and swa or (lr - prev_alpha * swa) / (1 - prev_alpha)
  local alpha = self.anneal_func(math.max(0, math.min(1, step / span)))
  return swa * alpha + prev_lr * (1 - alpha)
end

--- Not a factor schedule: see chain.
function SWALR:factor() self:_error("has no factor: its lr moves towards swa_lr") end

--- {last_step=, base_lrs=, _last_lr=, _step_count=}: its formula counts the steps taken.
function SWALR:state_dict()
  local sd = Scheduler.state_dict(self)
  sd._step_count = self._step_count
  return sd
end

--- Restores a state_dict().
-- @tparam table sd
function SWALR:load_state_dict(sd)
  Scheduler.load_state_dict(self, sd)
  if math.type(sd._step_count) == "integer" then self._step_count = sd._step_count end
  return self
end

-- Nothing to apply in closed form (state_dict's lrs restore the groups').
function SWALR:_apply() end

return M
