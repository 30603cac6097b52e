--- optim.Optimizer: the base of SGD, Adam and AdamW (PyTorch's layout).
--   opt = optim.AdamW(params, {lr=1e-3, ...})   -- or optim.SGD(params, 0.1): PyTorch's positional lr
-- params: a list of tensors, a module (its parameters()), or a list of
-- groups {params={...}, lr=..., <other options>} whose missing options come
-- from the defaults. opt.param_groups[i] holds each group's options (a
-- scheduler changes .lr there); opt.state[k] the state of the k-th
-- parameter (1-based, counted across groups), also opt.state[p] by the
-- parameter itself, as PyTorch's; opt.defaults every option's default.
-- Subclasses define DEFAULTS (name -> default), POSITIONAL (the order of
-- PyTorch's positional options after lr: optim.SGD(params, 0.1, 0.9), with
-- a table of the rest by name last, `optim.SGD(params, 0.1, {momentum =
-- 0.9})`) and update(p, grad, state, group), which makes one fused C call.
-- @classmod optim.Optimizer
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"

local Optimizer = {}
Optimizer.__index = Optimizer
Optimizer.__name = "Optimizer"

--- A subclass with its own defaults: `local MyOpt = Optimizer:extend("MyOpt", {lr = 1e-3})`.
-- @tparam string name
-- @tparam table defaults the options and their defaults (lr = "required" makes lr required)
-- @tparam[opt] table flags the names of torch's flags it takes and ignores (`{"foreach"}`: see FLAGS)
function Optimizer:extend(name, defaults, flags)
  local cls = setmetatable({}, { __index = self, __call = function(c, ...)
    local o = setmetatable({}, c)
    o:__init(...)
    return o
  end })
  cls.__index, cls.__name, cls.DEFAULTS = cls, name, defaults
  cls.FLAGS = {}
  for _, f in ipairs(flags or {}) do cls.FLAGS[f] = true end
  cls.__tostring = self.__tostring
  return cls
end

local function is_tensor(v)
  local mt = type(v) == "userdata" and getmetatable(v)
  return mt and mt.__name == "ember.Tensor" or false
end

--- Is v a number in [lo, hi) (hi defaults to +inf, excluded)? NaN fails
-- every comparison, so a check written as `v < 0` would let it through.
function Optimizer.in_range(v, lo, hi)
  return type(v) == "number" and v >= lo and v < (hi or math.huge)
end

function Optimizer:_error(fmt, ...) error(self.__name .. ": " .. fmt:format(...), 3) end

-- torch.optim's flags on how an update runs rather than what it computes,
-- taken where torch 1.13's optimizer takes them (each class's FLAGS) and
-- ignored: foreach, fused and capturable (a boolean or nil: ember's update
-- is one fused C call or a few tensor ops per parameter either way, and
-- the same numbers); differentiable only false (ember's steps are not
-- recorded by autograd).
Optimizer.FLAGS = {}

function Optimizer:_check_flag(k, v)
  if v ~= nil and type(v) ~= "boolean" then self:_error("%s must be a boolean or nil, got %s", k, tostring(v)) end
  if k == "differentiable" and v then
    self:_error("differentiable = true is not supported: ember's optimizer steps are not recorded by autograd")
  end
end

function Optimizer:_check_names(opts)
  for k, v in pairs(opts) do
    if self.FLAGS[k] then
      self:_check_flag(k, v)
    elseif k ~= "params" and self.DEFAULTS[k] == nil then
      local names = {}
      for n in pairs(self.DEFAULTS) do names[#names + 1] = n end
      for n in pairs(self.FLAGS) do names[#names + 1] = n end
      table.sort(names)
      self:_error("unknown option '%s' (options: %s)", tostring(k), table.concat(names, ", "))
    end
  end
end

-- Fills a group's options from `opts` and the defaults, rejecting unknown names.
function Optimizer:_group(g, opts)
  self:_check_names(opts)
  for k, def in pairs(self.DEFAULTS) do
    local v = opts[k]
    if v == nil then v = self.defaults[k] end
    if v == nil then v = def end
    g[k] = v
  end
  self:check_group(g)
  return g
end

--- Checks a parameter group's options; subclasses extend it.
function Optimizer:check_group(g)
  if g.lr == "required" then self:_error("lr is required (give {lr = ...})") end
  if not Optimizer.in_range(g.lr, 0) then
    self:_error("lr must be a number >= 0, got %s", type(g.lr) == "string" and ("the string %q"):format(g.lr)
      or tostring(g.lr))
  end
  if self.DEFAULTS.maximize ~= nil and type(g.maximize) ~= "boolean" then
    self:_error("maximize must be a boolean, got %s", tostring(g.maximize))
  end
end

-- PyTorch's positional options: optim.SGD(params, 0.1, 0.9) or
-- optim.Adam(params, 1e-3, {0.9, 0.99}), in the class's POSITIONAL order
-- after lr, and a table of the rest by name last (PyTorch's keywords):
-- optim.SGD(params, 0.1, {momentum = 0.9}).
function Optimizer:_positional(lr, ...)
  local args = table.pack(...)
  local n = args.n
  while n > 0 and args[n] == nil do n = n - 1 end
  local kw = args[n]
  if n > 0 and type(kw) == "table" and getmetatable(kw) == nil and kw[1] == nil then
    n = n - 1
  else
    kw = {}
  end
  local order = self.POSITIONAL or {}
  if n > #order then
    self:_error("takes at most %d positional options (lr, %s) and a table of the rest, got %d", #order + 1,
      table.concat(order, ", "), n + 1)
  end
  local o = { lr = lr }
  for i = 1, n do o[order[i]] = args[i] end
  for k, v in pairs(kw) do
    if o[k] ~= nil then self:_error("%s is given twice (by position and by name)", tostring(k)) end
    o[k] = v
  end
  return o
end

function Optimizer:__init(params, opts, ...)
  if type(opts) == "number" then
    opts = self:_positional(opts, ...)
  elseif select("#", ...) > 0 and (...) ~= nil then
    self:_error("takes its options as one table {lr = ...} (or PyTorch's positional lr, ...), got a %s after it",
      type((...)))
  end
  if opts ~= nil and type(opts) ~= "table" then
    self:_error("options must be a table {lr = ...} or the lr, got %s", type(opts))
  end
  opts = opts or {}
  self.defaults = {}
  for k, v in pairs(opts) do self.defaults[k] = v end
  -- every option, as PyTorch's optimizer.defaults (false stands for a nil-able one's None)
  for k, v in pairs(self.DEFAULTS) do if self.defaults[k] == nil then self.defaults[k] = v end end
  if type(params) ~= "table" and type(params) ~= "userdata" then
    self:_error("params must be a list of tensors, a module or a list of groups, got %s", type(params))
  end
  if is_tensor(params) then -- PyTorch refuses it too (an iterable of tensors is expected)
    self:_error("params must be a list of tensors, a module or a list of groups, got one tensor: give {p}")
  end
  self:_check_names(opts)
  if not is_tensor(params) and params.parameters then params = params:parameters() end
  if #params == 0 and params.params ~= nil then
    self:_error("params must be a list of groups: wrap the group in one, {{params = {...}, lr = ...}}")
  end
  if #params == 0 and next(params) ~= nil then
    local k = next(params)
    self:_error("params must be a list, got a table keyed by %s %s (a named_parameters() map? give "
      .. "m:parameters() or the module)", type(k), type(k) == "string" and ("'%s'"):format(k) or tostring(k))
  end
  local groups = params
  if is_tensor(params[1]) or #params == 0 then groups = { { params = params } } end
  self.param_groups, self._params, self._index = {}, {}, {}
  self.state = self:_new_state()
  for gi, spec in ipairs(groups) do self:_add_group(gi, spec) end
  if #self._params == 0 then self:_error("got an empty parameter list") end
end

-- An empty state table: opt.state[k] by the parameter's position, and
-- opt.state[p] by the parameter (PyTorch's key) looks up its position.
function Optimizer:_new_state()
  local index = self._index
  return setmetatable({}, { __index = function(t, k)
    local i = is_tensor(k) and index[k]
    if i then return rawget(t, i) end
  end })
end

-- Checks one group spec {params = {...}, lr = ...} and appends it.
function Optimizer:_add_group(gi, spec)
  local params = type(spec) == "table" and spec.params or nil
  if is_tensor(params) then
    params = { params } -- {params = w}: one tensor, as torch's add_param_group takes it
  elseif type(params) ~= "table" then
    self:_error("group %d must be a table with a params list", gi)
  end
  if not is_tensor(params) and params.parameters then params = params:parameters() end
  local seen = {}
  for _, p in ipairs(self._params) do seen[p] = true end
  local g = { params = {} }
  for i, p in ipairs(params) do
    if not is_tensor(p) then self:_error("group %d, parameter %d is a %s, not a tensor", gi, i, type(p)) end
    -- a frozen parameter (requires_grad false) is kept and skipped while it
    -- has no gradient, as PyTorch's optimizers do (fine-tuning freezes some)
    if not p.is_leaf then
      self:_error("group %d, parameter %d is not a leaf (the result of an op): optimize the tensors "
        .. "it was computed from, or p:detach():requires_grad_()", gi, i)
    end
    if seen[p] then
      self:_error("group %d, parameter %d is already optimized (in this or an earlier group)", gi, i)
    end
    seen[p] = true
    g.params[i] = p
  end
  local o = {}
  for k, v in pairs(spec) do if k ~= "params" then o[k] = v end end
  self:_group(g, o)
  for _, p in ipairs(g.params) do
    self._params[#self._params + 1] = p
    self._index[p] = #self._params
  end
  self.param_groups[gi] = g
end

--- Adds a parameter group, as PyTorch's `add_param_group` (fine-tuning:
-- unfreeze a layer and give it its own lr). Options not given take the
-- optimizer's defaults; a parameter already optimized is an error.
-- @tparam table group `{params = {...} or a module, lr = ..., ...}`
-- @usage local m = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
-- local opt = optim.SGD(m[2], {lr = 0.1, momentum = 0.9})
-- opt:add_param_group({params = m[1]:parameters(), lr = 0.01})
-- print(#opt.param_groups, opt.param_groups[2].lr, opt.param_groups[2].momentum)   --> 2	0.01	0.9
function Optimizer:add_param_group(group)
  self:_add_group(#self.param_groups + 1, group)
end

--- Drops every parameter's gradient: .grad = nil (set_to_none, the
-- default, as PyTorch >= 2.0's), or with `zero_grad(false)` zeroes it in
-- place (PyTorch 1.13's default): a parameter then still steps with a zero
-- gradient (momentum, weight decay) where nil skips it.
-- `zero_grad{set_to_none = false}` is the same, as PyTorch's keyword.
-- @tparam[opt=true] boolean set_to_none
-- @usage local p = ember.ones(2, {dtype = "float64", requires_grad = true})
-- local opt = optim.SGD({p}, {lr = 0.1, momentum = 0.9})
-- p:sum():backward(); opt:step()
-- opt:zero_grad(false); opt:step()   -- the momentum moves p again
-- print(p.grad:tolist()[1], p:tolist()[1])   --> 0.0	0.81
function Optimizer:zero_grad(set_to_none)
  local Module = require("ember.nn.Module")
  local ok, v = Module.set_to_none_arg(set_to_none)
  if not ok then self:_error("zero_grad: %s", v) end
  Module.zero_grads(self._params, v)
end

--- One update of every parameter that has a gradient. With `closure`
-- (a function that zeroes the gradients, computes the loss, calls
-- backward and returns the loss), it is called first with grad mode on
-- and its loss returned, as PyTorch's `optimizer.step(closure)`.
-- @tparam[opt] function closure
-- @return the closure's loss, or nothing
function Optimizer:step(closure)
  local loss
  if closure ~= nil then
    if type(closure) ~= "function" then
      self:_error("step: closure must be a function that returns the loss, got %s", type(closure))
    end
    local prev = ember.set_grad_enabled(true)
    local ok, r = pcall(closure)
    ember.set_grad_enabled(prev)
    if not ok then error(r, 0) end
    loss = r
  end
  self:_step()
  return loss
end

function Optimizer:_step()
  local k = 0
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do
      k = k + 1
      local grad = p.grad
      if grad ~= nil then
        local st = self.state[k]
        if not st then
          st = {}
          self.state[k] = st
        end
        self:update(p, grad, st, g)
      end
    end
  end
end

--- Runs step(q), a fused C update that needs a contiguous parameter, on p
-- itself or, when p is strided (a leaf made from a transposed view, say),
-- on a contiguous copy then written back into p: PyTorch's optimizers take
-- any layout.
-- @param p the parameter
-- @tparam function step called with the tensor to update
function Optimizer.on_contiguous(p, step)
  if p:is_contiguous() then return step(p) end
  local q = p:detach():contiguous()
  step(q)
  ember.no_grad(function() p:copy_(q) end)
end

--- A zero tensor shaped like p for optimizer state.
function Optimizer.zeros_like(p) return ember.zeros(p.shape, { dtype = p.dtype, device = p.device }) end

--- {state = {[k] = {name = tensor or number}}, param_groups = {{lr=..., params={k...}}}}
-- Tensors are the live state (save them, do not modify them).
function Optimizer:state_dict()
  local groups, k = {}, 0
  for gi, g in ipairs(self.param_groups) do
    local sg = { params = {} }
    for name, v in pairs(g) do if name ~= "params" then sg[name] = v end end
    for i = 1, #g.params do
      k = k + 1
      sg.params[i] = k
    end
    groups[gi] = sg
  end
  local state = {}
  for idx, st in pairs(self.state) do
    local s = {}
    for name, v in pairs(st) do s[name] = v end
    state[idx] = s
  end
  return require("ember._listing").list({ state = state, param_groups = groups }) -- prints readably
end

local shape_str = require("ember._errors").shape_str

-- A state_dict's id of each parameter -> its index here (self._params), by
-- the groups' params lists, as torch.optim matches them (ember's ids are
-- 1, 2, ...; torch's 0, 1, ...). The group counts are checked by the caller.
function Optimizer:_state_index(sd)
  local index_of = {}
  for gi, g in ipairs(self.param_groups) do
    local ids = sd.param_groups[gi] and sd.param_groups[gi].params
    for i, id in ipairs(type(ids) == "table" and ids or {}) do index_of[id] = self._index[g.params[i]] end
  end
  return index_of
end

--- Restores a state_dict (from this optimizer type, same parameter layout).
-- Checks everything first; tensors are copied onto each parameter's dtype
-- and device. As PyTorch's, the state's keys are matched to the parameters
-- through the groups' `params` lists (position i of group g is this
-- optimizer's parameter i of group g), so a torch.optim state_dict read by
-- ember.load (0-based ids) loads too; its 0-dim tensor `step` (and other
-- 0-dim state of a parameter that is not 0-dim) becomes a number.
function Optimizer:load_state_dict(sd)
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    self:_error("load_state_dict: expected a table with state and param_groups")
  end
  if #sd.param_groups ~= #self.param_groups then
    self:_error("load_state_dict: the state has %d parameter groups, this optimizer %d",
      #sd.param_groups, #self.param_groups)
  end
  for gi, g in ipairs(self.param_groups) do
    local n = sd.param_groups[gi].params and #sd.param_groups[gi].params or -1
    if n ~= #g.params then
      self:_error("load_state_dict: group %d has %d parameters in the state, %d here", gi, n, #g.params)
    end
  end
  local index_of, by_index = self:_state_index(sd), {}
  for id, st in pairs(sd.state) do
    local idx = index_of[id]
    if not idx then self:_error("load_state_dict: state for parameter %s, which does not exist", tostring(id)) end
    local p, s = self._params[idx], {}
    for name, v in pairs(st) do
      if is_tensor(v) and v.ndim == 0 and (p.ndim ~= 0 or name == "step") then -- torch's tensor step
        v = v:item()
        v = math.tointeger(v) or v
      end
      s[name] = v
    end
    by_index[idx] = s
  end
  for idx, st in pairs(by_index) do
    local p = self._params[idx]
    for name, v in pairs(st) do
      if is_tensor(v) and shape_str(v) ~= shape_str(p) then
        self:_error("load_state_dict: state '%s' of parameter %d has shape %s, the parameter %s",
          name, idx, shape_str(v), shape_str(p))
      end
    end
  end
  for gi, g in ipairs(self.param_groups) do
    for name, v in pairs(sd.param_groups[gi]) do
      -- initial_lr: a schedule's base lr (PyTorch's), which last_epoch resumes from
      if name ~= "params" and (self.DEFAULTS[name] ~= nil or name == "initial_lr") then g[name] = v end
    end
  end
  self.state = self:_new_state()
  ember.no_grad(function()
    for idx, st in pairs(by_index) do
      local p, s = self._params[idx], {}
      for name, v in pairs(st) do
        if is_tensor(v) then
          s[name] = self.zeros_like(p)
          s[name]:copy_(v.device == p.device and v or v:to(p.device))
        else
          s[name] = v
        end
      end
      self.state[idx] = s
    end
  end)
  return self
end

function Optimizer:__tostring()
  local lines = { self.__name .. " (" }
  for gi, g in ipairs(self.param_groups) do
    local names = {}
    for k in pairs(g) do if k ~= "params" then names[#names + 1] = k end end
    table.sort(names)
    lines[#lines + 1] = ("  group %d: %d tensors"):format(gi, #g.params)
    for _, k in ipairs(names) do
      local v = g[k]
      if type(v) == "table" then v = "{" .. table.concat(v, ", ") .. "}" end
      lines[#lines + 1] = ("    %s: %s"):format(k, tostring(v))
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

return Optimizer
