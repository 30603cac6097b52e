--- ember.Attention (also nn.Attention): one attention variant on
-- [B, H, L, d] tensors, as a module.
--
--    local att = ember.Attention{attention = "relpos", heads = 2, head_dim = 4,
--                                max_relative_position = 3}
--    local out, w = att(q, k, v, {causal = true, need_weights = true})
--
-- The variant itself (its handle, checked options and the fused call) is
-- the C object made by `ember._attention_core` (core/lua/l_attention.c). Its
-- tables -- learned ones such as relpos distances, buffers such as FAVOR
-- features -- are this module's parameters and buffers, registered under
-- the variant's names, so moving, saving and tying them is nn.Module's job
-- like any other module's state.
-- @classmod nn.Attention
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local Module = require "ember.nn.Module"

local Attention = Module:extend("Attention")

-- Keys of the spec that are not handed to the variant.
local OWN = { dtype = true, device = true }

--- Builds a variant instance.
-- @tparam table spec `attention` (variant name, default "standard"),
-- `heads` (default 1), `head_dim`, `v_head_dim` (default head_dim), `dtype`
-- (float32), `device` ("cpu"), and the variant's own options (see
-- `ember.attention_variants(name).options`).
function Attention:__init(spec)
  if type(spec) ~= "table" then
    errors.raise("Attention: expected a table {attention=, heads=, head_dim=, ...}, got %s", type(spec))
  end
  local cspec = {}
  for k, v in pairs(spec) do if not OWN[k] then cspec[k] = v end end
  local ok, core, tables = pcall(ember._attention_core, cspec, spec.dtype, spec.device)
  if not ok then errors.raise("%s", tostring(core)) end
  self.core = core
  self.dtype = spec.dtype or "float32"
  self.device = spec.device or "cpu"
  local names = {}
  for i, t in ipairs(tables) do
    names[i] = t.name
    if t.learned then self:register_parameter(t.name, t.tensor) else self:register_buffer(t.name, t.tensor) end
  end
  self.table_names = names
end

-- Fields answered by the C object.
local FROM_CORE = { attention = true, caps = true, heads = true, head_dim = true, v_head_dim = true }
function Attention.__index(t, k)
  if FROM_CORE[k] then return rawget(t, "core")[k] end
  return Module.__index(t, k)
end

--- Runs the variant.
-- @tparam Tensor q [B, H, Lq, head_dim]
-- @tparam Tensor k [B, H, Lk, head_dim]
-- @tparam Tensor v [B, H, Lk, v_head_dim]
-- @tparam[opt] table opts `key_padding_mask` (bool [B, Lk], true = padding,
-- as PyTorch), `attn_mask` (bool: true = may attend; or float, added to scores),
-- `causal`, `need_weights`, `scale` (default 1/sqrt(head_dim)), `dropout`
-- (on the weights, in training mode only)
-- @treturn Tensor out [B, H, Lq, v_head_dim]
-- @treturn[opt] Tensor weights [B, H, Lq, Lk] when need_weights
function Attention:forward(q, k, v, opts)
  local tables = {}
  for i, n in ipairs(self.table_names) do tables[i] = self._reg[n] end
  local o = { training = self.training }
  if opts ~= nil then
    if type(opts) ~= "table" then errors.raise("Attention.forward: options must be a table, got %s", type(opts)) end
    for key, val in pairs(opts) do o[key] = val end
  end
  local ok, out, w = pcall(self.core.forward, self.core, tables, q, k, v, o)
  if not ok then errors.raise("%s", tostring(out)) end
  return out, w
end

--- The checked variant options, defaults filled in.
-- @treturn table
function Attention:options() return self.core:options() end

--- Names ember used for the variant's tables before they became module
-- state ("relpos.rel_k" for "rel_k").
-- @treturn table
function Attention:legacy_names()
  local map = {}
  for _, n in ipairs(self.table_names) do map[self.core.attention .. "." .. n] = n end
  return map
end

--- As Module:to; the module's dtype and device fields follow.
-- @string where a dtype or device name
-- @tparam[opt] table moved old tensor -> new one, shared by a whole tree (internal)
-- @treturn Attention self
function Attention:to(where, moved)
  Module.to(self, where, moved)
  local dtype = Module.float_dtype(where, "Attention.to")
  if dtype then self.dtype = dtype else self.device = where end
  return self
end

--- The variant, its options and sizes in one line.
function Attention:extra_repr()
  return ("%s, heads=%d, head_dim=%d, v_head_dim=%d, %s"):format(tostring(self.core), self.heads,
    self.head_dim, self.v_head_dim, self.dtype)
end

return Attention
