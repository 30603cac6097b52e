--- nn.MultiHeadAttention (also ember.MultiHeadAttention): multi-head
-- attention with any attention variant, as torch.nn.MultiheadAttention
-- (batch_first).
--
--    local mha = nn.MultiHeadAttention(64, 4, {attention = "relpos", mode = "t5"})
--    local mha = nn.MultiHeadAttention{d_model = 64, heads = 4, rope = true}
--    local x, q, kv = ember.randn(2, 5, 64), ember.randn(2, 3, 64), ember.randn(2, 7, 64)
--    local y = mha(x)                                  -- self-attention
--    local y, w = mha(q, kv, {need_weights = true})    -- cross-attention
--    local gqa = nn.MultiHeadAttention{d_model = 64, heads = 8, kv_heads = 2}
--
-- Children, in this order: q_proj, k_proj, v_proj, out_proj (nn.Linear)
-- and attn (an ember.Attention holding the variant and its tables). State
-- dict names are therefore "q_proj.weight", ..., "attn.rel_k"; the names of
-- earlier ember versions ("w_q", "b_q", ..., "relpos.rel_k") still load
-- (see `legacy_names`), and so does torch.nn.MultiheadAttention's state
-- dict: in_proj_weight / in_proj_bias (or q_proj_weight, k_proj_weight,
-- v_proj_weight) split into q_proj, k_proj and v_proj (`upgrade_state_dict`,
-- at any depth of a model); `torch_state_dict()` stacks them back.
--
-- With kv_heads < heads (grouped-query attention; 1 is multi-query), k_proj
-- and v_proj project to kv_heads * head_dim, and each key/value head serves
-- heads/kv_heads query heads (as torch's repeat_interleave), read in place by the fused kernel.
--
-- Incremental decoding with a key/value cache (`forward_cached`) uses the
-- same children, so it computes exactly what `forward` does; the cache
-- keeps kv_heads heads, in buffers written in place (nn/_kv_cache.lua).
-- @classmod nn.MultiHeadAttention
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local masks = require "ember.nn._masks"
local Module = require "ember.nn.Module"
local torch_names = require "ember.nn._torch_names"
local Linear = require "ember.nn.Linear"
local Attention = require "ember.nn.Attention"
local kv_cache = require "ember.nn._kv_cache"
local trace_dep_q = require("ember._trace").DEP.Q

local MHA = Module:extend("MultiHeadAttention")

-- The module's own options; every other key is the variant's.
local OWN = { "d_model", "heads", "kv_heads", "head_dim", "attention", "kdim", "vdim", "dropout", "bias", "rope",
              "rope_base", "causal", "dtype", "device" }
local IS_OWN = {}
for _, k in ipairs(OWN) do IS_OWN[k] = true end
MHA.OWN = OWN -- read by nn/_attn_opts.lua: a layer's attention_options must not name them

local function check_type(v, want, name)
  if v ~= nil and type(v) ~= want then
    errors.raise("MultiHeadAttention: %s must be a %s, got %s", name, want, type(v))
  end
end

local function positive_int(v, name, default)
  if v == nil then return default end
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    errors.raise("MultiHeadAttention: %s must be a positive integer, got %s", name,
      type(v) == "number" and tostring(v) or ("a %s (%s)"):format(type(v), tostring(v)))
  end
  return math.tointeger(v)
end

-- PyTorch's and Hugging Face's names for the module's options: an unknown
-- option that is one says what to write instead.
local OTHER_NAMES = {
  embed_dim = "d_model", num_heads = "heads", num_attention_heads = "heads", n_heads = "heads",
  num_key_value_heads = "kv_heads", num_kv_heads = "kv_heads", n_kv_heads = "kv_heads", is_causal = "causal",
  rope_theta = "rope_base", hidden_size = "d_model",
}

-- Splits a spec into the module's settings and the variant's options.
local function read_spec(d_model, heads, opts)
  local spec = {}
  if type(d_model) == "table" then
    for k, v in pairs(d_model) do spec[k] = v end
  else
    if opts ~= nil and type(opts) ~= "table" then
      errors.raise("MultiHeadAttention: options must be a table, got %s", type(opts))
    end
    for k, v in pairs(opts or {}) do spec[k] = v end
    spec.d_model, spec.heads = d_model, heads
  end
  local s = {
    d_model = positive_int(spec.d_model, "d_model", 0), heads = positive_int(spec.heads, "heads", 0),
  }
  if s.d_model <= 0 or s.heads <= 0 then
    errors.raise("MultiHeadAttention: d_model and heads must be positive integers, got d_model=%s heads=%s%s",
      tostring(spec.d_model), tostring(spec.heads), (spec.embed_dim or spec.num_heads) and
      " (PyTorch's embed_dim is d_model here, num_heads is heads; nn.MultiheadAttention takes PyTorch's names)" or "")
  end
  -- PyTorch's batch_first = true is this module's only layout
  if spec.batch_first ~= nil and spec.batch_first ~= true then
    errors.raise("MultiHeadAttention: inputs are always batch first ([B, L, d_model], PyTorch's batch_first = true), "
      .. "got batch_first = %s: give x:transpose(1, 2) for [L, B, d_model], or use nn.MultiheadAttention "
      .. "(PyTorch's spelling and layouts)", tostring(spec.batch_first))
  end
  spec.batch_first = nil
  if spec.head_dim ~= nil then
    -- a head width of its own (Qwen3, Mistral's configs): q_proj projects to
    -- heads * head_dim, out_proj from it back to d_model
    s.head_dim = positive_int(spec.head_dim, "head_dim", 0)
    if s.head_dim <= 0 then
      errors.raise("MultiHeadAttention: head_dim must be a positive integer, got %s", tostring(spec.head_dim))
    end
  elseif s.d_model % s.heads ~= 0 then
    errors.raise("MultiHeadAttention: d_model (%d) must be divisible by heads (%d): each head gets d_model/heads dims "
      .. "(or give head_dim)", s.d_model, s.heads)
  else
    s.head_dim = s.d_model // s.heads
  end
  s.inner = s.heads * s.head_dim -- q_proj's output and out_proj's input width
  s.kv_heads = positive_int(spec.kv_heads, "kv_heads", s.heads)
  if s.kv_heads <= 0 or s.heads % s.kv_heads ~= 0 then
    errors.raise("MultiHeadAttention: heads (%d) must be divisible by kv_heads (%s): each group of heads/kv_heads "
      .. "query heads shares one key/value head (kv_heads = 1 is multi-query attention)", s.heads, tostring(spec.kv_heads))
  end
  s.kdim = positive_int(spec.kdim, "kdim", s.d_model)
  s.vdim = positive_int(spec.vdim, "vdim", s.d_model)
  if s.kdim <= 0 or s.vdim <= 0 then errors.raise("MultiHeadAttention: kdim and vdim must be positive") end
  check_type(spec.dropout, "number", "dropout")
  s.dropout = spec.dropout or 0
  if not (s.dropout >= 0 and s.dropout < 1) then
    errors.raise("MultiHeadAttention: dropout must be in [0, 1), got %s", tostring(s.dropout))
  end
  for _, k in ipairs({ "bias", "rope", "causal" }) do check_type(spec[k], "boolean", k) end
  s.bias = spec.bias ~= false
  s.rope = spec.rope == true
  s.causal = spec.causal == true
  check_type(spec.rope_base, "number", "rope_base")
  s.rope_base = spec.rope_base or 10000
  if s.rope and s.head_dim % 2 ~= 0 then
    errors.raise("MultiHeadAttention: rope needs an even head dim, got %s = %d",
      spec.head_dim ~= nil and "head_dim" or "d_model/heads", s.head_dim)
  end
  local dtype = type(spec.dtype) == "string" and ember.dtype_info(spec.dtype)
  s.dtype = spec.dtype == nil and ember.get_default_dtype() or dtype and dtype.floating and dtype.name
  if not s.dtype then
    errors.raise("MultiHeadAttention: dtype must be float32, float64 or bfloat16, got %s", tostring(spec.dtype))
  end
  s.device = spec.device or "cpu"
  check_type(spec.attention, "string", "attention (a variant name)")
  s.attention = spec.attention or "standard"
  local variant = {}
  for k, v in pairs(spec) do
    if type(k) ~= "string" then errors.raise("MultiHeadAttention: options must have string keys, got a %s key", type(k)) end
    if not IS_OWN[k] then variant[k] = v end
  end
  return s, variant
end

-- An ember.Attention for the module's sizes; an unknown option may also be
-- a misspelt module option, so the message lists both.
local function make_attention(s, name, variant_opts)
  local spec = { attention = name, heads = s.heads, head_dim = s.head_dim, dtype = s.dtype, device = s.device }
  for k, v in pairs(variant_opts) do spec[k] = v end
  local ok, att = pcall(Attention, spec)
  if not ok then
    -- the variant's message, said by the module the user built
    -- every leading position (the caller's, then a library file's, when the
    -- variant was raised from Lua) goes: the message is the module's
    local msg = tostring(att)
    local first = msg:match("^([^:\n]*:%d+): ")
    repeat
      local n
      msg, n = msg:gsub("^[^:\n]*:%d+: ", "")
    until n == 0
    -- a traced function's own error keeps its line (in the user's variant), after the name
    if first and errors.strip_library_position(first .. ": x") ~= "x" then
      msg = msg:gsub("^(attention variant '[^']*')", "%1 (" .. first:gsub("%%", "%%%%") .. ")", 1)
    end
    msg = msg:gsub("^ember%.Attention: ", "MultiHeadAttention: ")
    if msg:find("unknown option", 1, true) then
      local opt = msg:match("unknown option '([^']*)'")
      local other = opt and OTHER_NAMES[opt]
      msg = msg .. "; MultiHeadAttention's own options: " .. table.concat(OWN, ", ")
        .. (other and ("; %s is %s here"):format(opt, other) or "")
    end
    errors.raise("%s", msg)
  end
  return att
end

--- Builds the module.
-- @param d_model the model width, or one table with every option
-- @int heads the number of heads (d_model must be divisible by it, unless head_dim is given)
-- @tparam[opt] table opts `attention` (variant name, "standard"),
-- `kv_heads` (key/value heads for grouped-query attention, dividing
-- heads; 1 is multi-query attention; default heads), `head_dim` (each
-- head's width, default d_model / heads; another value makes q_proj
-- [heads * head_dim, d_model] and out_proj [d_model, heads * head_dim], as
-- Hugging Face's Qwen3 and Mistral attention), `kdim`/`vdim`
-- (key/value input widths, d_model), `dropout` (on attention weights, in
-- training mode; 0), `bias` (true), `rope` (rotary positions on
-- queries and keys, false), `rope_base` (10000), `causal` (false),
-- `dtype`, `device`, and the variant's own options
-- (`ember.attention_variants(name).options`). PyTorch's `batch_first = true`
-- is taken (the module's only layout: [B, L, d_model]); false is refused.
function MHA:__init(d_model, heads, opts, ...)
  require("ember._errors").no_extra("nn.MultiHeadAttention", { "d_model", "heads", "opts" }, 1, d_model, heads, opts, ...)
  local s, variant = read_spec(d_model, heads, opts)
  for k, v in pairs(s) do self[k] = v end
  -- The variant first, then the projections: the same random draws, in
  -- the same order, as ember's C module made (so seeded runs keep their
  -- numbers). As torch.nn.MultiheadAttention: xavier-uniform input
  -- projections, uniform(+-1/sqrt(d_model)) output projection, zero biases.
  -- Where kdim = vdim = d_model torch draws q, k and v as one joined
  -- in_proj_weight [d_model + 2 kv_dim, d_model] (xavier over that shape:
  -- a bound of sqrt(6 / (4 d_model)) without grouped heads); otherwise each
  -- projection on its own (q_proj_weight, k_proj_weight, v_proj_weight).
  local att = make_attention(s, s.attention, variant)
  if s.dropout > 0 and not att.caps.dropout then
    errors.raise("MultiHeadAttention: attention '%s' has no dropout on attention weights, so dropout must be 0 "
      .. "(got %g; variants with it: %s)", s.attention, s.dropout, MHA._variants_with("dropout"))
  end
  local lin = { bias = s.bias, dtype = s.dtype, device = s.device, init = "zeros" }
  local topts = { dtype = s.dtype, device = s.device }
  local proj = {}
  local kv_dim = s.kv_heads * s.head_dim -- k_proj and v_proj project to kv_heads heads
  local joined = s.kdim == s.d_model and s.vdim == s.d_model
  for i, in_dim in ipairs({ s.d_model, s.kdim, s.vdim }) do
    local out_dim = i == 1 and s.inner or kv_dim
    proj[i] = Linear(in_dim, out_dim, lin)
    local bound = math.sqrt(6 / ((joined and s.inner + 2 * kv_dim or out_dim) + in_dim))
    ember.no_grad(function() proj[i].weight:copy_(ember.uniform({ out_dim, in_dim }, -bound, bound, topts)) end)
  end
  proj[4] = Linear(s.inner, s.d_model, lin)
  local bound = 1 / math.sqrt(s.inner)
  ember.no_grad(function() proj[4].weight:copy_(ember.uniform({ s.d_model, s.inner }, -bound, bound, topts)) end)
  -- one statement each: the order of a multiple assignment is undefined,
  -- and assignment order is registration order
  self.q_proj = proj[1]
  self.k_proj = proj[2]
  self.v_proj = proj[3]
  self.out_proj = proj[4]
  self.attn = att
end

--- Names of ember versions before the module was written in Lua
-- ("w_q" -> "q_proj.weight", ..., "relpos.rel_k" -> "attn.rel_k").
-- @treturn table
function MHA:legacy_names()
  local map = {}
  for short, child in pairs({ q = "q_proj", k = "k_proj", v = "v_proj", o = "out_proj" }) do
    map["w_" .. short] = child .. ".weight"
    map["b_" .. short] = child .. ".bias"
  end
  for old, new in pairs(self.attn:legacy_names()) do map[old] = "attn." .. new end
  return map
end

--- Swaps the attention variant (its tables are new); the projections stay.
-- A failed swap changes nothing.
-- @string name a variant name
-- @tparam[opt] table opts the variant's options
-- @treturn MultiHeadAttention self
function MHA:set_attention(name, opts)
  if type(name) ~= "string" then errors.raise("MultiHeadAttention.set_attention: expected a variant name, got %s", type(name)) end
  self.attn = make_attention(self, name, opts or {})
  self.attention = name
  return self
end

--- The variant's checked options.
-- @treturn table
function MHA:options() return self.attn:options() end

--- As Module:to; the module's dtype and device fields follow.
-- @string where a dtype or device name
-- @tparam[opt] table moved old tensor -> new one, shared by a whole tree (internal)
-- @treturn MultiHeadAttention self
function MHA:to(where, moved)
  Module.to(self, where, moved)
  self.dtype, self.device = self.attn.dtype, self.attn.device
  return self
end

-- [B, L, H*dh] -> [B, H, L, dh]
local function split_heads(x, H)
  local B, L, E = x.shape[1], x.shape[2], x.shape[3]
  return x:reshape(B, L, H, E // H):transpose(2, 3)
end

-- Rotary tables, cached per (head dim, base, device, dtype) for positions
-- 0 .. n-1, and grown (doubled) when a longer sequence comes. A forward
-- only narrows them. A subclass with other frequencies (Llama's
-- rope_scaling) gives `freq` = {key = a string naming them, inv = the
-- head_dim/2 inverse frequencies, scale = a factor on cos and sin (1),
-- once = true for frequencies of this call only (dynamic NTK): then only
-- the call's rows are built, and not kept}.
local rope_tables, rope_builds = {}, 0
local last_once -- the last call-only table: every layer of a call, q and k, asks for the same

local function rope_table(dh, base, device, dtype, first, L, freq)
  local key = freq and ("%s|%s|%s"):format(freq.key, device, dtype) or ("%d|%.17g|%s|%s"):format(dh, base, device, dtype)
  local once = freq and freq.once
  if once then
    key = ("%s|%d|%d"):format(key, first, L)
    if last_once and last_once.key == key then return last_once.t, 1, L end
  end
  local t = not once and rope_tables[key] or nil
  if not t or t.n < first + L then
    local n = math.max(first + L, t and 2 * t.n or 64)
    local half = dh // 2
    local f64 = { dtype = "float64" }
    local inv = freq and freq.inv or {}
    if not freq then
      for m = 0, half - 1 do inv[m + 1] = base ^ (-2.0 * m / dh) end
    end
    local pos = once and ember.arange(first, first + L, f64) or ember.arange(0, n, f64)
    local ang = pos:unsqueeze(2) * ember.tensor(inv, f64):unsqueeze(1)
    -- over the whole head: cos twice, and sin with the first half negated,
    -- so that rope(x) = x * cos + rotate(x) * sin is one cat and three ops
    local c, s = ang:cos(), ang:sin()
    if freq and freq.scale ~= 1 then c, s = c * freq.scale, s * freq.scale end
    t = { n = n, cos = ember.cat({ c, c }, 2):to(device):to(dtype), sin = ember.cat({ -s, s }, 2):to(device):to(dtype),
          cos_half = c:to(device):to(dtype), sin_half = s:to(device):to(dtype) }
    rope_builds = rope_builds + 1
    if once then
      last_once = { key = key, t = t }
      return t, 1, L
    end
    rope_tables[key] = t
  end
  return t, first + 1, L
end

--- How often rotary tables were built, and how many are cached (tests use
-- it to see that a forward does not rebuild them).
-- @treturn table {builds=, entries=}
function MHA.rope_cache_info()
  local n = 0
  for _ in pairs(rope_tables) do n = n + 1 end
  return { builds = rope_builds, entries = n }
end

-- Rotary position embedding (rotate-half form, as GPT-NeoX / LLaMA) on
-- x [B, H, L, dh] for positions first, first+1, ... (0-based):
-- [x1 cos - x2 sin, x2 cos + x1 sin]. The backend's rope kernel reads the
-- heads where they lie and its backward writes the gradient in their
-- layout (core/src/ops_rope.c). Without it, x * cos + rotate(x) * sin with
-- rotate(x) = [x2, x1] and the first half of sin negated: the same
-- products and sums, so in float32 the same bits (a - b is a + (-b)
-- exactly).
function MHA:_rope(x, first)
  local L, dh = x.shape[3], x.shape[4]
  local half = dh // 2
  -- positions first .. first + L - 1: the call's length is first + L
  local freq = self._rope_frequencies and self:_rope_frequencies(first + L, dh) or nil
  local t, from = rope_table(dh, self.rope_base, x.device, x.dtype, first, L, freq)
  if not t.composed then
    local y = ember._rope(x, t.cos_half:narrow(1, from, L), t.sin_half:narrow(1, from, L))
    if y then return y end
    t.composed = true -- the backend has no rope kernel: compose from now on
  end
  local rotated = ember.cat({ x:narrow(4, half + 1, half), x:narrow(4, 1, half) }, 4)
  return x * t.cos:narrow(1, from, L) + rotated * t.sin:narrow(1, from, L)
end

local FWD_OPTS = { key_padding_mask = true, attn_mask = true, allow_mask = true, block_mask = true,
                   causal = true, need_weights = true, average_attn_weights = true, variant_inputs = true }

-- torch.nn.MultiheadAttention.forward's options that ember's module spells
-- otherwise: what to write instead
local FWD_HINTS = {
  is_causal = "PyTorch's is_causal is causal here",
  attention_mask = "Hugging Face's attention_mask (1 = attend) is key_padding_mask = attention_mask:eq(0) here",
}

local function check_opts(opts, who)
  if opts == nil then return {} end
  for k in pairs(opts) do
    if not FWD_OPTS[k] then
      errors.raise("%s: unknown option '%s'%s (options: key_padding_mask, attn_mask, allow_mask, block_mask, causal, need_weights, "
        .. "average_attn_weights, variant_inputs)",
        who, tostring(k), FWD_HINTS[k] and ": " .. FWD_HINTS[k] or "")
    end
  end
  if opts.average_attn_weights ~= nil and type(opts.average_attn_weights) ~= "boolean" then
    errors.raise("%s: average_attn_weights must be a boolean, got %s", who, type(opts.average_attn_weights))
  end
  return opts
end

local shape_str = errors.shape_str

-- forward_cached's options (no need_weights: a decoding step returns none)
local CACHED_OPTS = { "memory", "key_padding_mask", "attn_mask", "allow_mask", "block_mask", "causal", "variant_inputs" }

-- (query [, key_value | key, value] [, opts]) -> query, key, value, opts
local function read_args(who, query, ...)
  local n, args = select("#", ...), { ... }
  local tensors, opts = {}, nil
  for i = 1, n do
    local a = args[i]
    if Module.is_tensor(a) then
      if #tensors >= 2 or opts then errors.raise("%s: expected (query [, key_value | key, value] [, options])", who) end
      tensors[#tensors + 1] = a
    elseif type(a) == "table" then
      if i ~= n then errors.raise("%s: the options table must be the last argument", who) end
      opts = a
    elseif a ~= nil then
      errors.raise("%s: argument %d must be a tensor, nil or an options table, got %s", who, i + 1, type(a))
    end
  end
  if not Module.is_tensor(query) then errors.raise("%s: query must be a tensor, got %s", who, type(query)) end
  local key = tensors[1] or query
  local value = tensors[2] or key
  return key, value, check_opts(opts, who)
end

function MHA:_check_inputs(who, query, key, value)
  if query.ndim ~= 3 or query.shape[3] ~= self.d_model then
    errors.raise("%s: query must be [B, Lq, d_model=%d], got %s", who, self.d_model, shape_str(query))
  end
  if key.ndim ~= 3 or key.shape[3] ~= self.kdim or key.shape[1] ~= query.shape[1] then
    errors.raise("%s: key must be [B=%d, Lk, kdim=%d], got %s%s", who, query.shape[1], self.kdim, shape_str(key),
      key == query and " (self-attention uses the query as key: kdim must equal d_model)" or "")
  end
  if value.ndim ~= 3 or value.shape[3] ~= self.vdim or value.shape[1] ~= key.shape[1] or value.shape[2] ~= key.shape[2] then
    errors.raise("%s: value must be [B, Lk=%d, vdim=%d], got %s (key %s)", who, key.shape[2], self.vdim,
      shape_str(value), shape_str(key))
  end
  -- the dtype of q_proj's weight, or of its first parameter when it is a
  -- module of the user's (a LoRA wrapper: HF's attention only calls it)
  local w = self.q_proj.weight
  if not Module.is_tensor(w) then w = self.q_proj:parameters()[1] end
  if w == nil then return end
  local dt = w.dtype
  local function ok(t) -- under autocast a bfloat16 input meets float32 weights in bfloat16 products
    return t.dtype == dt or (dt == "float32" and t.dtype == "bfloat16" and ember.autocast.enabled())
  end
  if not (ok(query) and ok(key) and ok(value)) then
    errors.raise("%s: inputs must be %s like the module (use :to(dtype)), got query %s, key %s, value %s",
      who, dt, query.dtype, key.dtype, value.dtype)
  end
end

-- The masks checked here, so that a wrong one is reported by the module the
-- user called (not by the inner ember.Attention): key_padding_mask bool
-- [B, Lk] on q's device; the resolved mask bool or q's dtype, broadcasting
-- to [B, H, Lq, Lk].
local function check_masks(who, kpm, mask, q, k)
  local B, H, Lq, Lk = q.shape[1], q.shape[2], q.shape[3], k.shape[3]
  if kpm ~= nil then
    if not Module.is_tensor(kpm) or kpm.dtype ~= "bool" or kpm.ndim ~= 2 or kpm.shape[1] ~= B
        or kpm.shape[2] ~= Lk or kpm.device ~= q.device then
      errors.raise("%s: key_padding_mask must be a bool tensor [B=%d, Lk=%d] (true = padding) on %s, got %s",
        who, B, Lk, q.device, Module.is_tensor(kpm) and (shape_str(kpm) .. " " .. kpm.dtype .. " on " .. kpm.device)
        or type(kpm))
    end
  end
  if mask == nil then return end
  if not Module.is_tensor(mask) then errors.raise("%s: attn_mask must be a tensor, got %s", who, type(mask)) end
  -- under autocast the core casts a float mask with the inputs
  local cast = ember.autocast.enabled() and ember.dtype_info(mask.dtype).floating
  if mask.dtype ~= "bool" and mask.dtype ~= q.dtype and not cast then
    errors.raise("%s: attn_mask must be a float mask of the inputs' dtype %s (added to the scores), got %s; "
      .. "a boolean mask goes in allow_mask (true = may attend) or block_mask (true = masked)", who, q.dtype, mask.dtype)
  end
  local want = { B, H, Lq, Lk }
  local ok = mask.ndim <= 4 and mask.device == q.device
  for i = 1, mask.ndim do
    local n = mask.shape[mask.ndim - i + 1]
    if n ~= 1 and n ~= want[5 - i] then ok = false end
  end
  if not ok then
    -- torch.nn.MultiheadAttention's 3-d mask is [B * heads, Lq, Lk]
    local torch_3d = mask.ndim == 3 and mask.shape[1] == B * H and mask.shape[2] == Lq and mask.shape[3] == Lk
    errors.raise("%s: the attention mask must be [Lq=%d, Lk=%d] or broadcast to [B=%d, H=%d, Lq, Lk] on %s, got %s on %s%s",
      who, Lq, Lk, B, H, q.device, shape_str(mask), mask.device, torch_3d and (" (PyTorch's [B * heads, Lq, Lk] "
        .. "layout: give attn_mask:view(%d, %d, %d, %d))"):format(B, H, Lq, Lk) or "")
  end
end

-- Runs the variant on projected heads; returns the merged output [B, Lq, d_model].
function MHA:_attend(who, q, k, v, opts, causal, B, Lq)
  local mask = masks.resolve(opts, who, "attn_mask", "allow_mask", "block_mask")
  check_masks(who, opts.key_padding_mask, mask, q, k)
  -- grouped heads go to the variant as they are: the core reads kv head h // (heads/kv_heads)
  -- in place on the fused kernel and repeats them for every other route
  if opts.need_weights and not self.attn.caps.weights then
    errors.raise("%s: attention '%s' cannot return weights (need_weights); variants that can: %s",
      who, self.attention, MHA._variants_with("weights"))
  end
  local o, w
  if mask and mask.dtype ~= "bool" and mask.requires_grad and ember.is_grad_enabled() then
    o, w = self:_attend_learned_mask(who, q, k, v, mask, opts.key_padding_mask, causal)
    if not opts.need_weights then w = nil end -- weights only when asked, as the kernel's route
  else
    o, w = self.attn(q, k, v, {
      key_padding_mask = opts.key_padding_mask, attn_mask = mask, causal = causal,
      need_weights = opts.need_weights, dropout = self.dropout > 0 and self.dropout or nil,
      variant_inputs = opts.variant_inputs, -- per-call tensors of a variant written in Lua (document ids ...)
      _caller = who, -- the messages name the module called
    })
  end
  o = o:transpose(2, 3):reshape(B, Lq, self.inner)
  return self.out_proj(o), w
end

-- A float attn_mask that requires grad (a learned bias) gets its gradient,
-- as in PyTorch: the kernels take masks as constants, so "standard" runs as
-- core ops here (ember/_sdpa.lua), with the key padding and the
-- (bottom-right) causal mask joined to it. Other variants refuse it.
function MHA:_attend_learned_mask(who, q, k, v, mask, kpm, causal)
  if self.attention ~= "standard" then
    errors.raise("%s: attn_mask requires grad, but attention '%s' takes masks as constants (no gradient would "
      .. "reach it); with attention 'standard' it gets its gradient, as in PyTorch, or give the bias as a learned "
      .. "table of a Lua variant (ember.attention_variant)", who, self.attention)
  end
  local B, H, Lq, Lk = q.shape[1], q.shape[2], q.shape[3], k.shape[3]
  local m = mask:expand(B, H, Lq, Lk)
  if kpm then m = m:masked_fill(kpm:view(B, 1, 1, Lk):expand(B, H, Lq, Lk), -math.huge) end
  if causal then
    local i = ember.arange(1, Lq + 1, { device = q.device }):view(Lq, 1)
    local j = ember.arange(1, Lk + 1, { device = q.device }):view(1, Lk)
    m = m:masked_fill(j:gt(i + (Lk - Lq)):view(1, 1, Lq, Lk):expand(B, H, Lq, Lk), -math.huge)
  end
  local p = self.training and self.dropout or 0
  return require("ember._sdpa").dense_with_mask_grad(q, k, v, m, 1 / math.sqrt(q.shape[4]), p)
end

function MHA._variants_with(cap)
  local names = {}
  for _, v in ipairs(ember.attention_variants()) do
    if v.caps[cap] then names[#names + 1] = v.name end
  end
  return #names > 0 and table.concat(names, ", ") or "none loaded"
end

-- A projection that can join others in one product: an nn.Linear itself
-- (not a subclass, which may compute something else) without forward hooks.
local function joinable(m)
  return getmetatable(m) == Linear and rawget(m, "_forward_hooks") == nil
end

-- Projections of one input in one product, as torch's in_proj: the weights
-- (and biases) stacked by rows, one ember.linear, views of its columns. For
-- a KJV layer that is one cast of x under autocast instead of three, one
-- gemm of N = 3 d instead of three of d, and in the backward one dX product
-- and no sums of three gradients. Linear.forward's checks on x are left to
-- the separate path, which raises them.
local function project_joined(x, projs)
  local p1 = projs[1]
  if not joinable(p1) then return nil end -- a module of the user's has no weight to stack
  local dt = p1.weight.dtype
  for _, p in ipairs(projs) do
    if not joinable(p) or p.weight.dtype ~= dt or p.in_features ~= p1.in_features
        or (p.bias == nil) ~= (p1.bias == nil) or (p.bias and p.bias.dtype ~= dt) then return nil end
  end
  if not ember.dtype_info(x.dtype).floating or x.shape[x.ndim] ~= p1.in_features
      or (x.dtype ~= dt and not ember.autocast.enabled()) then return nil end
  local ws, bs = {}, {}
  for i, p in ipairs(projs) do ws[i], bs[i] = p.weight, p.bias end
  local y = ember.linear(x, ember.cat(ws, 1), p1.bias and ember.cat(bs, 1) or nil)
  local out, at = {}, 1
  for i, p in ipairs(projs) do
    out[i] = y:narrow(y.ndim, at, p.out_features)
    at = at + p.out_features
  end
  return out
end

-- q, k and v projected: in one product for self-attention, k and v in one
-- when they are one tensor (cross-attention over a memory).
function MHA:_project(query, key, value)
  if rawequal(query, key) and rawequal(key, value) then
    local qkv = project_joined(query, { self.q_proj, self.k_proj, self.v_proj })
    if qkv then return qkv[1], qkv[2], qkv[3] end
  elseif rawequal(key, value) then
    local kv = project_joined(key, { self.k_proj, self.v_proj })
    if kv then return self.q_proj(query), kv[1], kv[2] end
  end
  return self.q_proj(query), self.k_proj(key), self.v_proj(value)
end

--- Attention of `query` over `key`/`value`.
-- @tparam Tensor query [B, Lq, d_model], or unbatched [Lq, d_model] (as
-- PyTorch: then key, value, key_padding_mask and a Lua variant's per-call
-- tensors are unbatched too)
-- @tparam[opt] Tensor key [B, Lk, kdim] (default: query, self-attention);
-- a single tensor after query is used as both key and value
-- @tparam[opt] Tensor value [B, Lk, vdim] (default: key)
-- @tparam[opt] table opts `key_padding_mask` (bool [B, Lk], true = padding,
-- as PyTorch), `attn_mask` (float, added to the scores; one that requires
-- grad gets its gradient with attention "standard", by core ops), `allow_mask` (bool,
-- true = may attend) or `block_mask` (bool, true = masked) -- see
-- ember/nn/_masks.lua for why a boolean attn_mask is refused --, `causal`
-- (default: the module's), `need_weights`, `average_attn_weights` (false,
-- unlike PyTorch's default: the weights come per head; true averages them
-- over the heads, as torch.nn.MultiheadAttention's default). A query the
-- masks leave no key gets heads' output 0 before out_proj (weights 0,
-- gradient 0), not PyTorch's NaN, as ember.scaled_dot_product_attention's
-- @treturn Tensor [B, Lq, d_model] ([Lq, d_model] unbatched)
-- @treturn[opt] Tensor weights [B, H, Lq, Lk] when need_weights ([H, Lq, Lk] unbatched; [B, Lq, Lk]
-- and [Lq, Lk] with average_attn_weights = true): the
-- probabilities before dropout, detached, for inspection (nn.MultiheadAttention's, torch's
-- spelling, carry a gradient)
function MHA:forward(query, ...)
  local who = "MultiHeadAttention.forward"
  local key, value, opts = read_args(who, query, ...)
  if query.ndim == 2 then return self:_forward_unbatched(who, query, key, value, opts) end
  self:_check_inputs(who, query, key, value)
  local q, k, v = self:_project(query, key, value)
  q, k, v = split_heads(q, self.heads), split_heads(k, self.kv_heads), split_heads(v, self.kv_heads)
  if self._head_norm then q, k = self:_head_norm(q, "q"), self:_head_norm(k, "k") end -- a subclass's (Qwen3's q/k norms)
  if self.rope then
    q = self:_rope(q, key.shape[2] - query.shape[2]) -- bottom-right, as causal
    k = self:_rope(k, 0)
  end
  local causal = self.causal
  if opts.causal ~= nil then causal = opts.causal end
  local y, w = self:_attend(who, q, k, v, opts, causal, query.shape[1], query.shape[2])
  if w ~= nil and opts.average_attn_weights then w = w:mean(2) end -- [B, H, Lq, Lk] -> [B, Lq, Lk]
  return y, w
end

-- Unbatched input, as PyTorch: query [Lq, E], key/value [Lk, kdim/vdim],
-- key_padding_mask [Lk], a Lua variant's per-call tensors without their
-- batch dim (or with it, of size 1); out [Lq, E], weights [H, Lq, Lk].
function MHA:_forward_unbatched(who, query, key, value, opts)
  for name, t in pairs({ key = key, value = value }) do
    if t.ndim ~= 2 then
      errors.raise("%s: an unbatched query [Lq, d_model] needs an unbatched %s [Lk, dim], got %s", who, name, shape_str(t))
    end
  end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  local kpm = opts.key_padding_mask
  if kpm ~= nil then
    if not Module.is_tensor(kpm) or kpm.ndim ~= 1 then
      errors.raise("%s: with an unbatched query key_padding_mask must be a bool tensor [Lk=%d] (true = padding), got %s",
        who, key.shape[1], Module.is_tensor(kpm) and shape_str(kpm) or type(kpm))
    end
    o.key_padding_mask = kpm:unsqueeze(1)
  end
  -- a Lua variant's per-call tensors one dim short of what it indexes are
  -- unbatched too (doc [L] for document's doc [B, L], prefix as a 0-d tensor)
  local inst = rawget(self.attn, "_variant")
  if type(opts.variant_inputs) == "table" and inst then
    local vi = {}
    for name, t in pairs(opts.variant_inputs) do vi[name] = t end
    for _, c in ipairs(inst.caps) do
      local t = c.input and vi[c.input]
      if Module.is_tensor(t) and t.ndim == c.ndim - 1 then vi[c.input] = t:unsqueeze(1) end
    end
    o.variant_inputs = vi
  end
  local y, w = self:forward(query:unsqueeze(1), key:unsqueeze(1), value:unsqueeze(1), o)
  return y:squeeze(1), w and w:squeeze(1) -- [H, Lq, Lk], or [Lq, Lk] averaged
end

-- What makes the output depend on the query's position on the key axis
-- (a phrase for a message), or nil: rotary positions, a declared window,
-- block mask or relative bias (local, relpos), a Lua variant's function of q.
function MHA:_reads_query_position()
  if self.rope then return "rope = true" end
  local inst = rawget(self.attn, "_variant")
  if inst then
    for _, g in pairs { inst.score_graph or false, inst.mask_graph or false, inst.sink_graph or false } do
      if g and (g.deps or 0) & trace_dep_q ~= 0 then return ("attention '%s'"):format(self.attention) end
    end
    return nil
  end
  local ok, d = pcall(self.attn.core.declaration, self.attn.core)
  if ok and type(d) == "table" and ((d.mask or "none") ~= "none" or (d.bias or "none") ~= "none") then
    return ("attention '%s'"):format(self.attention)
  end
end

--- One step of incremental decoding with a key/value cache.
--
-- Self-attention (opts.memory == nil): projects the new tokens x
-- [B, Lnew, d_model], writes their keys/values into the cache's buffers
-- (preallocated, grown by doubling, written in place: see
-- ember/nn/_kv_cache.lua; cache.k / cache.v are the filled part,
-- [B, kv_heads, L, dh]) and attends causally (bottom-right) over all of them.
-- A key_padding_mask once given (left-padded prompts) is kept in the cache
-- (cache.pad) for the later steps. A cache belongs to the module that
-- filled it: another module's call with it is an error.
-- Cross-attention (opts.memory given): the memory's keys/values are
-- projected on the first call only and kept in the cache (a later call's
-- memory of another batch or length is an error: it would be ignored; a
-- cache is for self- or cross-attention, not both). A cross-attention
-- that reads the query's position (rope, local, relpos, a Lua variant's
-- function of q) is refused: forward places the queries by the whole
-- target's length, which a decoding step does not know.
-- @tparam Tensor x the new positions [B, Lnew, d_model]
-- @tparam table cache a plain table, empty ({}) at a sequence's first step
-- @tparam[opt] table opts `memory`, `key_padding_mask` (bool, true = padding:
-- over all cached keys [B, Lk], or over the new positions [B, Lnew] for
-- self-attention), `attn_mask`/`allow_mask`/`block_mask`, `causal` (default
-- true for self-attention)
-- @treturn Tensor [B, Lnew, d_model]
function MHA:forward_cached(x, cache, opts)
  local who = "MultiHeadAttention.forward_cached"
  opts = Module.check_options(who, opts, CACHED_OPTS)
  -- without dropout (or linear's redrawn features) training mode computes
  -- the same, and a new module is in it
  if self.training and self.dropout > 0 then
    errors.raise("%s: call :eval() first (the module drops attention weights with p = %g in training; " ..
      "decoding takes no dropout)", who, self.dropout)
  end
  if self.training and self.attn:options().redraw then
    errors.raise("%s: call :eval() first (attention '%s' redraws its features at every training forward)", who,
      self.attention)
  end
  if type(cache) ~= "table" then errors.raise("%s: cache must be a table ({} at the first step), got %s", who, type(cache)) end
  if not Module.is_tensor(x) or x.ndim ~= 3 or x.shape[3] ~= self.d_model then
    errors.raise("%s: x must be [B, Lnew, d_model=%d], got %s", who, self.d_model,
      Module.is_tensor(x) and shape_str(x) or type(x))
  end
  local q = split_heads(self.q_proj(x), self.heads)
  if self._head_norm then q = self:_head_norm(q, "q") end
  local cross = opts.memory ~= nil
  local k, v, kpm
  if cross then
    local mem = opts.memory
    if self.kdim ~= self.vdim then
      -- (the memory is both the keys' and the values' input: one width)
      errors.raise("%s: cross-attention over a memory needs kdim = vdim (the memory is both the keys' and the values' "
        .. "input), but this module has kdim=%d, vdim=%d: call forward(query, key, value) instead", who, self.kdim,
        self.vdim)
    end
    if not Module.is_tensor(mem) or mem.ndim ~= 3 or mem.shape[1] ~= x.shape[1] or mem.shape[3] ~= self.kdim then
      errors.raise("%s: memory must be [B=%d, Lm, kdim=%d], got %s", who, x.shape[1], self.kdim,
        Module.is_tensor(mem) and shape_str(mem) or type(mem))
    end
    local reads = self:_reads_query_position()
    if reads then
      errors.raise("%s: cross-attention with %s reads the query's position, which forward aligns with the memory's "
        .. "end (bottom-right) from the whole target's length: a decoding step's position differs, so cached decoding "
        .. "would not compute what forward does. Decode without a cache (generate's use_cache = false), or give the "
        .. "cross-attention a variant that reads no query position (standard, or a Lua one whose functions read k only)",
        who, reads)
    end
    kv_cache.claim(cache, self, who, "cross")
    local ms = cache.memory_shape
    if ms and (ms[1] ~= mem.shape[1] or ms[2] ~= mem.shape[2]) then
      -- (the keys were made from the first call's memory: another one would be ignored)
      errors.raise("%s: the cache holds the keys of a memory [B=%d, Lm=%d, kdim], but this call's memory is %s: "
        .. "the memory's keys are made at the first call only, so a new memory needs a new cache ({})", who, ms[1],
        ms[2], shape_str(mem))
    end
    if not cache.k then
      cache.memory_shape = { mem.shape[1], mem.shape[2] }
      cache.k = split_heads(self.k_proj(opts.memory), self.kv_heads)
      if self._head_norm then cache.k = self:_head_norm(cache.k, "k") end
      cache.v = split_heads(self.v_proj(opts.memory), self.kv_heads)
      if self.rope then cache.k = self:_rope(cache.k, 0) end
    end
    k, v, kpm = cache.k, cache.v, opts.key_padding_mask
  else
    if self.kdim ~= self.d_model or self.vdim ~= self.d_model then
      errors.raise("%s: self-attention projects the new tokens x into keys and values, so kdim and vdim must equal "
        .. "d_model=%d, but this module has kdim=%d, vdim=%d (for cross-attention give opts.memory)", who, self.d_model,
        self.kdim, self.vdim)
    end
    local new_k, new_v = split_heads(self.k_proj(x), self.kv_heads), split_heads(self.v_proj(x), self.kv_heads)
    if self._head_norm then new_k = self:_head_norm(new_k, "k") end
    if self.rope then new_k = self:_rope(new_k, cache.len or 0) end
    k, v = kv_cache.append(cache, new_k, new_v, who, self)
    kpm = kv_cache.padding(cache, opts.key_padding_mask, x.shape[2], who)
  end
  local Lq, Lk = q.shape[3], k.shape[3]
  if self.rope then q = self:_rope(q, Lk - Lq) end
  local fopts = { key_padding_mask = kpm, attn_mask = opts.attn_mask,
                  allow_mask = opts.allow_mask, block_mask = opts.block_mask, variant_inputs = opts.variant_inputs }
  local causal = not cross and (opts.causal ~= false) or false
  return (self:_attend(who, q, k, v, fopts, causal, x.shape[1], Lq))
end

--- Writes one PNG per head of attention weights (see ember.attention_heatmap).
-- @tparam Tensor weights [B, H, Lq, Lk], as forward returns with need_weights
-- @string path the file (a head number is added when there are several)
-- @tparam[opt] table opts tokens_q, tokens_k, head, batch, title, cell
-- @treturn {string,...} the files written
function MHA:heatmap(weights, path, opts) return ember.attention_heatmap(weights, path, opts) end

--- The module's settings in one line.
function MHA:extra_repr()
  return ("d_model=%d, heads=%d, %s%skdim=%d, vdim=%d, dropout=%g, bias=%s, rope=%s, causal=%s"):format(
    self.d_model, self.heads, self.kv_heads ~= self.heads and ("kv_heads=%d, "):format(self.kv_heads) or "",
    self.inner ~= self.d_model and ("head_dim=%d, "):format(self.head_dim) or "",
    self.kdim, self.vdim, self.dropout, tostring(self.bias), tostring(self.rope), tostring(self.causal))
end

--- torch.nn.MultiheadAttention's state dict loads as it is: in_proj_weight
-- [3 d_model, d_model] and in_proj_bias split by rows into q_proj, k_proj and
-- v_proj (q_proj_weight, k_proj_weight, v_proj_weight, PyTorch's layout when
-- kdim or vdim differ, renamed); out_proj has PyTorch's names. Then the
-- names of earlier ember versions (`legacy_names`) and each child's own map.
-- An in_proj_* of other rows is an error naming it and both shapes.
-- @tparam table sd name -> tensor
-- @string[opt] prefix as Module.upgrade_state_dict's (the error names the whole key)
-- @treturn table
-- @treturn integer how many earlier-ember names were mapped
-- @usage local torch_sd = {in_proj_weight = ember.randn(24, 8), in_proj_bias = ember.zeros(24),
--   ["out_proj.weight"] = ember.randn(8, 8), ["out_proj.bias"] = ember.zeros(8)}
-- local mha = nn.MultiHeadAttention(8, 2)
-- mha:load_state_dict(torch_sd)
-- print(mha.k_proj.weight:equal(torch_sd.in_proj_weight:narrow(1, 9, 8)))   --> true
function MHA:upgrade_state_dict(sd, prefix)
  local rows = { self.q_proj.weight.shape[1], self.k_proj.weight.shape[1], self.v_proj.weight.shape[1] }
  return Module.upgrade_state_dict(self, torch_names.split_in_proj(sd, rows, "MultiHeadAttention.load_state_dict",
    prefix), prefix)
end

--- PyTorch's layout, for `torch_state_dict`: the q, k and v projections as
-- one in_proj_weight and in_proj_bias.
-- @tparam table sd
-- @treturn table
function MHA:to_torch_names(sd) return torch_names.join_in_proj(sd) end

return MHA
