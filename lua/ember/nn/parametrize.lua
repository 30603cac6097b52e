--- nn.utils.parametrize: torch.nn.utils.parametrize, a module's tensor
-- computed from other tensors on every access (`register_parametrization`),
-- so that `m.weight` is, say, always symmetric or of unit norm while the
-- optimizer updates the unconstrained original.
--
-- After `register_parametrization(m, "weight", P)` the original tensor
-- lives at `m.parametrizations.weight.original` (a parameter if the
-- tensor was one, a buffer if it was a buffer; state-dict name
-- `parametrizations.weight.original`, as PyTorch's), and reading
-- `m.weight` returns `P(original)`, recomputed on each read (inside
-- `cached()`, once per scope; during a call of the module, once per call,
-- as PyTorch's modules read their weight once), so gradients flow to the
-- original.
-- Assigning `m.weight = X` stores `P.right_inverse(X)` into the original
-- (X itself when P has no `right_inverse`). Several parametrizations on one
-- tensor are chained: `P2(P1(original))`. A `right_inverse` that returns a
-- list of tensors makes several originals, `original0`, `original1`, ...
-- (PyTorch's names: weight_norm's g and v), which forward then takes.
--
-- As in PyTorch, the module's class becomes a subclass named
-- `"Parametrized" .. name` (`ParametrizedLinear`, printed so, still
-- `isinstance(nn.Linear)`); `remove_parametrizations` restores it. A
-- parametrization is an `nn.Module` whose `forward` takes the original
-- (or the originals) and may define `right_inverse`; it follows the
-- module's train/eval mode.
-- @usage local nn = require "ember.nn"
-- local P = nn.utils.parametrize
-- local Symmetric = nn.Module:extend("Symmetric")
-- function Symmetric:forward(X) return X:triu() + X:triu(1):t() end
-- local m = nn.Linear(3, 3)
-- P.register_parametrization(m, "weight", Symmetric())
-- print(ember.equal(m.weight, m.weight:t()), P.is_parametrized(m, "weight"))   --> true true
-- print(m:state_dict()["parametrizations.weight.original"].shape)   --> ember.Size{3, 3}
-- @module nn.utils.parametrize
local errors = require "ember._errors"
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local ModuleList = require "ember.nn.ModuleList"
local ModuleDict = require "ember.nn.ModuleDict"

local raise = errors.raise
local is_tensor, is_module = Module.is_tensor, Module.is_module

local M = {}

local function describe(v)
  if is_module(v) then return "a module (" .. v.__name .. ")" end
  if is_tensor(v) then return "a tensor" end
  return "a " .. type(v)
end

-- ---- the cache of cached() ----

local cache_depth, cache = 0, {}

-- ---- ParametrizationList: the parametrizations of one tensor and its originals ----

-- nn.utils.parametrize.ParametrizationList: a ModuleList (children "0",
-- "1", ...) of the parametrizations of one tensor, holding its original(s).
-- Made by `register_parametrization`; `list()` computes the tensor and
-- `list:right_inverse(X)` stores X's preimage into the originals.
local PL = Module.extend(ModuleList, "ParametrizationList") -- ModuleList:extend appends modules
M.ParametrizationList = PL

-- a parametrization's right_inverse, or nil when it has none
local function right_inverse_of(p)
  local ri = p.right_inverse
  return type(ri) == "function" and ri or nil
end

local function same_meta(who, what, z, ref)
  if not is_tensor(z) then raise("%s: %s must be a tensor, got %s", who, what, describe(z)) end
  if z.dtype ~= ref.dtype then
    raise("%s: %s has dtype %s, the tensor %s (the parametrization may not change the dtype)", who, what, z.dtype,
      ref.dtype)
  end
  if errors.shape_str(z) ~= errors.shape_str(ref) then
    raise("%s: %s has shape %s, the tensor %s (the parametrization may not change the shape unless "
      .. "unsafe = true)", who, what, errors.shape_str(z), errors.shape_str(ref))
  end
end

-- register an original as a parameter or buffer, keeping requires_grad
local function register_original(owner, name, t, as_param)
  if as_param then
    local rg = t.requires_grad
    owner:register_parameter(name, t)
    if not rg then t:requires_grad_(false) end
  else
    owner:register_buffer(name, t)
  end
end

function PL:__init(mods, original, as_param, unsafe, who)
  ModuleList.__init(self, mods)
  self.unsafe = unsafe and true or false
  local new = original
  ember.no_grad(function()
    for i = #mods, 1, -1 do
      local ri = right_inverse_of(mods[i])
      if ri then new = ri(mods[i], new) end
    end
  end)
  if is_tensor(new) then
    self.is_tensor, self.ntensors = true, 1
    if new.dtype ~= original.dtype then
      raise("%s: right_inverse returned dtype %s for a tensor of dtype %s", who, new.dtype, original.dtype)
    end
    if not rawequal(new, original) then -- PyTorch's original.set_(new): the same tensor object
      original:_assign(new:detach():requires_grad_(original.requires_grad))
    end
    register_original(self, "original", original, as_param)
  elseif type(new) == "table" and #new > 0 then
    self.is_tensor, self.ntensors = false, #new
    for i, t in ipairs(new) do
      if not is_tensor(t) then
        raise("%s: right_inverse's result %d is %s, expected a tensor", who, i, describe(t))
      end
      register_original(self, "original" .. (i - 1), t:detach():requires_grad_(original.requires_grad), as_param)
    end
  else
    raise("%s: right_inverse must return a tensor or a list of tensors, got %s", who, describe(new))
  end
  if not self.unsafe then
    same_meta(who, "the parametrized tensor", self(), original)
  end
end

--- The parametrized tensor: the first parametrization on the original(s),
-- then each next one on the result.
-- @local
function PL:forward()
  local x
  if self.is_tensor then
    x = self[1](self.original)
  else
    local o = {}
    for i = 1, self.ntensors do o[i] = self["original" .. (i - 1)] end
    x = self[1](table.unpack(o, 1, self.ntensors))
  end
  for i = 2, #self do x = self[i](x) end
  return x
end

--- Stores `value`'s preimage in the original(s): each parametrization's
-- `right_inverse`, last registered first, without gradient (PyTorch's
-- ParametrizationList.right_inverse; `m.weight = value` calls it).
-- @local
function PL:right_inverse(value)
  local who = "nn.utils.parametrize: assigning a parametrized tensor"
  ember.no_grad(function()
    for i = #self, 1, -1 do
      local ri = right_inverse_of(self[i])
      if not ri then
        raise("%s: the parametrization %s has no right_inverse", who, self[i].__name)
      end
      value = ri(self[i], value)
    end
    local function store(dst, src, what)
      if not is_tensor(src) then raise("%s: %s must be a tensor, got %s", who, what, describe(src)) end
      if src.dtype ~= dst.dtype then
        raise("%s: %s has dtype %s, the original %s", who, what, src.dtype, dst.dtype)
      end
      if errors.shape_str(src) == errors.shape_str(dst) then
        dst:copy_(src)
      else
        dst:_assign(src:detach():clone():requires_grad_(dst.requires_grad))
      end
    end
    if self.is_tensor then
      store(self.original, value, "the value")
    else
      if type(value) ~= "table" or is_tensor(value) or #value ~= self.ntensors then
        raise("%s: right_inverse must return %d tensors, got %s", who, self.ntensors, describe(value))
      end
      for i = 1, self.ntensors do store(self["original" .. (i - 1)], value[i], "result " .. i) end
    end
  end)
end

-- ---- the parametrized classes ----

local classes = setmetatable({}, { __mode = "k" }) -- class -> its Parametrized subclass

local function list_of(self, k)
  if type(k) ~= "string" then return nil end
  local pd = rawget(self, "_reg").parametrizations
  local pl = pd and rawget(pd, "_reg")[k]
  if pl and getmetatable(pl) == PL then return pl end
  return nil
end

-- the parametrized tensor, once per cached() scope
local function compute(self, name, pl)
  if cache_depth == 0 then return pl() end
  local per = cache[self]
  if not per then
    per = {}
    cache[self] = per
  end
  local t = per[name]
  if t == nil then
    t = pl()
    per[name] = t
  end
  return t
end

-- ... and once per call of the module (see parametrized_class)
local function get_parametrized(self, name, pl)
  local call = rawget(self, "_parametrize_call")
  if not call then return compute(self, name, pl) end
  local t = call[name]
  if t == nil then
    t = compute(self, name, pl)
    call[name] = t
  end
  return t
end

local function parametrized_class(cls)
  local pc = classes[cls]
  if pc then return pc end
  pc = Module.extend(cls, "Parametrized" .. cls.__name) -- (a list class's :extend appends modules)
  local base_index, base_newindex = cls.__index, cls.__newindex
  rawset(pc, "_parametrize_base", cls)
  pc.__index = function(t, k)
    local pl = list_of(t, k)
    if pl then return get_parametrized(t, k, pl) end
    if type(base_index) == "function" then return base_index(t, k) end
    return base_index[k]
  end
  pc.__newindex = function(t, k, v)
    local pl = list_of(t, k)
    if pl then
      if not is_tensor(v) then
        raise("%s: '%s' is parametrized; assign a tensor (its right_inverse is stored in the original), not %s",
          t.__name, k, describe(v))
      end
      return pl:right_inverse(v)
    end
    return base_newindex(t, k, v)
  end
  -- Within one call of the module each parametrized tensor is computed
  -- once: PyTorch's modules read their weight once per forward, ember's
  -- may read it again for a check (Conv2d reads weight.dtype), which would
  -- run spectral_norm's power iteration twice.
  local base_call = cls.__call
  pc.__call = function(self, ...)
    local prev = rawget(self, "_parametrize_call")
    rawset(self, "_parametrize_call", {})
    local restore <close> = setmetatable({}, { __close = function() rawset(self, "_parametrize_call", prev) end })
    return base_call(self, ...) -- (no tail call: `restore` closes after it)
  end
  -- the names older layouts of a parametrization had ({name}_g, {name}_v of
  -- the hook-based weight_norm), mapped as PyTorch's load_state_dict pre-hook
  pc.upgrade_state_dict = function(self, sd, prefix)
    local out = {}
    for k, v in pairs(sd) do out[k] = v end
    local pd = self._reg.parametrizations
    if pd then
      for _, name in ipairs(pd._children) do
        for _, p in ipairs(pd._reg[name]:children()) do
          local f = p._legacy_parametrized_names
          if type(f) == "function" then
            for old, new in pairs(f(p, name)) do
              if out[old] ~= nil and out[new] == nil then out[new], out[old] = out[old], nil end
            end
          end
        end
      end
    end
    return cls.upgrade_state_dict(self, out, prefix)
  end
  classes[cls] = pc
  return pc
end

-- ---- the public functions ----

--- Whether `module` has a parametrized tensor (`name` given: that one), as
-- torch.nn.utils.parametrize.is_parametrized.
-- @tparam Module module
-- @string[opt] name
-- @treturn boolean
-- @usage local nn = require "ember.nn"
-- local m = nn.Linear(2, 2)
-- print(nn.utils.parametrize.is_parametrized(m))   --> false
-- nn.utils.parametrizations.weight_norm(m)
-- print(nn.utils.parametrize.is_parametrized(m), nn.utils.parametrize.is_parametrized(m, "bias"))   --> true false
function M.is_parametrized(module, name)
  if not is_module(module) then
    raise("nn.utils.parametrize.is_parametrized: expected a module, got %s", describe(module))
  end
  local pd = rawget(module, "_reg").parametrizations
  if not (is_module(pd) and getmetatable(pd) == ModuleDict) then return false end
  if name == nil then return #pd._children > 0 end
  return list_of(module, name) ~= nil
end

--- Parametrizes `module[name]` by the module `parametrization`, as
-- torch.nn.utils.parametrize.register_parametrization: the tensor moves to
-- `module.parametrizations[name].original` (run through
-- `parametrization:right_inverse` when it has one), and `module[name]`
-- becomes `parametrization(original)` on every read. On a tensor already
-- parametrized, the new parametrization is chained after the others.
-- Unless `unsafe`, the result must keep the tensor's shape and dtype.
-- The tensor must be a parameter or a buffer of `module`.
-- @tparam Module module
-- @string name the parameter's or buffer's name ("weight")
-- @tparam Module parametrization an nn.Module: forward(X) and, optionally, right_inverse(X)
-- @tparam[opt] table opts `{unsafe = false}`
-- @treturn Module module
-- @usage local nn = require "ember.nn"
-- local Positive = nn.Module:extend("Positive")
-- function Positive:forward(X) return X:exp() end
-- function Positive:right_inverse(Y) return Y:log() end
-- local m = nn.Linear(2, 2):double()
-- nn.init.constant_(m.weight, 2)
-- nn.utils.parametrize.register_parametrization(m, "weight", Positive())
-- print(m.parametrizations.weight.original[1][1]:item() == math.log(2), m.__name)   --> true ParametrizedLinear
function M.register_parametrization(module, name, parametrization, opts)
  local who = "nn.utils.parametrize.register_parametrization"
  if not is_module(module) then raise("%s: expected a module, got %s", who, describe(module)) end
  if type(name) ~= "string" then raise("%s: the tensor's name must be a string, got %s", who, type(name)) end
  if not is_module(parametrization) then
    raise("%s: the parametrization must be an nn.Module (nn.Module:extend(...) with forward(X)), got %s", who,
      describe(parametrization))
  end
  local unsafe = Module.check_options(who, opts, { "unsafe" }).unsafe and true or false
  parametrization:train(module.training)
  if M.is_parametrized(module, name) then
    local pl = list_of(module, name)
    if not unsafe then
      local Y = module[name]
      local X = parametrization(Y)
      same_meta(who, "the parametrization's result", X, Y)
      local ri = right_inverse_of(parametrization)
      if ri then same_meta(who, "right_inverse's result", ri(parametrization, X), Y) end
    end
    pl:append(parametrization)
    pl.unsafe = pl.unsafe or unsafe
    return module
  end
  local reg = rawget(module, "_reg")
  local kind
  for _, n in ipairs(module._params) do if n == name then kind = "param" end end
  for _, n in ipairs(module._buffers) do if n == name then kind = "buffer" end end
  if not kind then
    local what = reg[name] ~= nil and "a child module" or (rawget(module, name) ~= nil and "a plain field")
      or "nothing"
    raise("%s: %s has no parameter, buffer or parametrized tensor '%s' (it is %s)", who, module.__name, name, what)
  end
  local original = reg[name]
  local pl = PL({ parametrization }, original, kind == "param", unsafe, who)
  module[name] = nil -- unregistered; the parametrized class reads it from now on
  if not M.is_parametrized(module) then
    setmetatable(module, parametrized_class(getmetatable(module)))
    if reg.parametrizations == nil then module:add_module("parametrizations", ModuleDict()) end
  end
  module.parametrizations[name] = pl
  return module
end

--- Takes the parametrizations off `module[name]`, as
-- torch.nn.utils.parametrize.remove_parametrizations: with
-- `leave_parametrized` (the default) the tensor keeps its current
-- parametrized value, else it becomes the original again (only for one
-- original). The original tensor object is kept (an optimizer holding it
-- still updates it). Without parametrized tensors left, the module's class
-- is restored.
-- @tparam Module module
-- @string name
-- @tparam[opt] table opts `{leave_parametrized = true}`
-- @treturn Module module
-- @usage local nn = require "ember.nn"
-- local m = nn.utils.parametrizations.weight_norm(nn.Linear(3, 2))
-- nn.utils.parametrize.remove_parametrizations(m, "weight")
-- print(m.__name, m:parameter_names())   --> Linear	{"bias", "weight"}
function M.remove_parametrizations(module, name, opts)
  local who = "nn.utils.parametrize.remove_parametrizations"
  if not is_module(module) then raise("%s: expected a module, got %s", who, describe(module)) end
  local o = Module.check_options(who, opts, { "leave_parametrized" })
  local leave = o.leave_parametrized ~= false
  if not M.is_parametrized(module, name) then
    raise("%s: %s has no parametrization on '%s'", who, module.__name, tostring(name))
  end
  local pl = list_of(module, name)
  local original, as_param
  if pl.is_tensor then
    original = pl.original
    as_param = pl:named_parameters().original ~= nil
    if leave then
      local t = ember.no_grad(function() return module[name] end)
      ember.no_grad(function()
        if errors.shape_str(t) == errors.shape_str(original) then
          original:copy_(t)
        else
          original:_assign(t:detach():clone():requires_grad_(original.requires_grad))
        end
      end)
    end
  else
    if not leave then
      raise("%s: a tensor parametrized by several originals cannot be left unparametrized "
        .. "(leave_parametrized = false)", who)
    end
    local t = module[name]
    as_param = pl:named_parameters().original0 ~= nil
    original = t:detach():clone():requires_grad_(t.requires_grad)
  end
  local pd = module.parametrizations
  pd[name] = nil
  cache[module] = nil
  if not M.is_parametrized(module) then
    module.parametrizations = nil
    setmetatable(module, rawget(getmetatable(module), "_parametrize_base"))
  end
  register_original(module, name, original, as_param)
  return module
end

local function end_cache()
  cache_depth = cache_depth - 1
  if cache_depth == 0 then cache = {} end
end

--- Parametrized tensors computed once per scope, as
-- torch.nn.utils.parametrize.cached(): `cached(fn)` runs fn inside the
-- scope and returns its results; `local c <close> = cached()` opens one
-- until the variable goes out of scope. Scopes nest; the cache empties when
-- the outermost closes. (For a model that reads a parametrized weight
-- several times per step, as an RNN's recurrent weight.)
-- @tparam[opt] function fn
-- @return fn's results, or the scope for `<close>`
-- @usage local nn = require "ember.nn"
-- local m = nn.utils.parametrizations.weight_norm(nn.Linear(3, 3))
-- nn.utils.parametrize.cached(function()
--   print(rawequal(m.weight, m.weight))   --> true
-- end)
-- do
--   local scope <close> = nn.utils.parametrize.cached()
--   local y = m(m(ember.randn(2, 3)))   -- the weight computed once
-- end
-- print(rawequal(m.weight, m.weight))   --> false
function M.cached(fn)
  if fn ~= nil and type(fn) ~= "function" then
    raise("nn.utils.parametrize.cached: expected a function or nothing (for `<close>`), got %s", type(fn))
  end
  cache_depth = cache_depth + 1
  if fn then
    local r = table.pack(pcall(fn))
    end_cache()
    if not r[1] then error(r[2], 0) end
    return table.unpack(r, 2, r.n)
  end
  local closed = false
  return setmetatable({}, {
    __close = function()
      if not closed then
        closed = true
        end_cache()
      end
    end,
    __name = "nn.utils.parametrize.cached scope",
  })
end

return M
