-- nn/_norm_hooks.lua: the hook-based weight_norm and spectral_norm of
-- torch.nn.utils (torch/nn/utils/weight_norm.py, spectral_norm.py), which
-- nn.utils exports: the original tensors are parameters and buffers of the
-- module itself under PyTorch's names (`weight_g`, `weight_v`;
-- `weight_orig`, `weight_u`, `weight_v`), and a forward pre-hook recomputes
-- `module.weight` (a plain field, no parameter) before every call. The
-- formulas are nn/parametrizations.lua's. nn/utils.lua documents them.
local errors = require "ember._errors"
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local P = require "ember.nn.parametrizations"
local recomputing = require("ember.nn.activation_checkpoint").recomputing

local raise = errors.raise

local M = {}

-- module -> {kind .. ":" .. name -> hook record}; weak, so a dropped module goes
local hooks = setmetatable({}, { __mode = "k" })

local function record(module, key) return hooks[module] and hooks[module][key] end

local function param_of(who, module, name)
  if not Module.is_module(module) then raise("%s: expected a module, got %s", who, type(module)) end
  if type(name) ~= "string" then raise("%s: name must be a string, got %s", who, type(name)) end
  for _, n in ipairs(module._params) do
    if n == name then return module._reg[n] end
  end
  raise("%s: %s has no parameter '%s'", who, module.__name, name)
end

local function add(module, key, rec, fn)
  hooks[module] = hooks[module] or {}
  rec.handle = module:register_forward_pre_hook(fn)
  hooks[module][key] = rec
end

local function drop(module, key)
  local rec = hooks[module][key]
  rec.handle.remove()
  hooks[module][key] = nil
  return rec
end

-- positional (module, name, dim) or (module, {name =, dim =})
local function weight_norm_args(who, name, dim)
  if type(name) == "table" then
    local o = Module.check_options(who, name, { "name", "dim" })
    return o.name or "weight", o.dim
  end
  return name or "weight", dim
end

-- nn.utils.weight_norm (documented in nn/utils.lua)
function M.weight_norm(module, name, dim)
  local who = "nn.utils.weight_norm"
  name, dim = weight_norm_args(who, name, dim)
  local key = "weight_norm:" .. tostring(name)
  if record(module, key) then raise("%s: %s's '%s' has a weight_norm hook already", who, module.__name, name) end
  local w = param_of(who, module, name)
  dim = P._dim(who, dim, math.max(w.ndim, 1), 1, true)
  local g = P._norm_except_dim(w:detach(), dim):clone()
  module[name] = nil
  module:register_parameter(name .. "_g", g)
  module:register_parameter(name .. "_v", w:detach():requires_grad_(true))
  local function compute(m) return P._weight_norm(m[name .. "_v"], m[name .. "_g"], dim) end
  rawset(module, name, compute(module))
  add(module, key, { compute = compute }, function(m) rawset(m, name, compute(m)) end)
  return module
end

-- nn.utils.remove_weight_norm (documented in nn/utils.lua)
function M.remove_weight_norm(module, name)
  local who = "nn.utils.remove_weight_norm"
  if not Module.is_module(module) then raise("%s: expected a module, got %s", who, type(module)) end
  name = name or "weight"
  local key = "weight_norm:" .. tostring(name)
  if not record(module, key) then raise("%s: %s has no weight_norm on '%s'", who, module.__name, tostring(name)) end
  local rec = drop(module, key)
  local w = rec.compute(module):detach()
  rawset(module, name, nil)
  module[name .. "_g"], module[name .. "_v"] = nil, nil
  module:register_parameter(name, w)
  return module
end

-- the hook-based spectral norm's weight: v = normalize(W^T u), u =
-- normalize(W v) when iterating (in this order, unlike the parametrization's)
local function spectral_weight(m, name, rec, iterate)
  local w, u, v = m[name .. "_orig"], m[name .. "_u"], m[name .. "_v"]
  local wm = P._as_matrix(w, rec.dim)
  if iterate then
    ember.no_grad(function()
      local wd = wm:detach()
      for _ = 1, rec.n do
        v:copy_(ember.normalize(ember.mv(wd:t(), u), { dim = 1, eps = rec.eps }))
        u:copy_(ember.normalize(ember.mv(wd, v), { dim = 1, eps = rec.eps }))
      end
    end)
    if rec.n > 0 then u, v = u:clone(), v:clone() end
  end
  return w / ember.dot(u, ember.mv(wm, v))
end

-- nn.utils.spectral_norm (documented in nn/utils.lua)
function M.spectral_norm(module, name, n_power_iterations, eps, dim)
  local who = "nn.utils.spectral_norm"
  local o
  if type(name) == "table" then
    o = Module.check_options(who, name, { "name", "n_power_iterations", "eps", "dim" })
  else
    o = { name = name, n_power_iterations = n_power_iterations, eps = eps, dim = dim }
  end
  name = o.name or "weight"
  local key = "spectral_norm:" .. tostring(name)
  if record(module, key) then raise("%s: %s's '%s' has a spectral_norm hook already", who, module.__name, name) end
  local w = param_of(who, module, name)
  local n, e, d = P._spectral_options(who, module, w, o)
  if w.ndim < 2 then raise("%s: '%s' must have at least 2 dims, got %d", who, name, w.ndim) end
  local rec = { n = n, eps = e, dim = d }
  local wm = P._as_matrix(w:detach(), d)
  local topts = { dtype = w.dtype, device = w.device }
  local u = ember.normalize(ember.randn({ wm.shape[1] }, topts), { dim = 1, eps = e })
  local v = ember.normalize(ember.randn({ wm.shape[2] }, topts), { dim = 1, eps = e })
  module[name] = nil
  module:register_parameter(name .. "_orig", w)
  rawset(module, name, w:detach())
  module:register_buffer(name .. "_u", u)
  module:register_buffer(name .. "_v", v)
  -- iterated once per step: not again in a checkpoint's recompute (u and v as the forward left them)
  add(module, key, rec, function(m)
    rawset(m, name, spectral_weight(m, name, rec, m.training and not recomputing()))
  end)
  return module
end

-- nn.utils.remove_spectral_norm (documented in nn/utils.lua)
function M.remove_spectral_norm(module, name)
  local who = "nn.utils.remove_spectral_norm"
  if not Module.is_module(module) then raise("%s: expected a module, got %s", who, type(module)) end
  name = name or "weight"
  local key = "spectral_norm:" .. tostring(name)
  if not record(module, key) then
    raise("%s: %s has no spectral_norm on '%s'", who, module.__name, tostring(name))
  end
  local rec = drop(module, key)
  local w = ember.no_grad(function() return spectral_weight(module, name, rec, false) end):detach()
  rawset(module, name, nil)
  module[name .. "_orig"], module[name .. "_u"], module[name .. "_v"] = nil, nil, nil
  module:register_parameter(name, w)
  return module
end

return M
