--- Attention variants written in Lua, traced into the fused kernel.
--
-- A variant says how it changes standard attention with small functions,
-- as PyTorch's FlexAttention does, and ember's fused CPU kernel runs them
-- inside its forward and backward (so the variant trains, at the fused
-- kernel's memory, O(L)):
--
--    ember.attention_variant{
--      name = "mycap",
--      options = { {name = "cap", type = "float", default = 30, min = 1e-6} },
--      score = function(s, b, h, q, k, ctx)
--        local c = ctx.options.cap
--        return c * ember.tanh(s / c)
--      end,
--    }
--    local mha = nn.MultiHeadAttention(64, 4, {attention = "mycap", cap = 20})
--
-- The functions:
--
-- - `score(s, b, h, q, k, ctx)` -> the new score, from `s = scale * q.k`;
-- - `mask(b, h, q, k, ctx)` -> true (nonzero) where query q may see key k;
-- - `sink(b, h, q, ctx)` -> a logit that joins each softmax's normaliser
--   without a value (attention sinks, as gpt-oss).
--
-- `b`, `h`, `q`, `k` are 1-based, as every index in ember's Lua API; `q` is
-- the query's position on the key axis (bottom-right aligned, as causal),
-- so `q - k` is the relative position and KV-cached decoding sees what the
-- full pass sees. `ctx.options` holds the checked options (plain Lua
-- values: branch on them freely), `ctx.heads`, `ctx.head_dim`, and every
-- captured tensor by name: the variant's `params` (learned tables get
-- gradients; buffers do not) and the per-call `inputs`, passed to the
-- forward as `variant_inputs = {doc = ids}`. Index them as tensors,
-- `ctx.tbl[ember.clamp(q - k, -K, K) + K + 1][h]`, with integers; a 0-d
-- table (a learned scalar) reads as `ctx.name` itself.
--
-- The functions run once per instance on symbolic values. Arithmetic
-- (+ - * / // % ^, unary -), `ember.where`, `ember.logical_and`,
-- `logical_or`, `logical_not`, comparisons as functions or methods
-- (`ember.eq(a, b)` or `a:eq(b)`, also ne, lt, le, gt, ge), `&`, `|`,
-- `~` on booleans (logical and, or, not; binary `~` is xor), `abs`, `min`
-- and `max` (ember.minimum / maximum; ember.min / max, math.min / math.max
-- of any number of values: elementwise), `clamp`, `floor`, `ceil`, `exp`, `log` (math.log(x, base)
-- too), `tanh`, `sqrt`, `sigmoid`, `sign`, `pow`, `floor_divide`,
-- `remainder` and `fmod` (C's remainder, math.fmod) are traced. Lua's `==`, `<`, `<=`, `>` and `>=` between traced values
-- cannot return one, so they raise an error that says what to write
-- instead. With a number on one side Lua never calls ember (`k == 1` is
-- false, `k ~= 1` true), and `not x` is false: a plain boolean is refused
-- wherever a traced value is expected (an operand, a where branch, the
-- function's result). `and`, `or` and `if` on a traced value cannot be
-- seen at all (a traced value is always "true": `a and b` is b): use
-- `ember.where` and the logical helpers.
--
-- The mask also makes a block map: every (query tile, key tile) is empty
-- (skipped), full (mask not evaluated) or partial, found by interval
-- arithmetic over the tile's positions and refined by evaluating the
-- partial ones (core/src/attention_expr.c).
--
-- `ember.flex_attention(q, k, v, {score_mod =, block_mask =})` (PyTorch's
-- FlexAttention API, lua/ember/flex.lua) makes an anonymous variant of
-- this kind from closures: the same indices, 1-based, but its q_idx is the
-- query's row; the tensors they read as upvalues become its captures.
-- @module ember.variant
local ember = require "ember.core" -- the C module, which ember itself is (init.lua)
local errors = require "ember._errors"
local trace = require "ember._trace"
-- a definition's checks (lua/ember/_variant_check.lua): errors name the variant and the field
local check = require "ember._variant_check"
-- symbolic derivatives and the lowering to programs (lua/ember/_variant_lower.lua)
local lower_mod = require "ember._variant_lower"
local lower, grad_programs = lower_mod.lower, lower_mod.grad_programs

local M = {}

local registry = {}   -- name -> definition
M.registry = registry
M.paths = {}          -- name -> the file it came from, or "(defined in Lua)"

-- The sorted keys of a table, joined (for messages).
local function key_list(t)
  local l = {}
  for k in pairs(t) do l[#l + 1] = tostring(k) end
  table.sort(l)
  return table.concat(l, ", ")
end

--- The first parameter of f named for another place of the signature
-- `want` (a list of the roles s, b, h, q, k, ctx), as a sentence, or nil.
-- ember.flex_attention's mods are checked by it too.
-- @tparam function f a Lua function
-- @tparam table want the roles, in order
-- @treturn[opt] string "its parameter 2 is named 'q', but Lua passes b there ('q' is parameter 4)"
function M.misplaced_param(f, want) return check.misplaced_param(f, want) end

--- Defines (or redefines) an attention variant written in Lua; after this
-- it is used by name like a plugin: `nn.MultiHeadAttention(d, h,
-- {attention = name, ...})`, `mha:set_attention(name)`, a script's
-- `--attention name`, and it is listed by `ember.plugins()`.
-- @tparam table def `name`, `description`, `version`, `options` (a list of
-- `{name=, type=, default=, min=, max=, choices=, help=}`, checked by the
-- core as a C plugin's; every option needs a default of its type, inside
-- min/max and among the choices, as the trial trace uses the defaults;
-- `choices` of a string option is `{"a", "b"}` or `"a|b"`), `params` (`function(options, dims)` returning a
-- list of `{name=, tensor=, learned=}`), `inputs` (`{doc = 2}`: per-call
-- tensors and their number of dims, int64 unless `{ndim=, dtype="float"}`: "int" or "float", or a dtype name such as "float32", "int64"),
-- and `score`, `mask`, `sink` (see the module's description); `check`:
-- properties for scripts/check_plugin.lua (`weights_sum_tol`, `tolerance`)
-- @string[opt] path where the definition came from (a file on the plugin path)
-- @treturn table the definition
function M.define(def, path)
  path = path or (M.loading and M.loading.path) -- a file on the plugin path calling this itself
  check.check_def(def, 2)
  M.try_trace(def)
  -- the core takes choices as "a|b"
  local options = {}
  for i, o in ipairs(def.options or {}) do
    local c = {}
    for k, v in pairs(o) do c[k] = v end
    if type(c.choices) == "table" then c.choices = table.concat(c.choices, "|") end
    options[i] = c
  end
  local ok, err = pcall(ember._register_variant, {
    name = def.name, description = def.description or ("attention variant written in Lua"),
    version = def.version or "lua", options = options, path = path or "(defined in Lua)",
  })
  if not ok then errors.raise("%s", tostring(err)) end
  registry[def.name] = def
  M.paths[def.name] = path or "(defined in Lua)"
  if M.loading then M.loading.names[#M.loading.names + 1] = def.name end
  return def
end

--- A trial trace with the default options and small sizes, so that code
-- that cannot be traced is refused where it is defined (and the variant is
-- not registered), not at its first use.
-- @tparam table def the definition
function M.try_trace(def)
  local options = {}
  for _, o in ipairs(def.options or {}) do options[o.name] = o.default end
  local dims = { heads = 2, head_dim = 8, v_head_dim = 8 }
  local tables = {}
  if def.params then
    -- read strictly here: a misspelled option or size is a nil that fails
    -- later with a message that does not name it
    local function strict(t, what)
      local c = {}
      for k, v in pairs(t) do c[k] = v end
      return setmetatable(c, { __index = function(_, k)
        errors.raise("attention variant '%s': %s '%s' (%s)", def.name, what, tostring(k),
          next(c) and (what:match("option") and "its options: " or "dims: ") .. key_list(c) or "the variant declares no options")
      end })
    end
    local ok, list = pcall(def.params, strict(options, "params has no option"), strict(dims, "params' dims have no field"))
    if not ok then
      local msg = tostring(list)
      if msg:find("attention variant '" .. def.name .. "'", 1, true) then error(msg, 0) end -- a typo, at its line
      errors.raise("attention variant '%s': params failed: %s", def.name, msg)
    end
    -- the rules ember.Attention applies to every instance (nn/Attention.lua), here at the definition
    if type(list) ~= "table" then
      errors.raise("attention variant '%s': params must return a list of {name=, tensor=, learned=}, got %s",
        def.name, type(list))
    end
    for key in pairs(list) do
      if math.type(key) ~= "integer" then
        errors.raise("attention variant '%s': params must return a list of {name=, tensor=, learned=}; it has " ..
          "the key '%s' (write {name = %q, tensor = ..., learned = ...})", def.name, tostring(key), tostring(key))
      end
    end
    for i, t in ipairs(list) do
      if type(t) == "table" and type(t.name) == "string" and ember.is_tensor(t.tensor) then
        -- PyTorch's way of saying "train it" is not ember's: say so, rather than make a buffer
        for k in pairs(t) do
          if k ~= "name" and k ~= "tensor" and k ~= "learned" then
            errors.raise("attention variant '%s': params entry %d ('%s') has an unknown field '%s' (fields: name, " ..
              "tensor, learned; learned = true makes a table that trains, learned = false a buffer)", def.name, i,
              t.name, tostring(k))
          end
        end
        if t.learned == nil and t.tensor.requires_grad then
          errors.raise("attention variant '%s': table '%s' requires grad but does not say learned = true, so it " ..
            "would be a buffer that never trains: give learned = true (or learned = false for a buffer)", def.name, t.name)
        end
        if t.learned and (t.tensor.dtype == "int64" or t.tensor.dtype == "bool") then
          errors.raise("attention variant '%s': learned table '%s' must be a float tensor, got %s", def.name, t.name,
            t.tensor.dtype)
        end
        tables[#tables + 1] = { name = t.name, tensor = t.tensor, learned = t.learned }
      else
        errors.raise("attention variant '%s': params entry %d must be {name=, tensor=, learned=}", def.name, i)
      end
    end
  end
  M.trace(def, options, dims, tables)
end

--- The Lua definition of a variant, or nil for a C plugin.
-- @string name
function M.get(name) return registry[name] end

--- A variant's per-call inputs as declared, sorted by name: a list of
-- `{name=, ndim=, kind=}`, kind "int" (int64, the default; bool reads as
-- 0/1) or "float".
-- @tparam table def a definition (`M.get(name)`)
-- @treturn table
function M.inputs_of(def)
  local names, list = {}, {}
  for n in pairs(def.inputs or {}) do names[#names + 1] = n end
  table.sort(names)
  for _, n in ipairs(names) do
    local spec = def.inputs[n]
    local nd = type(spec) == "table" and spec.ndim or spec
    local kind = type(spec) == "table" and check.input_kind(spec.dtype) or "int"
    list[#list + 1] = { name = n, ndim = nd, kind = kind }
  end
  return list
end

-- The capture list of an instance: params (module tables) then inputs.
local function capture_list(def, tables)
  local caps = {}
  for i, t in ipairs(tables) do
    if t.tensor.ndim > 4 then -- EM_EXPR_MAX_DIMS: the indices of one load
      errors.raise("attention variant '%s': table '%s' is %d-d; a captured tensor has at most 4 dims", def.name,
        t.name, t.tensor.ndim)
    end
    local dt = t.tensor.dtype -- bool reads as 0/1, a boolean to & | ~
    caps[#caps + 1] = { name = t.name, ndim = t.tensor.ndim,
      kind = (dt == "bool" or t.bool) and "bool" or dt == "int64" and "int" or "float",
      learned = t.learned, param = i }
  end
  for _, c in ipairs(M.inputs_of(def)) do
    caps[#caps + 1] = { name = c.name, ndim = c.ndim, kind = c.kind, learned = false, input = c.name }
  end
  if #caps > 8 then errors.raise("attention variant '%s': %d captured tensors (at most 8)", def.name, #caps) end
  return caps
end

-- ctx for a trace: options, sizes and the captures as symbolic tensors.
-- Both ctx and ctx.options refuse a name they do not hold, at the user's
-- line and with what they hold: a misspelled option or table name would
-- otherwise be a nil that fails later as "cannot trace '*' on a nil".
local function trace_ctx(def, options, dims, caps)
  local opts = {}
  for k, v in pairs(options) do opts[k] = v end
  setmetatable(opts, { __index = function(_, k)
    trace.fail(("ctx.options has no option '%s' (%s)"):format(tostring(k),
      next(opts) and "its options: " .. key_list(opts) or "the variant declares no options"), 2)
  end })
  local ctx = { options = opts, heads = dims.heads, head_dim = dims.head_dim, v_head_dim = dims.v_head_dim }
  local scalars = {} -- 0-d tables (a learned temperature): each read is a load with no index, in the running trace
  for slot, c in ipairs(caps) do
    if ctx[c.name] ~= nil or scalars[c.name] then
      errors.raise("attention variant '%s': a table or input is named '%s', which ctx already has", def.name, c.name)
    end
    if c.ndim == 0 then scalars[c.name] = { cap = slot - 1, kind = c.kind }
    else ctx[c.name] = trace.capture(slot - 1, c.name, c.ndim, c.kind) end
  end
  return setmetatable(ctx, { __index = function(_, k)
    if scalars[k] then return trace.node("LOAD", {}, scalars[k]) end
    local held = {}
    for n in pairs(ctx) do held[n] = true end
    for n in pairs(scalars) do held[n] = true end
    trace.fail(("ctx has no field '%s' (ctx holds %s: options, the sizes, and the variant's params tables and " ..
      "per-call inputs by name)"):format(tostring(k), key_list(held)), 2)
  end })
end

-- math.* functions that accept traced values while tracing.
local function sym_aware(orig, f)
  return function(...)
    for i = 1, select("#", ...) do
      if trace.is_sym((select(i, ...))) then return f(...) end
    end
    return orig(...)
  end
end

local MATH = { abs = "abs", floor = "floor", ceil = "ceil", exp = "exp", log = "math_log", sqrt = "sqrt",
  min = "min", max = "max", fmod = "fmod" }

-- What a score, mask or sink function can compute (added to the message of
-- an error that met a traced value where a tensor or number was expected).
local TRACED_HINT = "inside score, mask and sink the arguments are traced values, not tensors: traced are " ..
  "+ - * / // % ^ and unary -, & | ~ on booleans, :eq :ne :lt :le :gt :ge, ember.where, ember.logical_and / " ..
  "logical_or / logical_not, abs, minimum, maximum, clamp, floor, ceil, exp, log, tanh, sqrt, sigmoid, sign, " ..
  "pow, floor_divide, remainder, fmod (as ember.f(x) or x:f()), and math.abs, floor, ceil, exp, log, sqrt, " ..
  "min, max, fmod"

-- The other math.* functions refuse a traced value by name (Lua's own
-- message would only say a number was expected).
local function untraceable_math(name)
  return function() trace.fail(("math.%s cannot be traced; %s"):format(name, TRACED_HINT), 2) end
end

-- math.random with no traced argument would run once, at the trace, and
-- its number would be a constant of every call: refused whatever it gets.
local function untraceable_random(name)
  return function()
    trace.fail(("math.%s cannot be traced: it would run once, when the function is traced, and every call " ..
      "would get that same number; draw random values outside the function as a tensor it reads (ember.rand)")
      :format(name), 2)
  end
end
local RANDOM = { random = true, randomseed = true }

-- The user's function named `what` in def (for positions in messages):
-- def.sources[what] where a wrapper traces it (ember.flex_attention's
-- score_mod and mask_mod, lua/ember/flex.lua), else def[what].
local function fn_of(def, what)
  local f = def.sources and def.sources[what] or def[what]
  return type(f) == "function" and f or nil
end

-- The Lua tables f reads as upvalues, their table fields (3 levels, as
-- ember.flex_attention's stand-ins: the globals are _ENV's fields), and
-- those of the Lua functions it calls, less libraries and tables with a
-- metatable: guarded while f is traced, so that indexing one with a traced
-- value is an error where it is written (trace.table_indexed), not a nil.
-- guards: table -> its name.
local function guard_table(t, name, guards, level)
  if guards[t] then return end
  if name ~= "_ENV" then -- the globals (_G, a library too; an environment with a metatable) are walked, not guarded
    if getmetatable(t) ~= nil then return end
    for _, m in pairs(package.loaded) do if rawequal(m, t) then return end end
    guards[t] = name
  end
  if level >= 3 then return end
  local n = 0
  for k, x in next, t do -- a long list of numbers is not walked to its end
    n = n + 1
    if n > 1000 then break end
    if type(x) == "table" then guard_table(x, name == "_ENV" and tostring(k) or name .. "." .. tostring(k), guards,
      level + 1) end
  end
end
local function tables_read(f, guards, seen, depth)
  seen[f] = true
  for i = 1, 255 do
    local name, val = debug.getupvalue(f, i)
    if name == nil then break end
    if type(val) == "table" then guard_table(val, name, guards, 1)
    elseif type(val) == "function" and not seen[val] and depth < 8 and debug.getinfo(val, "S").what == "Lua" then
      tables_read(val, guards, seen, depth + 1)
    end
  end
  return guards
end

-- Calls fn under a trace with math.* made symbol-aware; returns the state
-- and the function's result.
local function traced_call(def, what, fn, ...)
  local saved = {}
  for k, f in pairs(math) do
    if type(f) == "function" and k ~= "type" then
      saved[k] = f
      math[k] = RANDOM[k] and untraceable_random(k)
        or sym_aware(f, MATH[k] and (trace.F[MATH[k]] or trace[MATH[k]]) or untraceable_math(k))
    end
  end
  local user = fn_of(def, what)
  local info = user and debug.getinfo(user, "S")
  local where = info and info.what == "Lua" and ("%s:%d"):format(info.short_src, info.linedefined) or nil
  local guards = user and info.what == "Lua" and tables_read(user, {}, {}, 0) or {}
  for t, name in pairs(guards) do
    setmetatable(t, { __index = function(_, k) if trace.is_sym(k) then trace.table_indexed(name, 2) end end })
  end
  local ok, st, res = pcall(trace.run, { name = def.name, where = where, upvalue_hint = def.upvalue_hint,
    table_hint = def.table_hint }, fn, ...)
  for t in pairs(guards) do setmetatable(t, nil) end
  for k, f in pairs(saved) do math[k] = f end
  if not ok then
    -- the user's own error (a bad option value, a typo) names the variant and
    -- the function it came from; the position at its front stays first
    local msg = tostring(st)
    if not msg:find("attention variant '" .. def.name .. "'", 1, true) then
      local at, rest = msg:match("^([^\n]-:%d+: )(.*)$")
      msg = (at or "") .. ("attention variant '%s': %s failed: %s"):format(def.name, what, rest or msg)
      -- an ember function that is not traced, given a traced value
      if msg:find("ember.Symbol", 1, true) or msg:find("got table", 1, true) then
        msg = msg .. " (" .. TRACED_HINT .. ")"
      end
    elseif msg:find("traced values have no field", 1, true) then
      msg = msg .. " (" .. TRACED_HINT .. ")"
    end
    error(msg, 0)
  end
  if res == nil then
    errors.raise("attention variant '%s': %s returned nothing", def.name, what)
  end
  if type(res) == "boolean" then
    -- at the function's own line: its result is what is wrong
    error(("%sattention variant '%s': %s returned a plain Lua boolean (%s), not a traced value. %s%s"):format(
      where and where .. ": " or "", def.name, what, tostring(res), trace.BOOL_HINT,
      what == "mask" and " (a mask that hides nothing: return 1, or give no mask)" or ""), 0)
  elseif type(res) == "number" then
    res = trace.with(st, trace.const, res)
  elseif not trace.is_sym(res) then
    errors.raise("attention variant '%s': %s returned a %s, not a traced value or a number%s", def.name, what,
      type(res), getmetatable(res) == trace.Cap and " (a captured tensor not fully indexed)"
        or (what == "sink" and type(res) == "table") and " (sink's arguments are b, h, q, ctx: a sink has no k, " ..
          "so a fourth parameter is ctx)" or "")
  end
  return st, res
end

-- The numbers, strings and booleans the functions of def (and the Lua
-- functions they call) read as upvalues: constants of a trace, which a
-- module makes once. A list of {f =, i =, name =, value =, what =}.
local function plain_upvalues(def)
  local list, seen = {}, {}
  local function walk(f, what, depth)
    seen[f] = true
    for i = 1, 255 do
      local name, val = debug.getupvalue(f, i)
      if name == nil then break end
      local t = type(val)
      if t == "number" or t == "string" or t == "boolean" then
        list[#list + 1] = { f = f, i = i, name = name, value = val, what = what }
      elseif t == "function" and not seen[val] and depth < 8 and debug.getinfo(val, "S").what == "Lua" then
        walk(val, what, depth + 1)
      end
    end
  end
  for _, what in ipairs { "score", "mask", "sink" } do
    if type(def[what]) == "function" and not seen[def[what]] then walk(def[what], what, 0) end
  end
  return list
end

--- Why a module's trace of its variant no longer computes what the
-- variant's functions say, or nil: an upvalue they read (a number, a
-- string, a boolean) has changed since the module traced them.
-- @tparam table inst what M.trace returned
-- @treturn[opt] string
function M.stale(inst)
  for _, u in ipairs(inst.upvalues or {}) do
    local _, now = debug.getupvalue(u.f, u.i)
    if not rawequal(now, u.value) then
      return ("attention variant '%s': its %s reads the upvalue '%s', which was %s when this module traced it and " ..
        "is %s now: a module traces its variant once, when it is made, so it would still compute with %s. Make " ..
        "the module again, or give the value as an option (ctx.options) or a table (params)"):format(
        inst.def.name, u.what, u.name, tostring(u.value), tostring(now), tostring(u.value))
    end
  end
end

--- Traces a variant for one instance (an ember.Attention module).
-- @tparam table def the definition
-- @tparam table options the checked option values
-- @tparam table dims heads, head_dim, v_head_dim
-- @tparam table tables the instance's tables {name=, tensor=, learned=}
-- @treturn table programs for the core and the graphs for the composed route
function M.trace(def, options, dims, tables)
  local caps = capture_list(def, tables)
  local ctx = trace_ctx(def, options, dims, caps)
  local r = { caps = caps, def = def }
  local before = not def.found_captures and plain_upvalues(def) -- flex's cache keys on them itself
  if def.found_captures then
    -- tensors met while tracing (ember.flex_attention: a field of a table its
    -- functions read): ctx._capture(name, ndim, kind, learned) adds one more
    -- capture, a table (learned: its gradient is wanted) or a per-call
    -- input, and returns its slot (0-based)
    local n_params = #tables
    rawset(ctx, "_capture", function(name, ndim, kind, learned)
      if #caps >= 8 then trace.fail(("%d captured tensors (at most 8)"):format(#caps + 1), 3) end
      local c = { name = name, ndim = ndim, kind = kind, learned = learned }
      if learned then
        n_params = n_params + 1
        c.param = n_params
      else
        c.input = name
      end
      caps[#caps + 1] = c
      return #caps - 1
    end)
  end
  local function leaves(...) return trace.leaf("B"), trace.leaf("H"), trace.leaf("Q"), trace.leaf("K") end
  if def.score then
    local st, out = traced_call(def, "score", function()
      local b, h, q, k = leaves()
      return def.score(trace.leaf("S"), b, h, q, k, ctx)
    end)
    if out.kind == "bool" then errors.raise("attention variant '%s': score returned a boolean (a mask belongs in mask)", def.name) end
    r.score_graph = out
    r.score, r.score_grad = grad_programs(st, out, caps, true, { variant = def.name, what = "score" })
  end
  if def.mask then
    local st, out = traced_call(def, "mask", function()
      local b, h, q, k = leaves()
      return def.mask(b, h, q, k, ctx)
    end)
    if out.deps & trace.DEP.S ~= 0 then errors.raise("attention variant '%s': mask cannot read the score", def.name) end
    r.mask_graph = out
    r.mask = lower({ out }, nil, { variant = def.name, what = "mask" })
    r.mask_st = st
  end
  if def.sink then
    local st, out = traced_call(def, "sink", function()
      local b, h, q = leaves()
      return def.sink(b, h, q, ctx)
    end)
    if out.deps & (trace.DEP.K | trace.DEP.S) ~= 0 then
      errors.raise("attention variant '%s': sink is one logit per query row: it cannot read k or s", def.name)
    end
    r.sink_graph = out
    r.sink, r.sink_grad = grad_programs(st, out, caps, false, { variant = def.name, what = "sink" })
  end
  if before then -- those the functions wrote while traced (a counter) are not constants of the trace
    r.upvalues = {}
    for _, u in ipairs(plain_upvalues(def)) do
      for _, b in ipairs(before) do
        if b.f == u.f and b.i == u.i and rawequal(b.value, u.value) then r.upvalues[#r.upvalues + 1] = u end
      end
    end
  end
  return r
end

-- The composed route (the graphs evaluated densely by core ops): _variant_dense.lua
M.dense = require("ember._variant_dense").dense

-- ---------------------------------------------------------------------
-- Variants in files on the plugin path
-- ---------------------------------------------------------------------

M.loading = nil -- {path =, names =} while a variant file runs

--- Runs a variant file's chunk; a definition it makes itself
-- (ember.attention_variant{...} rather than returning the table) is
-- recorded as the file's.
-- @tparam function chunk the loaded file
-- @string path the file
-- @treturn boolean ok, then the chunk's result (or error) and the names it defined
function M.run_file(chunk, path)
  local prev = M.loading
  M.loading = { path = path, names = {} }
  local ok, def = pcall(chunk)
  local names = M.loading.names
  M.loading = prev
  return ok, def, names
end

-- Why a variant file was refused, starting with the file: a definition
-- error raised by M.define names the user's line that first listed the
-- plugins (the files load lazily), which is not where the fault is; a
-- position inside the file (a trace error at the function's line) stays.
local function file_reason(path, err)
  local msg = tostring(err)
  local at, rest = msg:match("^([^\n]-):%d+: (.*)$")
  local tail = at and (at:match("^%.%.%.(.*)$") or at)
  if at and path:sub(-#tail) == tail then return msg end
  return path .. ": " .. (rest or msg)
end

--- Loads every `*.lua` file on the plugin path that returns a variant
-- definition (a table with score, mask or sink), once; a file that fails is
-- listed by ember.plugins() with the reason.
-- @treturn number the variants defined
function M.load_path()
  local n = 0
  local dirs = ember.plugin_search_path() or {}
  if type(dirs) == "string" then
    local list = {}
    for d in dirs:gmatch("[^:]+") do list[#list + 1] = d end
    dirs = list
  end
  for _, dir in ipairs(dirs) do
    -- a folder that cannot be read holds no variants, as for the loader's .so files
    for _, f in ipairs(ember._list_dir(dir, ".lua") or {}) do
      local path = dir .. "/" .. f
      local chunk, err = loadfile(path)
      local ok, def = false, err
      if chunk then ok, def = M.run_file(chunk, path) end
      if ok and type(def) == "table" and (def.score or def.mask or def.sink) then
        if M.paths[def.name] == path then -- loaded already, by ember.load_plugin(path)
        elseif not registry[def.name] then
          ok, err = pcall(M.define, def, path)
          if ok then n = n + 1 else ember._reject_plugin(path, file_reason(path, err)) end
        else -- the first of a name wins, as for the loader's .so files
          ember._reject_plugin(path, "shadowed by " .. (M.paths[def.name] or "(defined in Lua)"), def.name)
        end
      elseif not ok then
        ember._reject_plugin(path, tostring(def))
      end
    end
  end
  return n
end

--- Loads one variant file given by its path (ember.load_plugin(path) of a
-- `.lua` file): defines the variant it returns, replacing a Lua variant of
-- that name, as an explicit path comes first. A file that fails is an
-- error naming it (and is listed by ember.plugins() with the reason).
-- @string path the file
-- @treturn table the plugin's row, as ember.plugins() lists it
function M.load_file(path)
  local function fail(reason)
    pcall(ember._reject_plugin, path, reason)
    errors.raise("ember.load_plugin: %s", reason)
  end
  local chunk, err = loadfile(path)
  if not chunk then fail(tostring(err)) end
  local ok, def, names = M.run_file(chunk, path)
  if not ok then fail(file_reason(path, def)) end
  local itself = def == nil and #names > 0 -- it called ember.attention_variant itself
  if itself then def = registry[names[#names]] end
  if type(def) ~= "table" or not (def.score or def.mask or def.sink) then
    fail(("%s: does not return an attention variant definition (a table with score, mask or sink), got %s"):format(
      path, type(def) == "table" and "a table without them" or type(def)))
  end
  if not itself then
    ok, err = pcall(M.define, def, path)
    if not ok then fail(file_reason(path, err)) end
  end
  for _, row in ipairs(ember.plugins()) do
    if row.kind == "attention" and row.name == def.name and row.loaded then return row end
  end
end

-- ---------------------------------------------------------------------
-- Installing: ember.attention_variant, symbol-aware helpers, lazy files
-- ---------------------------------------------------------------------

M.wrapped = {} -- wrapper -> the function it wraps (help() shows the original's entry)

local HELPERS = { "where", "logical_and", "logical_or", "logical_not", "eq", "ne", "lt", "le", "gt", "ge",
  "minimum", "maximum", "clamp", "abs", "exp", "log", "tanh", "floor", "ceil", "sqrt", "sigmoid", "sign",
  "pow", "floor_divide", "remainder", "fmod", "min", "max" }

--- Adds ember.attention_variant and lets ember.where, ember.tanh, ...
-- take traced values; the `*.lua` variants on the plugin path are loaded
-- the first time a variant is looked up or the plugins are listed.
-- @tparam table core the ember module
function M.install(core)
  core.attention_variant = M.define
  for _, name in ipairs(HELPERS) do
    local orig, f = rawget(core, name), trace.F[name]
    -- outside tracing the core's function runs, its errors at the user's line
    local call = orig and errors.wrap(orig)
    if f then
      local w = function(...)
        local tracing = trace.active()
        for i = 1, select("#", ...) do
          local a = select(i, ...)
          -- a boolean while tracing is Lua's not/==/~= on a traced value:
          -- the traced function says so
          if trace.is_sym(a) or (tracing and type(a) == "boolean") then return f(...) end
        end
        if not orig then errors.raise("ember.%s: expected traced values (inside an attention variant)", name) end
        -- torch.where(cond) alone is nonzero(cond, as_tuple=True)
        if name == "where" and select("#", ...) == 1 and core.is_tensor((...)) then
          return core.nonzero((...), { as_tuple = true })
        end
        return call(...)
      end
      M.wrapped[w] = orig
      rawset(core, name, w)
    end
  end
  local loaded = false
  local function lazy(name)
    local orig = rawget(core, name)
    rawset(core, name, function(...)
      if not loaded then
        loaded = true
        M.load_path()
      end
      return orig(...)
    end)
  end
  lazy("plugins")
  lazy("attention_variants")
  lazy("_attention_core")
  -- a .lua path is a variant file; anything else goes to the loader (a
  -- tail call: its errors name the caller's line)
  local load_plugin = rawget(core, "load_plugin")
  local function load(path, ...)
    if type(path) == "string" and path:match("%.lua$") then return M.load_file(path) end
    return load_plugin(path, ...)
  end
  M.wrapped[load] = load_plugin
  rawset(core, "load_plugin", load)
end

return M
