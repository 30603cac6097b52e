-- ember._trace: symbolic values for tracing attention variants written in
-- Lua (ember.attention_variant, lua/ember/variant.lua).
--
-- A variant's score and mask functions run once on these values; every
-- operation builds a node of an expression graph instead of computing. The
-- graph is then differentiated (for the backward), lowered to the program
-- format of core/include/ember_expr.h, and evaluated densely by core ops
-- for the composed route. Nodes are hash-consed (the same operation on the
-- same operands is one node), constants are folded, and each node knows
-- its kind ("int", "float" or "bool") and what it depends on (b, h, q, k,
-- s), which the kernels use to compute key-independent values once a row.
--
-- What cannot be traced raises an error at the user's line: comparisons
-- of two traced values with == < <= > >= (Lua turns their result into a
-- boolean, so use :eq, :lt, ... or ember.eq, ember.lt), indexing a captured
-- tensor with the wrong number of indices or with a non-integer, arithmetic
-- on a value that is not a number or a symbol, and a plain Lua boolean
-- where a traced value is expected (an operand, a where branch, a function's
-- result): Lua's `not x` (always false), `x == 1` / `x ~= 1` with a number
-- (Lua does not call __eq then: always false / true) give one. Lua's `and`,
-- `or` and `if` cannot be overloaded, and a traced value is always "true"
-- to them: `a and b` is b, unseen. Use ember.where, ember.logical_and /
-- logical_or / logical_not.
local M = {}

local Sym = {}
Sym.__name = "ember.Symbol"
local Cap = {} -- a captured tensor, partly indexed
Cap.__name = "ember.CapturedTensor"

M.Sym, M.Cap = Sym, Cap

local DEP = { B = 1, H = 2, Q = 4, K = 8, S = 16 }
M.DEP = DEP

-- The tracing state: the variant's name (for messages) and the node table.
local state = nil

-- This file's folder: frames of ember's own Lua files are not the user's.
local LIB = debug.getinfo(1, "S").source:match("^(@.*[/\\])_trace%.lua$")

-- Raises msg at `level` as error() counts (1: fail's caller). Where that
-- frame is gone (the user's function ended in a tail call, `return
-- ember.logical_or(...)`) or is not the user's, the message points at the
-- traced function's definition instead.
local function fail(msg, level)
  local name = state and state.variant or "?"
  msg = ("attention variant '%s': %s"):format(name, msg)
  level = (level or 1) + 1
  local info = debug.getinfo(level, "Sl")
  local users = info and info.what ~= "C" and info.currentline > 0 and
    not (LIB and info.source:sub(1, #LIB) == LIB)
  if not users and state and state.where then error(state.where .. ": " .. msg, 0) end
  error(msg, level)
end
M.fail = fail

local function is_sym(x) return getmetatable(x) == Sym end
M.is_sym = is_sym

-- Op names and arities, as EM_XOPS in ember_expr.h (the order matters: it
-- is the op's number there).
M.OPS = { "CONST", "S", "B", "H", "Q", "K", "ADD", "SUB", "MUL", "DIV", "IDIV", "MOD", "POW", "MIN",
  "MAX", "LT", "LE", "EQ", "NE", "AND", "OR", "NEG", "ABS", "FLOOR", "CEIL", "EXP", "LOG", "TANH",
  "SQRT", "SIGMOID", "NOT", "SIGN", "WHERE", "LOAD" }
M.OPNUM = {}
for i, n in ipairs(M.OPS) do M.OPNUM[n] = i - 1 end
-- clamp's bounds are MAX and MIN in the programs; in the graph they are ops
-- of their own, differentiated as torch.clamp (at the bound the value takes
-- the whole gradient) where minimum / maximum split a tie in halves
M.OPNUM.CLAMP_LO, M.OPNUM.CLAMP_HI = M.OPNUM.MAX, M.OPNUM.MIN

local function idiv(a, b) return math.floor(a / b) end
local function fmod(a, b) return a - math.floor(a / b) * b end
local function b2n(x) return x and 1 or 0 end
-- e^x - 1 without the cancellation near 0 (Kahan's: the rounding of e^x
-- cancels in (u - 1) / log(u)); tanh(a) = expm1(2a) / (expm1(2a) + 2), as
-- accurate as C's tanh, which the kernels run
local function expm1(x)
  local u = math.exp(x)
  if u == 1.0 then return x end
  local um = u - 1.0
  if um == -1.0 then return -1.0 end
  return um * x / math.log(u)
end
local function tanh(a)
  if a > 20 then return 1.0 elseif a < -20 then return -1.0 end
  local e = expm1(2 * a)
  return e / (e + 2)
end
-- The element rules for constant folding (the same as EM_XRULE_* in C).
local FOLD = {
  ADD = function(a, b) return a + b end, SUB = function(a, b) return a - b end,
  MUL = function(a, b) return a * b end, DIV = function(a, b) return a / b end,
  IDIV = idiv, MOD = fmod, POW = function(a, b) return a ^ b end,
  MIN = function(a, b) return a < b and a or b end, MAX = function(a, b) return a > b and a or b end,
  LT = function(a, b) return b2n(a < b) end, LE = function(a, b) return b2n(a <= b) end,
  EQ = function(a, b) return b2n(a == b) end, NE = function(a, b) return b2n(a ~= b) end,
  AND = function(a, b) return b2n(a ~= 0 and b ~= 0) end, OR = function(a, b) return b2n(a ~= 0 or b ~= 0) end,
  NEG = function(a) return -a end, ABS = math.abs, FLOOR = function(a) return math.floor(a) + 0.0 end,
  CEIL = function(a) return math.ceil(a) + 0.0 end, EXP = math.exp, LOG = math.log,
  TANH = tanh,
  SQRT = math.sqrt, SIGMOID = function(a) return 1 / (1 + math.exp(-a)) end,
  NOT = function(a) return b2n(a == 0) end, SIGN = function(a) return a > 0 and 1 or a < 0 and -1 or 0 end,
  WHERE = function(c, a, b) if c ~= 0 then return a else return b end end,
}
FOLD.CLAMP_LO, FOLD.CLAMP_HI = FOLD.MAX, FOLD.MIN
M.FOLD = FOLD

local INT_OPS = { ADD = true, SUB = true, MUL = true, MIN = true, MAX = true, MOD = true, NEG = true, ABS = true,
  CLAMP_LO = true, CLAMP_HI = true }
local BOOL_OPS = { LT = true, LE = true, EQ = true, NE = true, AND = true, OR = true, NOT = true }

local function kind_of(op, args, extra)
  if BOOL_OPS[op] then return "bool" end
  if op == "IDIV" or op == "FLOOR" or op == "CEIL" or op == "SIGN" then return "int" end
  if op == "LOAD" then return extra.kind end
  local function num(k) return k == "bool" and "int" or k end
  if op == "WHERE" then
    -- a choice between booleans is a boolean (a mask_mod's where(c, m1, m2),
    -- as torch.where of bool tensors); a constant 0 or 1 beside one counts
    local function boolish(a) return a.kind == "bool" or (a.op == "CONST" and (a.value == 0 or a.value == 1)) end
    if (args[2].kind == "bool" or args[3].kind == "bool") and boolish(args[2]) and boolish(args[3]) then return "bool" end
    return (num(args[2].kind) == "int" and num(args[3].kind) == "int") and "int" or "float"
  end
  if INT_OPS[op] then
    for _, a in ipairs(args) do if num(a.kind) ~= "int" then return "float" end end
    return "int"
  end
  return "float"
end

local need_trace
local function const(v)
  need_trace()
  if type(v) == "boolean" then v = v and 1 or 0 end
  local key = "C" .. string.format("%.17g", v)
  local n = state.nodes[key]
  if not n then
    local kind = (v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53) and "int" or "float"
    n = setmetatable({ op = "CONST", args = {}, value = v + 0.0, kind = kind, deps = 0, id = state.n + 1, st = state }, Sym)
    state.n = state.n + 1
    state.nodes[key] = n
  end
  return n
end
M.const = const

-- Why a plain Lua boolean met while tracing is refused: it is what Lua's
-- own operators give on traced values, and it is wrong. `not x` is false
-- for every x (a traced value is "true"); `x == 1` and `x ~= 1` never call
-- __eq when one side is a number, so they are false and true whatever x
-- would be; `a and b` and `a or b` pick an operand by truth (b and a).
M.BOOL_HINT = "Lua's not, and, or, == and ~= cannot be traced (`not x` is always false, `x == 1` always " ..
  "false and `x ~= 1` always true, `a and b` is b and `a or b` is a): write ember.logical_not(x), " ..
  "ember.logical_and(a, b), ember.logical_or(a, b), x:eq(1), x:ne(1), ember.where(c, a, b); " ..
  "a constant is 1 or 0, and a bool option goes through `if`"

-- The running trace's own hint (ember.flex_attention captures upvalues: it
-- gives one of its own to trace.run), else UPVALUE_HINT (set below).
local function upvalue_hint() return state and state.upvalue_hint or M.UPVALUE_HINT end

local function to_sym(x, what, level)
  if is_sym(x) then return x end
  local t = type(x)
  if t == "number" then return const(x) end
  if t == "boolean" then
    fail(("%s got a plain Lua boolean (%s) where a traced value is expected. %s"):format(
      what, tostring(x), M.BOOL_HINT), level + 1)
  end
  if getmetatable(x) == Cap then
    fail(("captured tensor '%s' is %d-d but was used with %d index(es); index it fully (t[i][j])"):format(
      x.name, x.ndim, #x.idx), level + 1)
  end
  if t == "userdata" then -- a tensor made or read inside the function
    fail(("cannot trace %s on a tensor: only numbers and traced values (%s)"):format(what, upvalue_hint()), level + 1)
  end
  fail(("cannot trace %s on a %s (only numbers and traced values)%s"):format(what, t,
    t == "nil" and "; a nil is an undefined name, or a Lua table indexed with a traced value (which gives nil: " ..
    "give the numbers as a tensor in params, learned = false for a constant, and index ctx.<name>[h])" or ""), level + 1)
end

-- A Lua table indexed with a traced value (`slopes[h]`): Lua looks the key
-- up as it is and finds nothing, so the read is nil, and `t[k] or 0` would
-- be 0 at every position, silently. Raised where such a read is seen (a
-- table the function reads, lua/ember/variant.lua; ember.flex_attention's
-- stand-ins, lua/ember/_flex_trace.lua), at level as fail counts.
M.TABLE_HINT = "give the numbers as a tensor in params (learned = false for a constant) and index ctx.<name>[h]"
function M.table_indexed(name, level)
  fail(("the Lua table '%s' was indexed with a traced value: Lua looks the key up as it is, so the read would be " ..
    "nil (and `t[k] or x` silently x at every position); %s"):format(name, state and state.table_hint or M.TABLE_HINT),
    level + 1)
end

-- Tensors from outside the function (upvalues) meet traced indices only
-- through their own indexing, which asks the index for its length or
-- fields: the message says what to do instead.
M.UPVALUE_HINT = "a tensor from outside the function cannot be indexed with a traced value: give it in params " ..
  "(learned = false for a constant, true to train it) or as a per-call input (inputs), and index ctx.<name>[h][q]"

-- A traced value kept past its trace (in an upvalue or a table) and used
-- after the function returned: no trace is running to record the operation.
function need_trace(args)
  local foreign = false
  for _, a in ipairs(args or {}) do if a.st ~= state then foreign = true end end
  if state and not foreign then return end
  local level = 3
  while true do -- the first frame outside ember's Lua files is the user's
    local info = debug.getinfo(level, "S")
    if not info then level = 2 break end
    if info.what ~= "C" and not (LIB and info.source:sub(1, #LIB) == LIB) then break end
    level = level + 1
  end
  error((state and ("attention variant '%s': "):format(state.variant) or "") ..
    "a traced value (an argument of a score/mask/sink function, score_mod or mask_mod, or a value " ..
    "computed from one) was used after its function returned: traced values exist only while the " ..
    "function is being traced; do not keep them in upvalues or tables", level)
end

-- The node for op(args), made once; all-constant operands are folded.
local function node(op, args, extra)
  need_trace(args)
  local allconst = op ~= "LOAD"
  for _, a in ipairs(args) do if a.op ~= "CONST" then allconst = false end end
  if allconst and FOLD[op] then
    local vals = {}
    for i, a in ipairs(args) do vals[i] = a.value end
    return const(FOLD[op](table.unpack(vals)))
  end
  local ids = {}
  for i, a in ipairs(args) do ids[i] = a.id end
  local key = op .. "(" .. table.concat(ids, ",") .. ")" .. (extra and ("#" .. extra.cap) or "")
  local n = state.nodes[key]
  if n then return n end
  local deps = 0
  for _, a in ipairs(args) do deps = deps | a.deps end
  n = setmetatable({ op = op, args = args, kind = kind_of(op, args, extra), deps = deps, id = state.n + 1, st = state }, Sym)
  if extra then n.cap = extra.cap end
  state.n = state.n + 1
  state.nodes[key] = n
  return n
end
M.node = node

-- Leaves: the symbolic inputs of a trace.
function M.leaf(op)
  local key = "L" .. op
  local n = state.nodes[key]
  if not n then
    n = setmetatable({ op = op, args = {}, kind = op == "S" and "float" or "int", deps = DEP[op], id = state.n + 1,
      st = state }, Sym)
    state.n = state.n + 1
    state.nodes[key] = n
  end
  return n
end

-- Simplifications that keep derivative graphs small (x + 0, x * 1, ...).
local function is_const(x, v) return x.op == "CONST" and x.value == v end

function M.add(a, b)
  if is_const(a, 0) then return b end
  if is_const(b, 0) then return a end
  return node("ADD", { a, b })
end
function M.sub(a, b)
  if is_const(b, 0) then return a end
  if is_const(a, 0) then return node("NEG", { b }) end
  return node("SUB", { a, b })
end
function M.mul(a, b)
  if is_const(a, 1) then return b end
  if is_const(b, 1) then return a end
  if is_const(a, 0) or is_const(b, 0) then return const(0) end -- only derivative graphs meet 0 * x
  if a.op == "CONST" and b.op ~= "CONST" then a, b = b, a end -- constants on the right
  -- (x * c1) * c2 = x * (c1 * c2): a derivative's chain of constants
  -- (softcap's c * tanh'(s / c) / c) becomes one product, or none
  if b.op == "CONST" and a.op == "MUL" and a.args[2].op == "CONST" then
    return M.mul(a.args[1], const(a.args[2].value * b.value))
  end
  return node("MUL", { a, b })
end
function M.div(a, b)
  if is_const(b, 1) then return a end
  -- by a constant: a product (a division is several times its cost in the
  -- kernel's row loops; the two differ by an ulp at most)
  if b.op == "CONST" and b.value ~= 0 and a.op ~= "CONST" then return M.mul(a, const(1 / b.value)) end
  return node("DIV", { a, b })
end

-- Ops as users write them (for messages).
local SPELLED = { ADD = "'+'", SUB = "'-'", MUL = "'*'", DIV = "'/'", IDIV = "'//'", MOD = "'%'", POW = "'^'",
  NEG = "unary '-'", MIN = "minimum", MAX = "maximum", EQ = "eq", NE = "ne", LT = "lt", LE = "le",
  AND = "logical_and", OR = "logical_or", NOT = "logical_not" }

local function binary(op, impl)
  local what = SPELLED[op] or op:lower()
  return function(a, b)
    a, b = to_sym(a, what, 2), to_sym(b, what, 2)
    return impl and impl(a, b) or node(op, { a, b })
  end
end
local function unary(op)
  local what = SPELLED[op] or op:lower()
  return function(a) return node(op, { to_sym(a, what, 2) }) end
end

Sym.__add = binary("ADD", M.add)
Sym.__sub = binary("SUB", M.sub)
Sym.__mul = binary("MUL", M.mul)
Sym.__div = binary("DIV", M.div)
Sym.__idiv = binary("IDIV")
Sym.__mod = binary("MOD")
Sym.__pow = binary("POW")
Sym.__unm = unary("NEG")

-- How the user wrote v: a number, or the name of a local of the function at
-- `level` (as debug.getlocal counts) that holds it; nil when neither.
local function spell(v, level)
  if not is_sym(v) then return tostring(v) end
  for i = 1, 250 do
    local n, val = debug.getlocal(level + 1, i)
    if not n then break end
    if rawequal(val, v) and not n:find("^%(") then return n end
  end
  return nil
end

-- a < b, a <= b, a == b on traced values: Lua calls __lt(a, b) for a < b
-- and for b > a (__le likewise), so a number on the left is `s > 0`.
local function no_compare(op, flipped, fn, flipfn)
  return function(a, b)
    local A, B = spell(a, 2), spell(b, 2)
    if not A then A = B == "x" and "y" or "x" end -- an expression, not a local
    if not B then B = A == "x" and "y" or "x" end
    local say
    if op == "==" then
      say = ("'==' cannot be traced: Lua turns a comparison into a boolean. Write %s:eq(%s) (or ember.eq)"):format(A, B)
    elseif not is_sym(a) then -- a number on the left: most likely `b > a`
      say = ("'%s' cannot be traced: Lua turns a comparison into a boolean. Write %s:%s(%s) for %s %s %s (or ember.%s)")
        :format(flipped, B, flipfn, A, B, flipped, A, flipfn)
    elseif not is_sym(b) then -- a number on the right: `a < b`
      say = ("'%s' cannot be traced: Lua turns a comparison into a boolean. Write %s:%s(%s) for %s %s %s (or ember.%s)")
        :format(op, A, fn, B, A, op, B, fn)
    else
      say = ("'%s' (or '%s') cannot be traced: Lua turns a comparison into a boolean. Write %s:%s(%s) for %s %s %s, " ..
        "or %s:%s(%s) for %s %s %s"):format(op, flipped, A, fn, B, A, op, B, B, flipfn, A, B, flipped, A)
    end
    fail(say .. "; branching (if) on a traced value cannot be followed: use ember.where(c, x, y) instead of " ..
      "if/and/or", 2)
  end
end
Sym.__lt = no_compare("<", ">", "lt", "gt")
Sym.__le = no_compare("<=", ">=", "le", "ge")
Sym.__eq = no_compare("==")
Sym.__concat = function() fail("a traced value cannot be concatenated to a string", 2) end
Sym.__call = function() fail("a traced value cannot be called", 2) end
Sym.__len = function() fail("'#' of a traced value cannot be traced (" .. upvalue_hint() .. ")", 2) end
Sym.__tostring = function(x) return ("ember.Symbol(%s, %s)"):format(x.op, x.kind) end
Sym.__close = nil

-- Functions, usable as methods (x:tanh()) and as ember.tanh(x).
local F = {}
M.F = F
F.abs, F.floor, F.ceil, F.exp, F.log, F.tanh, F.sqrt, F.sigmoid, F.sign =
  unary("ABS"), unary("FLOOR"), unary("CEIL"), unary("EXP"), unary("LOG"), unary("TANH"), unary("SQRT"),
  unary("SIGMOID"), unary("SIGN")
F.logical_not = unary("NOT")
F.minimum, F.maximum = binary("MIN"), binary("MAX")
F.eq, F.ne, F.lt, F.le = binary("EQ"), binary("NE"), binary("LT"), binary("LE")
F.gt = function(a, b) return F.lt(b, a) end
F.ge = function(a, b) return F.le(b, a) end
F.logical_and, F.logical_or = binary("AND"), binary("OR")
F.floor_divide, F.remainder, F.pow = binary("IDIV"), binary("MOD"), binary("POW")
function F.where(c, a, b)
  c, a, b = to_sym(c, "where", 2), to_sym(a, "where", 2), to_sym(b, "where", 2)
  -- a constant condition picks its branch (derivative rules make such
  -- wheres: the programs stay as short as without them)
  if c.op == "CONST" then return c.value ~= 0 and a or b end
  return node("WHERE", { c, a, b })
end
function F.clamp(x, lo, hi)
  local r = to_sym(x, "clamp", 2)
  if lo ~= nil then r = node("CLAMP_LO", { r, to_sym(lo, "clamp", 2) }) end
  if hi ~= nil then r = node("CLAMP_HI", { r, to_sym(hi, "clamp", 2) }) end
  return r
end
-- min / max (math.min, math.max, x:min(y)) take any number of values, as Lua's
local function fold(op, what)
  return function(a, ...)
    local r = to_sym(a, what, 2)
    for i = 1, select("#", ...) do r = node(op, { r, to_sym((select(i, ...)), what, 2) }) end
    return r
  end
end
F.min, F.max = fold("MIN", "min"), fold("MAX", "max")
-- math.log(x [, base])
function M.math_log(x, base)
  local l = node("LOG", { to_sym(x, "log", 2) })
  if base == nil then return l end
  return M.div(l, node("LOG", { to_sym(base, "log", 2) }))
end
-- fmod (math.fmod, ember.fmod): C's remainder a - trunc(a / b) b, with the
-- sign of a; |a| % |b| is that remainder's size (% is floored, and exact)
function F.fmod(a, b)
  a, b = to_sym(a, "fmod", 2), to_sym(b, "fmod", 2)
  return M.mul(node("SIGN", { a }), node("MOD", { node("ABS", { a }), node("ABS", { b }) }))
end

-- & | ~ (and binary ~, xor) on traced booleans are logical_and / or / not
-- / ne, as on ember's bool tensors; on numbers they would be bitwise, which
-- a variant cannot trace.
local function logical(op, spelled, unary_op)
  return function(a, b)
    local args = unary_op and { to_sym(a, spelled, 2) } or { to_sym(a, spelled, 2), to_sym(b, spelled, 2) }
    for _, x in ipairs(args) do
      if x.kind ~= "bool" then
        fail(("'%s' on traced values is the logical %s of booleans (as on ember's bool tensors), got an %s " ..
          "value; bitwise operations cannot be traced (use // and %% for integer arithmetic)"):format(
          spelled, ({ AND = "and", OR = "or", NOT = "not", NE = "xor" })[op], x.kind), 2)
      end
    end
    return node(op, args)
  end
end
Sym.__band = logical("AND", "&")
Sym.__bor = logical("OR", "|")
Sym.__bxor = logical("NE", "~")
Sym.__bnot = logical("NOT", "~", true)

Sym.__index = function(x, key)
  local f = F[key]
  if f then return f end
  if is_sym(key) or type(key) == "number" then
    local name = rawget(x, "cap_name")
    if name then -- a load, indexed again
      fail(("captured tensor '%s' is %d-d: too many indices (more than %d)"):format(name, x.cap_ndim, x.cap_ndim), 2)
    end
    fail("a traced value was indexed like a tensor: too many indices for a captured tensor, " ..
      "or indexing a value that is not a captured tensor (" .. upvalue_hint() .. ")", 2)
  end
  fail(("traced values have no field '%s'"):format(tostring(key)), 2)
end

-- Captured tensors: ctx.name[i][j] ... becomes a LOAD once fully indexed.
function M.capture(slot, name, ndim, kind)
  return setmetatable({ slot = slot, name = name, ndim = ndim, kind = kind, idx = {} }, Cap)
end

-- Inside a traced function a captured tensor is only indexed: its sizes
-- are not part of the trace (a cached trace serves tensors of other sizes),
-- and a method's result would be a tensor the kernel does not read.
local function cap_not_traced(c, what, level)
  fail(("captured tensor '%s': %s cannot be traced; inside the function a captured tensor is only indexed with " ..
    "numbers or traced integers (%s[i][j]): read its sizes or make its view outside the function (local n = " ..
    "%s.shape[1], local t = %s:t()) and use those, or take a size from the options"):format(c.name, what, c.name,
    c.name, c.name), level + 1)
end
local IPAIRS_STEP = ipairs({}) -- the iterator ipairs returns (the same C function for every table)

Cap.__index = function(c, key)
  local k = key
  if not is_sym(k) then
    if type(k) == "string" then
      cap_not_traced(c, ("%s.%s (a field or a method)"):format(c.name, k), 2)
    elseif type(k) ~= "number" then
      fail(("captured tensor '%s' indexed with a %s; indices are numbers or traced integers"):format(
        c.name, type(k)), 2)
    elseif debug.getinfo(2, "f").func == IPAIRS_STEP then
      -- every index gives a traced load, so ipairs would never end
      cap_not_traced(c, "ipairs over it", 3)
    end
    k = const(k)
  end
  if k.kind == "float" then
    local from = rawget(k, "cap_name") -- a value read from a float tensor (ember.tensor's default dtype)
    fail(("captured tensor '%s' indexed with a non-integer value (index %d)%s; use // or floor() to make " ..
      "an integer"):format(c.name, #c.idx + 1, from and (", a value of the float tensor '%s' (ids and positions " ..
      "are int64: ember.tensor(ids, {dtype = \"int64\"}) or %s:long())"):format(from, from) or ""), 2)
  end
  local idx = { table.unpack(c.idx) }
  idx[#idx + 1] = k
  local ndim = c.ndim
  if ndim and #idx > ndim then
    fail(("captured tensor '%s' is %d-d, indexed with %d indices"):format(c.name, ndim, #idx), 2)
  end
  if ndim and #idx == ndim then
    local n = node("LOAD", idx, { cap = c.slot, kind = c.kind })
    n.cap_name, n.cap_ndim = c.name, ndim -- for the message when it is indexed again
    return n
  end
  return setmetatable({ slot = c.slot, name = c.name, ndim = c.ndim, kind = c.kind, idx = idx }, Cap)
end
Cap.__len = function(c) cap_not_traced(c, "#" .. c.name .. " (its size)", 2) end
Cap.__pairs = function(c) cap_not_traced(c, "pairs over it", 2) end
Cap.__tostring = function(c) return ("captured tensor '%s' (%d of %s indices)"):format(c.name, #c.idx, tostring(c.ndim)) end
local function cap_arith() fail("a captured tensor must be indexed fully before arithmetic (t[i][j])", 2) end
for _, mm in ipairs { "__add", "__sub", "__mul", "__div", "__idiv", "__mod", "__pow", "__unm", "__lt", "__le" } do
  Cap[mm] = cap_arith
end

-- Runs fn(...) under a fresh trace; returns fn's results.
-- variant: the name, or {name =, where = "file:line" of the user's function,
-- upvalue_hint = what a message says of tensors from outside the function,
-- table_hint = what it says of a Lua table indexed with a traced value}.
function M.run(variant, fn, ...)
  local prev = state
  local where, hint = nil, nil
  local table_hint
  if type(variant) == "table" then
    variant, where, hint, table_hint = variant.name, variant.where, variant.upvalue_hint, variant.table_hint
  end
  state = { variant = variant, where = where, upvalue_hint = hint, table_hint = table_hint, nodes = {}, n = 0 }
  local saved = state
  local res = table.pack(pcall(function(...)
    local r = table.pack(fn(...))
    for i = 1, r.n do if is_sym(r[i]) then need_trace({ r[i] }) end end -- one kept from an earlier trace
    return table.unpack(r, 1, r.n)
  end, ...))
  state = prev
  if not res[1] then error(res[2], 0) end
  return saved, table.unpack(res, 2, res.n)
end

-- Enters a trace state for building derivative graphs later.
function M.with(st, fn, ...)
  local prev = state
  state = st
  local res = table.pack(pcall(fn, ...))
  state = prev
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

function M.to_sym(x, what) return to_sym(x, what, 2) end

-- Whether a trace is running (ember.where & co. route plain values to it).
function M.active() return state ~= nil end

return M
