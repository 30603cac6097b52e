-- ember._flex_trace: the tracing half of ember.flex_attention
-- (lua/ember/flex.lua, whose module description says what is captured and
-- what the cache keys on): score_mod and mask_mod described for the cache
-- key, cloned from their bytecode with their tensors replaced by traced
-- captures (upvalues, the functions they call, fields of the tables they
-- read), traced as an anonymous variant (lua/ember/variant.lua), cached.
local core = require "ember.core"
local errors = require "ember._errors"
local trace = require "ember._trace"
local variant = require "ember.variant"

local M = {}

local WHO = "ember.flex_attention"
local NAME = "flex" -- the anonymous variant's name in trace messages, rewritten to WHO
M.WHO = WHO
local function raise(fmt, ...) errors.raise(WHO .. ": " .. fmt, ...) end

-- ---------------------------------------------------------------------
-- Functions: their cache key and their tensor upvalues
-- ---------------------------------------------------------------------

local dumps = setmetatable({}, { __mode = "k" }) -- function -> its bytecode (never changes)
local function bytecode(f)
  local d = dumps[f]
  if not d then
    local ok, r = pcall(string.dump, f)
    if not ok then return nil end
    d = r
    dumps[f] = d
  end
  return d
end

-- What trace messages say of a tensor the trace did not capture.
local UPVALUE_HINT = "score_mod and mask_mod capture the tensors they and the functions they call read as " ..
  "upvalues, globals or fields of tables (self.bias); a tensor reached another way (an argument of a function, " ..
  "a table's method's result) cannot be indexed with a traced value: read it in the mod"

-- What they say of a Lua table indexed with a traced value.
local TABLE_HINT = "put the numbers in a tensor (ember.tensor(t)) that the function reads, and index that"

local CTX_FIELDS = { options = true, heads = true, head_dim = true, v_head_dim = true }

-- a bool tensor reads as a boolean (0/1): `blocks[i][j] & q_idx:ge(kv_idx)`
local function tensor_kind(t)
  if t.dtype == "bool" then return "bool" end
  return t.dtype == "int64" and "int" or "float"
end

-- Whether table t is searched for tensors while tracing: not a library
-- (ember, math, ...: package.loaded's values; the globals are searched).
local function searched(t, name)
  if type(t) ~= "table" or getmetatable(t) == trace.Cap or trace.is_sym(t) then return false end
  if name == "_ENV" then return true end
  for _, m in pairs(package.loaded) do if rawequal(m, t) then return false end end
  return true
end

-- ember's own Lua files: their functions are not searched (except the
-- masks and_masks / or_masks make, in `composed`)
local LIB = debug.getinfo(1, "S").source:match("^(@.*[/\\])_flex_trace%.lua$")
local composed = setmetatable({}, { __mode = "k" })

-- Whether f, an upvalue of a mod, is searched (cloned, its tensors
-- captured) as the mod is: a Lua function of the user's.
local function searched_fn(f)
  if type(f) ~= "function" or not bytecode(f) then return false end
  if composed[f] then return true end
  return not (LIB and debug.getinfo(f, "S").source:sub(1, #LIB) == LIB)
end

local MAX_DEPTH = 8 -- functions called by functions ... the mod calls
local OFFSET = "_flex_q_offset" -- the capture holding Lk - Lq (see instance)

-- Adds f's description to parts, and the tensors it and the functions it
-- calls hold as upvalues to caps: {list = {...}, of = {[tensor] = cap}}.
local function describe(f, parts, caps, depth, seen)
  parts[#parts + 1] = bytecode(f)
  for i = 1, 255 do
    local name, val = debug.getupvalue(f, i)
    if name == nil then break end
    local t = type(val)
    if core.is_tensor(val) then
      local c = caps.of[val]
      if not c then
        if val.ndim > 4 then
          raise("the tensor '%s' read by the function is %d-d; a captured tensor has at most 4 dims", name, val.ndim)
        end
        local learned = val.requires_grad and tensor_kind(val) == "float"
        -- its name in messages ("captured tensor 'bias'"), unique among the captures
        local cname, n = name:gsub("[^%w_]", "_"), 1
        if CTX_FIELDS[cname] then cname = cname .. "_" end
        local base = cname
        while caps.named[cname] do n = n + 1; cname = base .. n end
        c = { tensor = val, name = cname, ndim = val.ndim, kind = tensor_kind(val), learned = learned,
          index = #caps.list + 1 }
        caps.list[#caps.list + 1] = c
        caps.of[val], caps.named[cname] = c, c
      end
      local k = ("T%d%s%d"):format(c.index, c.kind, c.ndim)
      if c.learned then k = k .. "L" .. table.concat(val.shape, "x") .. val.dtype end
      parts[#parts + 1] = k
    elseif t == "number" then
      parts[#parts + 1] = math.type(val) .. ("%.17g"):format(val)
    elseif t == "string" then
      parts[#parts + 1] = ("%q"):format(val)
    elseif t == "boolean" or t == "nil" then
      parts[#parts + 1] = tostring(val)
    elseif seen[val] then -- a function met before (shared, recursive): by its place, not its identity
      parts[#parts + 1] = "F@" .. seen[val]
    elseif depth < MAX_DEPTH and searched_fn(val) then
      seen.n = (seen.n or 0) + 1
      seen[val] = seen.n
      parts[#parts + 1] = "F("
      describe(val, parts, caps, depth + 1, seen)
      parts[#parts + 1] = ")"
    elseif searched(val, name) then
      -- a table the mod reads: what it reads there is checked on a cache hit
      -- (reads in refind), so a table made again each step hits the cache too
      parts[#parts + 1] = "table"
    else
      parts[#parts + 1] = ("%s%p"):format(t, val) -- identity: libraries (ember, math), C functions, ...
    end
  end
end

-- A capture for tensor x met while tracing as a field of a table the mod
-- reads (at: its path {role =, ups = upvalue indices from the mod, keys = {...}}): x's
-- capture already made, or a new one; returns x as the running trace sees
-- it. The read is recorded in caps.reads (checked again on a cache hit).
local function found_tensor(x, key, at, caps, ctx)
  local c = caps.of[x]
  local read = { path = at }
  if not c then
    if x.ndim > 4 then
      trace.fail(("the tensor '%s' read by the function is %d-d; a captured tensor has at most 4 dims"):format(
        tostring(key), x.ndim), 3)
    end
    local base = (type(key) == "string" and key or "t"):gsub("[^%w_]", "_")
    if CTX_FIELDS[base] then base = base .. "_" end
    local name, n = base, 1
    while caps.named[name] do n = n + 1; name = base .. n end
    local learned = x.requires_grad and tensor_kind(x) == "float"
    c = { tensor = x, name = name, ndim = x.ndim, kind = tensor_kind(x), learned = learned }
    c.slot = ctx._capture(name, c.ndim, c.kind, learned)
    caps.list[#caps.list + 1] = c
    caps.of[x], caps.named[name] = c, c
    -- what a later call's tensor must be to use this trace
    read.new = { ndim = c.ndim, kind = c.kind, learned = learned, dtype = x.dtype, shape = table.concat(x.shape, "x") }
  end
  read.name = c.name
  caps.reads[#caps.reads + 1] = read
  if not c.slot then return ctx[c.name] end -- an upvalue of the mod as well
  if c.ndim == 0 then return trace.node("LOAD", {}, { cap = c.slot, kind = c.kind }) end
  return trace.capture(c.slot, c.name, c.ndim, c.kind)
end

-- A stand-in for table t while tracing: its tensor fields are captures
-- (found_tensor), its table fields stand-ins too (3 levels), the rest as t
-- has them, each read recorded (a cache hit checks that it reads the same);
-- writes go to t.
local function stand_in(t, path, caps, ctx, depth)
  return setmetatable({}, {
    __index = function(_, key)
      if trace.is_sym(key) then trace.table_indexed(path.name, 2) end
      local x = t[key]
      local keys = { table.unpack(path.keys) }
      keys[#keys + 1] = key
      local at = { role = path.role, ups = path.ups, keys = keys, name = path.name == "_ENV" and tostring(key)
        or path.name .. "." .. tostring(key) } -- a global by its own name
      if core.is_tensor(x) then return found_tensor(x, key, at, caps, ctx) end
      if depth < 3 and searched(x) then return stand_in(x, at, caps, ctx, depth + 1) end
      caps.reads[#caps.reads + 1] = { path = at, value = x }
      return x
    end,
    __newindex = t,
    __len = function() return #t end,
    __pairs = function() return next, t, nil end,
  })
end

-- f loaded again from its bytecode, its upvalues shared with f's, but the
-- captured tensors replaced by ctx's traced tensors, the functions it calls
-- by their clones and the tables it reads by stand-ins that capture their
-- tensor fields (f itself and the variables it shares with other functions
-- stay untouched). ups: the upvalue indices from the mod to f.
local function clone(f, role, caps, ctx, ups, memo, depth)
  if memo[f] then return memo[f] end
  local g = load(bytecode(f), nil, "b")
  memo[f] = g
  for i = 1, 255 do
    local name, val = debug.getupvalue(f, i)
    if name == nil then break end
    local here = { table.unpack(ups) }
    here[#here + 1] = i
    local c = core.is_tensor(val) and caps.of[val]
    if c then debug.setupvalue(g, i, ctx[c.name])
    elseif type(val) == "function" and (memo[val] or (depth < MAX_DEPTH and searched_fn(val))) then
      debug.setupvalue(g, i, clone(val, role, caps, ctx, here, memo, depth + 1))
    elseif searched(val, name) then
      debug.setupvalue(g, i, stand_in(val, { role = role, ups = here, keys = {}, name = name }, caps, ctx, 1))
    else debug.upvaluejoin(g, i, f, i) end
  end
  return g
end

-- ---------------------------------------------------------------------
-- Tracing, cached
-- ---------------------------------------------------------------------

local traces = {}      -- key -> list of {inst =, reads = what the functions read in tables}
local n_traces = 0
M.stats = { traces = 0, hits = 0 } -- traced, and served from the cache

-- The trace's messages name ember.flex_attention, score_mod and mask_mod.
local function rename(msg)
  msg = tostring(msg)
  -- the kernel's own errors (an index out of range) name the core's call
  msg = msg:gsub("ember%.Attention%.forward: attention 'standard': [%w_]+ attention_forward: ", WHO .. ": ")
  msg = msg:gsub("ember%.Attention%.forward: attention 'standard': ", WHO .. ": ")
  msg = msg:gsub("attention variant '" .. NAME .. "': score", WHO .. ": score_mod")
  msg = msg:gsub("attention variant '" .. NAME .. "': mask", WHO .. ": mask_mod")
  msg = msg:gsub("attention variant '" .. NAME .. "'", WHO)
  msg = msg:gsub("inside score, mask and sink", "inside score_mod and mask_mod")
  return msg
end

-- Re-raises a trace error: at the user's function's line where it names
-- one (the message starts with a position outside the library), else at
-- the user's call.
local function reraise(msg, who)
  msg = rename(msg)
  if who then msg = msg:gsub(WHO, who) end
  if msg:match("^[^\n]-:%d+: ") and errors.strip_library_position(msg) == msg then error(msg, 0) end
  errors.raise("%s", msg)
end

-- The tensor at a path now (nil when it is not there any more).
local function at_path(spec, path)
  local f, x = spec[path.role], nil
  for n, up in ipairs(path.ups) do
    if type(f) ~= "function" then return nil end
    local _, val = debug.getupvalue(f, up)
    if n < #path.ups then f = val else x = val end
  end
  for _, key in ipairs(path.keys) do
    if type(x) ~= "table" then return nil end
    local ok, y = pcall(function() return x[key] end)
    if not ok then return nil end
    x = y
  end
  return x
end

-- Whether a cached trace serves this call: every field it read in a table
-- reads the same now (a number, a function, ...), and its tensors are the
-- same kind of tensor (then added to caps: this call's captures).
local function refind(spec, reads, caps)
  for _, r in ipairs(reads) do
    local x = at_path(spec, r.path)
    if r.name then
      local c = caps.named[r.name]
      if r.new then
        local f = r.new
        if c or not core.is_tensor(x) or caps.of[x] or x.ndim ~= f.ndim or tensor_kind(x) ~= f.kind
            or (x.requires_grad and f.kind == "float") ~= f.learned
            or (f.learned and (x.dtype ~= f.dtype or table.concat(x.shape, "x") ~= f.shape)) then
          return false
        end
        c = { tensor = x, name = r.name, ndim = f.ndim, kind = f.kind, learned = f.learned }
        caps.list[#caps.list + 1] = c
        caps.of[x], caps.named[r.name] = c, c
      elseif not (c and rawequal(c.tensor, x)) then
        return false
      end
    elseif not rawequal(x, r.value) then
      return false
    end
  end
  return true
end

-- The traced instance for score_mod / mask_mod, and the captures: from the
-- cache, or traced now. spec: {score_mod, mask_mod, offset = Lk - Lq,
-- b1 = the mask's batch broadcast, h1 = its heads'}.
local function instance(spec)
  local caps = { list = {}, of = {}, named = {}, reads = {} }
  local off = spec.offset
  -- q_idx = the kernel's q - (Lk - Lq): a per-call 0-d tensor when Lk ~= Lq,
  -- so that decoding (Lk grows each step) or a new pair of lengths traces
  -- nothing new
  if off ~= 0 then
    local c = { tensor = core.tensor(off, { dtype = "int64" }), name = OFFSET, ndim = 0, kind = "int", learned = false }
    caps.list[1], caps.of[c.tensor], caps.named[OFFSET] = c, c, c
  end
  local parts = { off ~= 0 and "shifted" or "aligned", spec.b1 and "b1" or "b", spec.h1 and "h1" or "h" }
  for _, role in ipairs { "score_mod", "mask_mod" } do
    local f = spec[role]
    parts[#parts + 1] = role
    if f then describe(f, parts, caps, 0, {}) end
  end
  if #caps.list > 8 then
    raise("score_mod and mask_mod read %d tensors (at most %s captured tensors)", #caps.list - (off ~= 0 and 1 or 0),
      off ~= 0 and "7 with query and key lengths that differ, whose offset takes one of the kernel's 8" or "8")
  end
  local key = table.concat(parts, "\0")
  -- the traces of these functions, each with what it read in tables (two
  -- modules' self: one per module)
  local entries = traces[key] or {}
  local n_direct = #caps.list
  for _, hit in ipairs(entries) do
    if refind(spec, hit.reads, caps) then
      M.stats.hits = M.stats.hits + 1
      return hit.inst, caps.list, key
    end
    for i = #caps.list, n_direct + 1, -1 do -- what refind added
      local c = caps.list[i]
      caps.of[c.tensor], caps.named[c.name], caps.list[i] = nil, nil, nil
    end
  end
  local tables, inputs = {}, {}
  for _, c in ipairs(caps.list) do
    if c.learned then tables[#tables + 1] = { name = c.name, tensor = c.tensor, learned = true }
    else inputs[c.name] = { ndim = c.ndim, dtype = c.kind } end
  end
  local score_mod, mask_mod = spec.score_mod, spec.mask_mod
  local def = { name = NAME, inputs = inputs, sources = { score = score_mod, mask = mask_mod },
    upvalue_hint = UPVALUE_HINT, table_hint = TABLE_HINT, found_captures = true }
  -- q_idx is the query's row: the kernel's q is its position on the key axis
  local function row(q, ctx) return off ~= 0 and q - ctx[OFFSET] or q end
  if score_mod then
    def.score = function(s, b, h, q, k, ctx)
      return clone(score_mod, "score_mod", caps, ctx, {}, {}, 0)(s, b, h, row(q, ctx), k)
    end
  end
  if mask_mod then
    def.mask = function(b, h, q, k, ctx)
      if spec.b1 then b = trace.const(1) end -- a block mask made with B = nil: b is 1, as PyTorch's 0
      if spec.h1 then h = trace.const(1) end
      local r = clone(mask_mod, "mask_mod", caps, ctx, {}, {}, 0)(b, h, row(q, ctx), k)
      -- PyTorch's mask_mod returns a bool tensor: a number would read as
      -- "visible where nonzero", which is rarely what was meant
      if math.type(r) or (trace.is_sym(r) and r.kind ~= "bool") then
        trace.fail(("mask returned %s, not a boolean: return where q_idx may see kv_idx, as a comparison " ..
          "(q_idx:ge(kv_idx), x:eq(y)), a bool tensor read by it, or their & | ~, as PyTorch's mask_mod"):format(
          math.type(r) and "the number " .. tostring(r) or (r.kind == "int" and "an int value" or "a float value")), 2)
      end
      return r
    end
  end
  local ok, inst = pcall(variant.trace, def, {}, { heads = 1, head_dim = 1, v_head_dim = 1 }, tables)
  if not ok then reraise(inst) end
  if n_traces >= 256 then traces, n_traces = {}, 0 end -- a loop making new functions: bounded
  n_traces = n_traces + 1
  M.stats.traces = M.stats.traces + 1
  if #entries >= 16 then table.remove(entries, 1) end
  entries[#entries + 1] = { inst = inst, reads = caps.reads }
  traces[key] = entries
  return inst, caps.list, key
end

-- Refuses a score_mod or mask_mod whose parameters are not PyTorch's: Lua
-- would call a mask_mod given as score_mod with score as b, b as h, ...,
-- silently. Taken: the full list, varargs, and a score_mod of the score
-- alone (or of nothing). who: the caller's name; what: how to name f.
local SIGNATURE = { score_mod = "(score, b, h, q_idx, kv_idx)", mask_mod = "(b, h, q_idx, kv_idx)" }
local ROLES = { score_mod = { "s", "b", "h", "q", "k" }, mask_mod = { "b", "h", "q", "k" } }
local function check_arity(f, role, who, what)
  local info = debug.getinfo(f, "u")
  local n = info.nparams
  if info.isvararg or n == (role == "score_mod" and 5 or 4) or (role == "score_mod" and n <= 1) then
    -- the right number, names that belong elsewhere (kv_idx before q_idx): Lua passes by position
    local bad = variant.misplaced_param(f, ROLES[role])
    if bad then errors.raise("%s: %s takes %s, as PyTorch's; %s", who, what or role, SIGNATURE[role], bad) end
    return
  end
  local names = {}
  for i = 1, n do names[i] = debug.getlocal(f, i) end
  errors.raise("%s: %s must take %s, as PyTorch's; this one takes %d parameter%s%s%s", who, what or role,
    SIGNATURE[role], n, n == 1 and "" or "s", n > 0 and " (" .. table.concat(names, ", ") .. ")" or "",
    role == "score_mod" and (n == 4 and ": a mask_mod belongs in block_mask = ember.create_block_mask(mask_mod, ...)"
      or " (function(score) of the score alone is taken too)")
      or (n == 5 and ": a score_mod belongs in score_mod" or ""))
end

M.bytecode, M.composed, M.rename, M.reraise, M.instance = bytecode, composed, rename, reraise, instance
M.check_arity = check_arity
M.OFFSET = OFFSET

return M
