--- ember.Attention (also nn.Attention): one attention variant on
-- [B, H, L, d] tensors, as a module.
--
--    local att = ember.Attention{attention = "relpos", heads = 2, head_dim = 4,
--                                max_relative_position = 3}
--    local q, k, v = ember.randn(1, 2, 5, 4), ember.randn(1, 2, 5, 4), ember.randn(1, 2, 5, 4)
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

local variant = require "ember.variant"

local Attention = Module:extend("Attention")

-- Keys of the spec that are not handed to the variant.
local OWN = { dtype = true, device = true }

--- Builds a variant instance.
-- @tparam table spec `attention` (variant name, default "standard"),
-- `heads` (default 1), `head_dim`, `v_head_dim` (default head_dim), `dtype`
-- (ember.get_default_dtype()), `device` ("cpu"), and the variant's own options (see
-- `ember.attention_variants(name).options`).
function Attention:__init(spec, ...)
  require("ember._errors").no_extra("nn.Attention", { "spec" }, 1, spec, ...)
  if type(spec) ~= "table" then
    errors.raise("Attention: expected a table {attention=, heads=, head_dim=, ...}, got %s", type(spec))
  end
  local cspec = {}
  for k, v in pairs(spec) do if not OWN[k] then cspec[k] = v end end
  local ok, core, tables = pcall(ember._attention_core, cspec, spec.dtype, spec.device)
  if not ok then errors.raise("%s", tostring(core)) end
  self.core = core
  self.dtype = spec.dtype or ember.get_default_dtype()
  self.device = spec.device or "cpu"
  local def = variant.get(core.attention)
  if def then tables = self:_trace(def, core) end
  local names = {}
  for i, t in ipairs(tables) do
    names[i] = t.name
    if t.learned then self:register_parameter(t.name, t.tensor) else self:register_buffer(t.name, t.tensor) end
  end
  self.table_names = names
end

-- A variant written in Lua: makes its tables, traces its functions and
-- hands the programs to the C object (lua/ember/variant.lua).
function Attention:_trace(def, core)
  local dims = { heads = core.heads, head_dim = core.head_dim, v_head_dim = core.v_head_dim }
  local options = core:options()
  local tables = {}
  if def.params then
    local ok, list = pcall(def.params, options, dims)
    if not ok then errors.raise("attention variant '%s': params failed: %s", def.name, tostring(list)) end
    if type(list) ~= "table" then errors.raise("attention variant '%s': params must return a list of {name=, tensor=, learned=}", def.name) end
    for i, t in ipairs(list) do
      if type(t) ~= "table" or type(t.name) ~= "string" or not Module.is_tensor(t.tensor) then
        errors.raise("attention variant '%s': params entry %d must be {name=, tensor=, learned=}", def.name, i)
      end
      local x = t.tensor
      if x.dtype == "bool" then x = x:long() end -- a bool table (a precomputed mask) reads as 0/1
      if x.dtype ~= "int64" and x.dtype ~= self.dtype then x = x:to(self.dtype) end
      if x.device ~= self.device then x = x:to(self.device) end
      if t.learned then
        if x.dtype == "int64" or x.dtype == "bool" then
          errors.raise("attention variant '%s': learned table '%s' must be a float tensor", def.name, t.name)
        end
        x = x:detach():requires_grad_()
      end
      tables[i] = { name = t.name, tensor = x, learned = t.learned and true or false, bool = t.tensor.dtype == "bool" }
    end
  end
  local inst = variant.trace(def, options, dims, tables)
  local caps = {}
  for i, c in ipairs(inst.caps) do
    caps[i] = { name = c.name, ndim = c.ndim, param = c.param, shape = c.param and tables[c.param].tensor.shape or nil }
  end
  core:set_programs { score = inst.score, score_grad = inst.score_grad, mask = inst.mask, sink = inst.sink,
    sink_grad = inst.sink_grad, caps = caps }
  self._variant = inst
  return tables
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
-- `causal`, `need_weights`, `scale` (nil: 1/sqrt(head_dim); any other
-- number as given, 0 and negative ones included, as PyTorch), `dropout`
-- (on the weights, in training mode only). A query the masks leave no key
-- gets 0 (weights 0, gradient 0), not PyTorch's NaN
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
  -- the module the user called, for the messages (MultiHeadAttention passes its name: internal)
  local who = o._caller or "Attention.forward"
  o._caller = nil
  q = self:_carry_scale(q, o)
  local inputs = o.variant_inputs
  o.variant_inputs = nil
  if self._variant then return self:_forward_traced(tables, q, k, v, o, inputs or {}, who) end
  if inputs ~= nil then
    errors.raise("%s: variant_inputs are for variants written in Lua; '%s' takes none", who, self.attention)
  end
  local ok, out, w = pcall(self.core.forward, self.core, tables, q, k, v, o)
  if not ok then errors.raise("%s", Attention._said_by(out, who)) end
  return out, w
end

-- The core's message ("ember.Attention.forward: ...") as said by `who`.
function Attention._said_by(msg, who)
  msg = tostring(msg)
  if who == "Attention.forward" then return msg end
  return (msg:gsub("^ember%.Attention%.forward:", function() return who .. ":" end, 1))
end

-- `scale` as PyTorch's: nil is the default 1/sqrt(head_dim), any other
-- number is used as given, 0 (uniform weights) and negative ones included.
-- The core reads a scale <= 0 as "the default" (em_attn_args, a C struct's
-- zero), so q carries such a scale and the core gets 1: the same scores
-- for every variant whose score starts from s = scale * q.k (the declaring
-- ones and those written in Lua); one that reads the scale itself
-- ("linear": FAVOR+ takes sqrt(scale)) refuses it. Returns q.
function Attention:_carry_scale(q, o)
  local sc = o.scale
  if sc == nil then return q end
  if type(sc) ~= "number" or sc ~= sc then
    errors.raise("Attention.forward: scale must be a number, got %s", sc ~= sc and "nan" or type(sc))
  end
  if sc > 0 then return q end
  if not self._variant and self.core:declaration() == nil then
    errors.raise("Attention.forward: variant '%s' reads the scale itself and needs scale > 0, got %s (nil is 1/sqrt(head_dim))",
      self.attention, tostring(sc))
  end
  if not Module.is_tensor(q) then return q end -- the core names a q that is not a tensor
  o.scale = 1
  return q * sc
end

-- A traced variant: the fused kernel (CPU, CUDA); its functions run densely
-- by core ops for the weights (`kernel = "composed"` forces that), and on a
-- device whose kernel declines the call (the core's EM_ERR_UNSUPPORTED,
-- which core:forward answers with nil when asked: a dtype or head size it
-- lacks, a program too long for it).
function Attention:_forward_traced(tables, q, k, v, o, inputs, who)
  local inst = self._variant
  who = who or "Attention.forward"
  local stale = variant.stale(inst)
  if stale then errors.raise("%s: %s", who, stale) end
  if type(inputs) ~= "table" then errors.raise("%s: variant_inputs must be a table {name = tensor}", who) end
  local list, converted = {}, nil
  for i, c in ipairs(inst.caps) do
    if c.input then
      local t = inputs[c.input]
      if not Module.is_tensor(t) then
        errors.raise("%s: variant '%s' needs the per-call tensor '%s' (variant_inputs = {%s = ...}), got %s",
          who, self.attention, c.input, c.input, type(t))
      end
      if t.ndim ~= c.ndim then
        errors.raise("%s: variant '%s' indexes '%s' with %d indices, got a %d-d tensor", who, self.attention,
          c.input, c.ndim, t.ndim)
      end
      -- the dtype the variant declares (lua/ember/variant.lua: int64 unless
      -- {dtype = "float"}); strict as torch's index ops: float ids are not
      -- rounded, ints are not taken for a float input
      local int = t.dtype == "int64" or t.dtype == "bool"
      if int ~= (c.kind ~= "float") then
        errors.raise("%s: variant '%s' declares its input '%s' %s, got %s%s", who, self.attention, c.input,
          c.kind ~= "float" and "int64 (or bool, read as 0/1)" or "float (float32, float64 or bfloat16)", t.dtype,
          c.kind ~= "float" and " (ember.tensor(ids, {dtype = \"int64\"}), or x:long() of whole numbers)" or "")
      end
      if t.dtype == "bool" then -- reads as 0/1, as a bool table
        t = t:long()
        converted = converted or {}
        converted[c.input] = t
      end
      list[i] = t
    end
  end
  for name in pairs(inputs) do
    local known = false
    for _, c in ipairs(inst.caps) do if c.input == name then known = true end end
    if not known then errors.raise("%s: variant '%s' takes no input '%s'", who, self.attention, tostring(name)) end
  end
  if converted then
    local all = {}
    for n, t in pairs(inputs) do all[n] = converted[n] or t end
    inputs = all
  end
  local composed = o.kernel == "composed"
  o.kernel = nil
  local function dense()
    ember._attention_count("composed")
    local ok, out, w = pcall(variant.dense, inst, tables, inputs, q, k, v, o)
    if not ok then
      -- variant.dense's own errors already name the user's line: keep that one
      local msg = tostring(out)
      if msg:match("^[^\n:]*:%d+: ") and errors.strip_library_position(msg) == msg then error(msg, 0) end
      errors.raise("%s", msg)
    end
    if o.need_weights then return out, w end
    return out
  end
  if composed or o.need_weights or not Module.is_tensor(q) then return dense() end
  -- the fused kernel gives no gradient to a per-call input (only to the
  -- learned tables): one that requires it runs as core ops, which give it,
  -- rather than a silently detached result
  if ember.is_grad_enabled() then
    for _, t in pairs(list) do -- sparse: the params' slots are empty
      if t.requires_grad then return dense() end
    end
  end
  -- on the CPU the fused kernel covers every call: a decline there is an error
  local ok, out, w = pcall(self.core.forward, self.core, tables, q, k, v, o, list, q.device ~= "cpu")
  if not ok then errors.raise("%s", Attention._said_by(out, who)) end
  if out == nil then return dense() end
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
