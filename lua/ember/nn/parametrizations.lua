--- nn.utils.parametrizations: weight normalisation and spectral
-- normalisation as parametrizations (`nn.utils.parametrize`), as
-- torch.nn.utils.parametrizations: `weight_norm` (PyTorch 2.1's; 1.13 has
-- only the hook-based `nn.utils.weight_norm`, whose values it shares) and
-- `spectral_norm` (PyTorch 1.13's). Their state-dict names are PyTorch's:
-- `parametrizations.weight.original0` (g) and `original1` (v);
-- `parametrizations.weight.original`, `parametrizations.weight.0._u` and
-- `_v`. The hook-based versions of both (`nn.utils.weight_norm`,
-- `nn.utils.spectral_norm`, with `weight_g`/`weight_v` and
-- `weight_orig`/`weight_u`/`weight_v`) are in `nn/_norm_hooks.lua`.
--
-- Dims are 1-based, as everywhere in ember: weight_norm's default `dim = 1`
-- is PyTorch's `dim=0` (a norm per output row); `dim = false` is PyTorch's
-- `dim=None` (one norm over the whole tensor). A negative dim counts from
-- the end (PyTorch's weight_norm reads its `dim=-1` as None instead).
--
-- `parametrizations.orthogonal` is not provided: it needs matrix_exp, QR or
-- a Householder product, which ember does not have.
-- @usage local nn = require "ember.nn"
-- local m = nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))
-- print(m.parametrizations.weight.original0.shape)   --> ember.Size{3, 1}
-- local row_norms = m.weight:norm(2, 2)
-- print((row_norms - m.parametrizations.weight.original0:reshape(3)):abs():max():item() < 1e-6)   --> true
-- @module nn.utils.parametrizations
local errors = require "ember._errors"
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local parametrize = require "ember.nn.parametrize"
local recomputing = require("ember.nn.activation_checkpoint").recomputing

local raise = errors.raise

local M = {}

-- ---- the rules, shared with the hook-based versions (nn/_norm_hooks.lua) ----

--- A dim given by the user (1-based, negative from the end; false or nil
-- stands for none when `allow_none`) as a positive 1-based dim, or false.
-- @local
function M._dim(who, dim, ndim, default, allow_none)
  if dim == nil then dim = default end
  if dim == false and allow_none then return false end
  if math.type(dim) ~= "integer" or dim == 0 or dim > ndim or dim < -ndim then
    raise("%s: dim must be an integer in [%d, %d] other than 0 (1-based)%s, got %s", who, -ndim, ndim,
      allow_none and ", or false for the whole tensor" or "", tostring(dim))
  end
  return dim < 0 and dim + ndim + 1 or dim
end

--- torch.norm_except_dim(v, 2, dim): the 2-norm over every dim but `dim`
-- (kept, the others of size 1); dim false: the norm of the whole tensor (0-d).
-- @local
function M._norm_except_dim(v, dim)
  if not dim then return v:norm() end
  local perm, shape = { dim }, {}
  for i = 1, v.ndim do
    if i ~= dim then perm[#perm + 1] = i end
    shape[i] = i == dim and v.shape[i] or 1
  end
  return v:permute(perm):reshape({ v.shape[dim], -1 }):norm(2, 2):reshape(shape)
end

--- torch._weight_norm(v, g, dim): v * g / norm_except_dim(v, dim).
-- @local
function M._weight_norm(v, g, dim)
  return v * (g / M._norm_except_dim(v, dim))
end

--- The weight as a matrix with `dim` first (spectral norm's).
-- @local
function M._as_matrix(w, dim)
  if dim ~= 1 then
    local perm = { dim }
    for i = 1, w.ndim do if i ~= dim then perm[#perm + 1] = i end end
    w = w:permute(perm)
  end
  return w:reshape({ w.shape[1], -1 })
end

-- ---- weight_norm ----

local WeightNorm = Module:extend("_WeightNorm")

function WeightNorm:__init(dim) self.dim = dim end

--- The weight: g * v / norm_except_dim(v).
-- @local
function WeightNorm:forward(g, v) return M._weight_norm(v, g, self.dim) end

--- {norms of w, w}: PyTorch's original0 and original1.
-- @local
function WeightNorm:right_inverse(w) return { M._norm_except_dim(w, self.dim), w } end

--- Printed as PyTorch prints it: `_WeightNorm()`.
-- @local
function WeightNorm:extra_repr() return "" end

-- the hook-based weight_norm's names of a checkpoint (PyTorch's
-- _weight_norm_compat_hook)
function WeightNorm:_legacy_parametrized_names(name)
  local p = "parametrizations." .. name .. "."
  return { [name .. "_g"] = p .. "original0", [name .. "_v"] = p .. "original1" }
end

local function tensor_of(who, module, name)
  if not Module.is_module(module) then raise("%s: expected a module, got %s", who, type(module)) end
  if type(name) ~= "string" then raise("%s: name must be a string, got %s", who, type(name)) end
  local ok, w = pcall(function() return module[name] end)
  if not ok or not Module.is_tensor(w) then
    raise("%s: %s has no tensor '%s'", who, module.__name, name)
  end
  return w
end

--- Weight normalisation as a parametrization, as
-- torch.nn.utils.parametrizations.weight_norm (PyTorch 2.1): `module[name]`
-- becomes g * v / ||v||, the norm over every dim but `dim`, with
-- `g` = `parametrizations[name].original0` and `v` = `original1` (the
-- tensor's norms and the tensor itself at the start). A state dict of the
-- hook-based version (`weight_g`, `weight_v`) loads too.
-- @tparam Module module
-- @tparam[opt] table opts `{name = "weight", dim = 1}` (dim 1-based; false:
-- one norm for the whole tensor, PyTorch's dim=None)
-- @treturn Module module
-- @usage local nn = require "ember.nn"
-- local m = nn.utils.parametrizations.weight_norm(nn.Linear(20, 40))
-- print(m.parametrizations.weight.original0.shape, m.parametrizations.weight.original1.shape)
-- --> ember.Size{40, 1}	ember.Size{40, 20}
function M.weight_norm(module, opts)
  local who = "nn.utils.parametrizations.weight_norm"
  local o = Module.check_options(who, opts, { "name", "dim" })
  local name = o.name or "weight"
  local w = tensor_of(who, module, name)
  local dim = M._dim(who, o.dim, math.max(w.ndim, 1), 1, true)
  return parametrize.register_parametrization(module, name, WeightNorm(dim), { unsafe = true })
end

-- ---- spectral_norm ----

local SpectralNorm = Module:extend("_SpectralNorm")

function SpectralNorm:__init(w, n_power_iterations, dim, eps)
  self.dim, self.eps = dim, eps
  if w.ndim > 1 then
    self.n_power_iterations = n_power_iterations
    local wm = M._as_matrix(w, dim)
    local opts = { dtype = w.dtype, device = w.device }
    self:register_buffer("_u", ember.normalize(ember.randn({ wm.shape[1] }, opts), { dim = 1, eps = eps }))
    self:register_buffer("_v", ember.normalize(ember.randn({ wm.shape[2] }, opts), { dim = 1, eps = eps }))
    self:_power_method(wm, 15)
  end
end

-- u = normalize(W v), v = normalize(W^T u), in place, without gradient
function SpectralNorm:_power_method(wm, n)
  ember.no_grad(function()
    wm = wm:detach()
    for _ = 1, n do
      self._u:copy_(ember.normalize(ember.mv(wm, self._v), { dim = 1, eps = self.eps }))
      self._v:copy_(ember.normalize(ember.mv(wm:t(), self._u), { dim = 1, eps = self.eps }))
    end
  end)
end

--- w / sigma, iterating u and v first in training mode.
-- @local
function SpectralNorm:forward(w)
  if w.ndim == 1 then return ember.normalize(w, { dim = 1, eps = self.eps }) end
  local wm = M._as_matrix(w, self.dim)
  -- once per step: not again in a checkpoint's recompute (u and v as the forward left them)
  if self.training and not recomputing() then self:_power_method(wm, self.n_power_iterations) end
  local u, v = self._u:clone(), self._v:clone()
  return w / ember.dot(u, ember.mv(wm, v))
end

--- The identity, as PyTorch's.
-- @local
function SpectralNorm:right_inverse(value) return value end

--- The options spectral_norm takes, checked, with the dim resolved
-- (ConvTranspose's default dim is 2).
-- @local
function M._spectral_options(who, module, w, o)
  local n = o.n_power_iterations or 1
  if math.type(n) ~= "integer" or n < 0 then
    raise("%s: n_power_iterations must be a non-negative integer, got %s", who, tostring(n))
  end
  local eps = o.eps or 1e-12
  if type(eps) ~= "number" or eps <= 0 then raise("%s: eps must be a positive number, got %s", who, tostring(eps)) end
  local default = module.__name:match("ConvTranspose") and 2 or 1
  return n, eps, M._dim(who, o.dim, math.max(w.ndim, 1), default, false)
end

--- Spectral normalisation as a parametrization, as
-- torch.nn.utils.parametrizations.spectral_norm (PyTorch 1.13):
-- `module[name]` becomes W / sigma, sigma W's largest singular value
-- estimated by power iteration on W as a matrix (`dim` first, the other
-- dims flattened). The vectors are the buffers
-- `parametrizations[name][1]._u` and `._v` (state dict
-- `parametrizations.weight.0._u`), started at random and iterated 15 times;
-- each read of the weight in training mode runs `n_power_iterations` more,
-- in eval mode none. A 1-d tensor is divided by its norm.
-- @tparam Module module
-- @tparam[opt] table opts `{name = "weight", n_power_iterations = 1, eps = 1e-12, dim}` (dim 1-based;
-- default 1, or 2 for the ConvTranspose modules)
-- @treturn Module module
-- @usage local nn = require "ember.nn"
-- local m = nn.utils.parametrizations.spectral_norm(nn.Linear(20, 40))
-- print(m.parametrizations.weight[1]._u.shape, m.parametrizations.weight[1]._v.shape)
-- --> ember.Size{40}	ember.Size{20}
-- m:eval()
-- local s = m.weight:matmul(m.parametrizations.weight[1]._v):norm():item()   -- about 1
function M.spectral_norm(module, opts)
  local who = "nn.utils.parametrizations.spectral_norm"
  local o = Module.check_options(who, opts, { "name", "n_power_iterations", "eps", "dim" })
  local name = o.name or "weight"
  local w = tensor_of(who, module, name)
  local n, eps, dim = M._spectral_options(who, module, w, o)
  if n == 0 then raise("%s: n_power_iterations must be positive, got 0", who) end
  return parametrize.register_parametrization(module, name, SpectralNorm(w, n, dim, eps))
end

return M
