-- ember/_variant_check.lua (internal): the checks of an attention
-- variant's definition (lua/ember/variant.lua's M.define, which documents
-- the fields), made where it is defined so that a bad one is refused at
-- the user's line naming the variant and the field: the known fields, the
-- name, the functions and their parameter names (a score written
-- function(s, q, k) gets b and h there), each option spec (type, a
-- default it accepts, min/max, choices; not one of ember.Attention's or
-- MultiHeadAttention's own option names), the per-call inputs' dims and
-- dtypes.
local ember = require "ember.core" -- the C module, which ember itself is (init.lua)
local errors = require "ember._errors"

local M = {}

local OPT_TYPES = { int = true, float = true, bool = true, string = true }
local DEF_KEYS = { name = true, description = true, version = true, options = true, params = true,
  inputs = true, score = true, mask = true, sink = true, check = true }

-- Names an option cannot take: ember.Attention's own spec keys
-- (core/lua/l_attention.c's core_own, and dtype, device) and
-- MultiHeadAttention's (its OWN list): those modules keep them, so the
-- variant would never see a value.
local RESERVED = {}
for _, n in ipairs { "attention", "heads", "head_dim", "v_head_dim", "dtype", "device", "d_model", "kv_heads",
  "kdim", "vdim", "dropout", "bias", "rope", "rope_base", "causal" } do RESERVED[n] = true end

local OPT_KEYS = { name = true, type = true, default = true, min = true, max = true, choices = true, help = true }

-- The choices of a string option as a list ("a|b" or {"a", "b"}), or nil.
local function choice_list(c)
  if c == nil then return nil end
  if type(c) == "string" then
    local list = {}
    for x in c:gmatch("[^|]+") do list[#list + 1] = x end
    return list
  end
  return c
end

-- One option spec, checked where the variant is defined: the trial trace
-- and every instance not given a value use its default, so the default must
-- be one the option accepts.
local function check_option(def, o, seen)
  local function bad(fmt, ...)
    errors.raise("attention_variant '%s': option '%s' " .. fmt, def.name, o.name, ...)
  end
  if seen[o.name] then bad("is declared twice") end
  if RESERVED[o.name] then
    bad("has the name of one of ember.Attention's or MultiHeadAttention's own options, which they keep " ..
      "(%s): it could never be set; rename it", (function()
        local l = {}
        for n in pairs(RESERVED) do l[#l + 1] = n end
        table.sort(l)
        return table.concat(l, ", ")
      end)())
  end
  seen[o.name] = true
  for k in pairs(o) do
    if not OPT_KEYS[k] then bad("has an unknown field '%s' (fields: name, type, default, min, max, choices, help)", tostring(k)) end
  end
  if o.help ~= nil and type(o.help) ~= "string" then bad("help must be a string, got %s", type(o.help)) end
  local d = o.default
  if d == nil then
    bad("needs a default: the variant is traced once at definition with the default options, and an " ..
      "instance that does not set it uses it (e.g. {name = '%s', type = '%s', default = %s})", o.name, o.type,
      ({ int = "1", float = "1.0", bool = "false", string = '"..."' })[o.type])
  end
  local ok = (o.type == "int" and math.type(d) == "integer") or (o.type == "float" and type(d) == "number")
    or (o.type == "bool" and type(d) == "boolean") or (o.type == "string" and type(d) == "string")
  if o.type == "int" and type(d) == "number" and d == math.floor(d) then ok = true end
  if not ok then bad("is %s but its default is %s (%s)", o.type == "int" and "an int" or "a " .. o.type, tostring(d), math.type(d) or type(d)) end
  for _, b in ipairs { "min", "max" } do
    if o[b] ~= nil then
      if o.type ~= "int" and o.type ~= "float" then bad("is %s: %s is for int and float options", o.type, b) end
      if type(o[b]) ~= "number" then bad("%s must be a number, got %s", b, type(o[b])) end
    end
  end
  if o.min and o.max and o.min > o.max then bad("has min %s > max %s", tostring(o.min), tostring(o.max)) end
  if (o.min and d < o.min) or (o.max and d > o.max) then
    bad("has the default %s outside its range [%s, %s]", tostring(d), tostring(o.min or "-inf"), tostring(o.max or "inf"))
  end
  if o.choices ~= nil then
    if o.type ~= "string" then bad("is %s: choices are for string options", o.type) end
    local list = choice_list(o.choices)
    if type(list) ~= "table" or #list == 0 then bad("choices must be a list of strings {\"a\", \"b\"} or \"a|b\"") end
    local found = false
    for _, c in ipairs(list) do
      if type(c) ~= "string" or c == "" or c:find("|", 1, true) then
        bad("choices must be non-empty strings without '|', got %s", tostring(c))
      end
      if c == d then found = true end
    end
    if not found then bad("has the default \"%s\", not one of its choices %s", d, table.concat(list, "|")) end
  end
end

-- A per-call input's declared dtype -> its kind, "int" or "float" (nil:
-- not a dtype): "int", "float", or any name ember.dtype_info knows.
local function input_kind(dtype)
  if dtype == nil or dtype == "int" then return "int" end
  if dtype == "bool" then return "bool" end -- reads as 0/1, a boolean to & | ~
  if type(dtype) ~= "string" then return nil end
  local info = ember.dtype_info(dtype)
  if not info then return nil end
  return info.floating and "float" or "int"
end

-- Parameter names that say which argument a function means where: a score
-- written function(s, q, k) gets b and h as q and k (Lua passes what it is
-- given, by position, and says nothing). A name is judged only when it is
-- one of these.
local ROLE_OF_NAME = { s = "s", score = "s", b = "b", batch = "b", h = "h", head = "h", q = "q", q_idx = "q",
  qi = "q", k = "k", kv_idx = "k", ki = "k", kv = "k", ctx = "ctx" }
local SIGNATURE = { score = { "s", "b", "h", "q", "k", "ctx" }, mask = { "b", "h", "q", "k", "ctx" } }

-- The first parameter of f named for another place of the signature
-- `want` (a list of the roles s, b, h, q, k, ctx), as a sentence, or nil
-- (variant.misplaced_param, documented in variant.lua; flex.lua's mods too).
local function misplaced_param(f, want)
  for i = 1, debug.getinfo(f, "u").nparams do
    local name = debug.getlocal(f, i)
    local role = ROLE_OF_NAME[name]
    if role and role ~= want[i] then
      local at = "none"
      for j, r in ipairs(want) do if r == role then at = tostring(j) end end
      return ("its parameter %d is named '%s', but Lua passes %s there ('%s' is parameter %s)"):format(i, name,
        want[i] or "nothing", role, at)
    end
  end
end

local function check_params(def, what)
  local want = SIGNATURE[what]
  local bad = misplaced_param(def[what], want)
  if bad then
    errors.raise("attention_variant '%s': %s's parameters are (%s); %s: give them all in order, function(%s)",
      def.name, what, table.concat(want, ", "), bad, table.concat(want, ", "))
  end
end

local function check_def(def, level)
  level = level + 1
  if type(def) ~= "table" then
    errors.raise("attention_variant: expected a table {name=, score=, mask=, ...}, got %s", type(def))
  end
  for k in pairs(def) do
    if not DEF_KEYS[k] then
      errors.raise("attention_variant: unknown field '%s' (fields: name, description, version, options, params, inputs, score, mask, sink, check)", tostring(k))
    end
  end
  if type(def.name) ~= "string" or not def.name:match("^[%w_%-]+$") then
    errors.raise("attention_variant: name must be a string of letters, digits, '_' or '-', got %s", tostring(def.name))
  end
  for _, f in ipairs { "score", "mask", "sink", "params" } do
    if def[f] ~= nil and type(def[f]) ~= "function" then
      errors.raise("attention_variant '%s': %s must be a function, got %s", def.name, f, type(def[f]))
    end
  end
  for _, f in ipairs { "score", "mask" } do
    if def[f] then check_params(def, f) end
  end
  if not (def.score or def.mask or def.sink) then
    errors.raise("attention_variant '%s': give at least one of score, mask or sink", def.name)
  end
  for _, f in ipairs { "description", "version" } do
    if def[f] ~= nil and type(def[f]) ~= "string" then
      errors.raise("attention_variant '%s': %s must be a string, got %s", def.name, f, type(def[f]))
    end
  end
  if def.check ~= nil and type(def.check) ~= "table" then
    errors.raise("attention_variant '%s': check must be a table of properties for scripts/check_plugin.lua, got %s",
      def.name, type(def.check))
  end
  local opts = def.options or {}
  if type(opts) ~= "table" then errors.raise("attention_variant '%s': options must be a list of specs", def.name) end
  for key in pairs(opts) do -- a map {cap = {...}} would be read as no options at all
    if math.type(key) ~= "integer" then
      errors.raise("attention_variant '%s': options must be a list of specs; it has the key '%s' (write {name = %q, " ..
        "type = ..., default = ...})", def.name, tostring(key), tostring(key))
    end
  end
  local seen = {}
  for i, o in ipairs(opts) do
    if type(o) ~= "table" or type(o.name) ~= "string" or not OPT_TYPES[o.type] then
      errors.raise("attention_variant '%s': option %d must be {name=, type='int'|'float'|'bool'|'string', default=, min=, max=, choices=, help=}",
        def.name, i)
    end
    check_option(def, o, seen)
  end
  local inputs = def.inputs or {}
  if type(inputs) ~= "table" then errors.raise("attention_variant '%s': inputs must be a table {name = ndim}", def.name) end
  for n, spec in pairs(inputs) do
    local nd = type(spec) == "table" and spec.ndim or spec
    if type(n) ~= "string" or math.type(nd) ~= "integer" or nd < 1 or nd > 4 then
      errors.raise("attention_variant '%s': inputs must map names to a number of dims (1..4) or {ndim=, dtype=}, got %s = %s",
        def.name, tostring(n), tostring(spec))
    end
    if type(spec) == "table" then
      for k in pairs(spec) do
        if k ~= "ndim" and k ~= "dtype" then
          errors.raise("attention_variant '%s': input '%s' has an unknown field '%s' (fields: ndim, dtype)", def.name, n, tostring(k))
        end
      end
      if spec.dtype ~= nil and input_kind(spec.dtype) == nil then
        errors.raise("attention_variant '%s': input '%s' has dtype '%s'; give \"int\" (int64, the default; bool " ..
          "reads as 0/1) or \"float\" (or a dtype name: float32, float64, bfloat16, int64, bool)", def.name, n,
          tostring(spec.dtype))
      end
    end
  end
end

M.check_def, M.input_kind, M.misplaced_param = check_def, input_kind, misplaced_param

return M
