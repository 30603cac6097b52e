--- FlexAttention's API, as PyTorch 2.5+ writes it
-- (`torch.nn.attention.flex_attention`), on ember's traced attention
-- variants (lua/ember/variant.lua): the functions become an anonymous
-- variant, traced once into the fused CPU kernel's forward and backward.
--
--    local q, k, v = ember.randn(2, 8, 128, 16), ember.randn(2, 8, 128, 16), ember.randn(2, 8, 128, 16)
--    local bias = ember.randn(8, 128, 128)              -- read by the closure
--    local function score_mod(score, b, h, q_idx, kv_idx) return score + bias[h][q_idx][kv_idx] end
--    local function causal(b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) end
--    local bm = ember.create_block_mask(causal, nil, nil, 128, 128)
--    local out = ember.flex_attention(q, k, v, {score_mod = score_mod, block_mask = bm})
--
-- As ember's variants, and unlike PyTorch, the indices `b`, `h`, `q_idx`,
-- `kv_idx` are 1-based (every index in ember's Lua API is), and so is the
-- indexing of captured tensors: `bias[h][q_idx][kv_idx]` reads the same
-- element as PyTorch's `bias[h, q_idx, kv_idx]` with its 0-based indices.
-- `q_idx` is the query's own row (1..Lq, top-left, as PyTorch's), not its
-- position on the key axis as in a variant's `q`.
--
-- As PyTorch's, score_mod takes (score, b, h, q_idx, kv_idx) and mask_mod
-- (b, h, q_idx, kv_idx): another number of parameters is refused (Lua
-- would pass a mask_mod given as score_mod the score as b), except a
-- score_mod of the score alone, `function(score)`, and varargs. mask_mod
-- returns a boolean: a comparison (`q_idx:ge(kv_idx)`), a bool tensor it
-- reads (`blocks[i][j]`), or their `&`, `|`, `~`; a number is refused.
--
-- The functions run once on traced values (what they may compute is the
-- list of ember.attention_variant's module description: arithmetic,
-- `:ge` & co., `ember.where`, `ember.logical_and`, ...). A tensor they
-- read as an upvalue becomes a captured tensor of the kernel, read again
-- on every call (its current values): one that requires grad (a learned
-- bias) gets its gradient from the fused backward. Other upvalues (numbers,
-- strings, booleans) are constants of the trace.
--
-- Tensors read in tables count too: `self.rel_bias[h][q_idx - kv_idx + L]`
-- in a module's forward (the table's fields, three levels deep; globals
-- are the fields of _ENV), and so do those of the functions the mod calls
-- (its upvalues: a helper, the masks ember.flex.and_masks combines).
--
-- The traced programs are cached: a call with the same functions re-uses
-- them, and so does a closure made again each step from the same code.
-- The key is the function's bytecode and its upvalues: a number's value,
-- a tensor's number of dims, int or float, and whether it requires grad
-- (with its shape and dtype then), a Lua function's own bytecode and
-- upvalues, a library (ember, math) or C function by identity; for a table
-- the mod reads, each field it read while tracing is read again and must be
-- the same (a number, a function, ...) or the same kind of tensor. So a
-- changed number, in an upvalue or in a table field, traces again (each
-- table's trace is kept: two modules' self do not evict each other), and a
-- tensor's new values are simply read. Not seen: a table's length and what
-- pairs() walks in it (read when tracing only). The lengths are not in the
-- key: q_idx's offset from the key axis (Lk - Lq) is a per-call value, so
-- decoding a token at a time traces once -- give the position that moves
-- each step as a 0-d tensor updated in place (attention-gym's `offset`),
-- not as a number, which would be a new constant each step.
-- @module ember.flex
local core = require "ember.core"
local errors = require "ember._errors"
local variant = require "ember.variant"
local dense = require "ember._variant_dense"
local ft = require "ember._flex_trace" -- score_mod and mask_mod traced, their tensors captured, cached

local M = {}

local WHO = ft.WHO
local function raise(fmt, ...) errors.raise(WHO .. ": " .. fmt, ...) end

local bytecode, composed, rename, reraise, instance = ft.bytecode, ft.composed, ft.rename, ft.reraise, ft.instance
local check_arity = ft.check_arity
M.stats = ft.stats -- {traces =, hits =}: how many calls traced, and how many the cache served

-- inst -> sizes -> the core object holding its programs (weak: a trace
-- dropped from the cache takes its cores along)
local cores = setmetatable({}, { __mode = "k" })

-- The core object (ember.Attention's C half) for these programs and sizes.
local function core_for(inst, caps, H, E, Ev, dtype, device)
  local ck = table.concat({ H, E, Ev, dtype, tostring(device) }, ",")
  local per = cores[inst]
  if not per then
    per = {}
    cores[inst] = per
  end
  local c = per[ck]
  if c then return c end
  c = core._attention_core({ attention = "standard", heads = H, head_dim = E, v_head_dim = Ev }, dtype, device)
  local list = {}
  local by_name = {}
  for _, x in ipairs(caps) do by_name[x.name] = x end
  for i, x in ipairs(inst.caps) do
    list[i] = { name = x.name, ndim = x.ndim, param = x.param,
      shape = x.param and by_name[x.name].tensor.shape or nil }
  end
  c:set_programs { score = inst.score, score_grad = inst.score_grad, mask = inst.mask, caps = list }
  per[ck] = c
  return c
end

-- ---------------------------------------------------------------------
-- Dense evaluation (the logsumexp, the block mask's map)
-- ---------------------------------------------------------------------

-- The environment of the dense evaluator for rows q0+1..q0+n of Lq.
local function dense_env(inst, tensors, B, H, Lq, Lk, q0, n, dtype, device)
  local o = { dtype = dtype, device = device }
  local env = { dtype = dtype, device = device,
    B = core.arange(1, B + 1, o):view(B, 1, 1, 1), H = core.arange(1, H + 1, o):view(1, H, 1, 1),
    Q = core.arange(Lk - Lq + q0 + 1, Lk - Lq + q0 + n + 1, o):view(1, 1, n, 1),
    K = core.arange(1, Lk + 1, o):view(1, 1, 1, Lk) }
  env.load = dense.loader(env, inst.caps, tensors, WHO)
  return env
end

-- The mask_mod's (or, given S, the score_mod's) values on rows q0+1..q0+n
-- by the dense evaluator, in float64; an evaluation error (an index out of
-- range) raised as who's, naming the function.
local function dense_rows(who, role, inst, tensors, B, H, Lq, Lk, q0, n, device, S)
  local env = dense_env(inst, tensors, B, H, Lq, Lk, q0, n, "float64", device)
  env.S = S
  local ok, m = pcall(dense.eval, role == "mask_mod" and inst.mask_graph or inst.score_graph, env)
  if not ok then -- the evaluator's message, less its position and the variant it names
    m = rename((tostring(m):gsub("^[^\n]-:%d+: ", "", 1))):gsub("^attention variant '" .. WHO .. "': ", "")
      :gsub("^" .. WHO .. ": ", "")
    errors.raise("%s: %s: %s", who, role, m)
  end
  return m
end

-- inst.caps' tensors, in capture order.
local function cap_tensors(inst, caps, learned_as)
  local by_name, list = {}, {}
  for _, c in ipairs(caps) do by_name[c.name] = c end
  for i, c in ipairs(inst.caps) do
    local x = by_name[c.name]
    list[i] = (learned_as and learned_as[c.name]) or x.tensor
  end
  return list
end

-- ---------------------------------------------------------------------
-- and_masks, or_masks
-- ---------------------------------------------------------------------

local function combine(who, op, ...)
  local fns = table.pack(...)
  if fns.n == 0 then errors.raise("ember.flex.%s: give at least one mask_mod", who) end
  for i = 1, fns.n do
    if type(fns[i]) ~= "function" then
      errors.raise("ember.flex.%s: argument %d must be a mask_mod function(b, h, q_idx, kv_idx), got %s", who, i,
        type(fns[i]))
    end
    if bytecode(fns[i]) then check_arity(fns[i], "mask_mod", "ember.flex." .. who, ("argument %d"):format(i)) end
  end
  -- pairs, so that each mask is an upvalue (traced with its tensors)
  local function two(a, b)
    local f = function(bb, h, q, k) return op(a(bb, h, q, k), b(bb, h, q, k)) end
    composed[f] = true
    return f
  end
  local r = fns[1]
  for i = 2, fns.n do r = two(r, fns[i]) end
  return r
end

--- A mask_mod true where every one of the given mask_mods is, as
-- PyTorch's `and_masks` (torch.nn.attention.flex_attention).
-- @tparam function ... mask_mod functions `(b, h, q_idx, kv_idx)`
-- @treturn function the combined mask_mod
-- @usage
-- local doc = ember.tensor({1, 1, 2, 2, 2, 3}, {dtype = "int64"})
-- local causal = function(b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) end
-- local same_doc = function(b, h, q_idx, kv_idx) return doc[q_idx]:eq(doc[kv_idx]) end
-- local bm = ember.create_block_mask(ember.flex.and_masks(causal, same_doc), nil, nil, 6, 6, {BLOCK_SIZE = 2})
-- print(bm:sparsity())   --> 55.555555555556
function M.and_masks(...) return combine("and_masks", function(a, b) return core.logical_and(a, b) end, ...) end

--- A mask_mod true where any of the given mask_mods is, as PyTorch's `or_masks`.
-- @tparam function ... mask_mod functions `(b, h, q_idx, kv_idx)`
-- @treturn function the combined mask_mod
-- @usage
-- local window = function(b, h, q_idx, kv_idx) return ember.abs(q_idx - kv_idx):le(2) end
-- local first = function(b, h, q_idx, kv_idx) return kv_idx:eq(1) end   -- a global token
-- local bm = ember.create_block_mask(ember.flex.or_masks(window, first), nil, nil, 64, 64, {BLOCK_SIZE = 16})
-- print(bm.kinds[1][1][4])   --> tensor([1, 0, 1, 1], shape=[4], dtype=int64, device=cpu)
function M.or_masks(...) return combine("or_masks", function(a, b) return core.logical_or(a, b) end, ...) end

--- The mask_mod that hides nothing, as PyTorch's `noop_mask`.
-- @tparam Symbol b batch
-- @tparam Symbol h head
-- @tparam Symbol q_idx query row
-- @tparam Symbol kv_idx key
-- @treturn Symbol true
-- @usage
-- local bm = ember.create_block_mask(ember.flex.noop_mask, nil, nil, 8, 8, {BLOCK_SIZE = 4})
-- print(bm:sparsity())   --> 0.0
function M.noop_mask(b, h, q_idx, kv_idx) return q_idx:eq(q_idx) end


-- ---------------------------------------------------------------------
-- ember.create_block_mask
-- ---------------------------------------------------------------------

local BlockMask = {}
BlockMask.__index = BlockMask
BlockMask.__name = "ember.BlockMask"
M.BlockMask = BlockMask

--- The share of blocks that are skipped (no query of the block may see a
-- key of it), in percent, as PyTorch's BlockMask.sparsity().
-- @treturn number
function BlockMask:sparsity()
  local n, total = 0, 0
  for _, v in ipairs(self.kinds:reshape(-1):totable()) do
    total = total + 1
    if v == 0 then n = n + 1 end
  end
  return total == 0 and 0 or 100 * n / total
end

--- The block map as a bool tensor [B, H, Q blocks, KV blocks]: true where
-- the block is computed (partly or fully visible), as PyTorch's to_dense().
-- @treturn Tensor
function BlockMask:to_dense() return self.kinds:ne(0) end

--- The block map drawn, one line per query block: `█` fully visible,
-- `░` partly (the mask is evaluated), blank skipped; for the first
-- `limit` (default 4) batch-and-head pairs.
-- @tparam[opt] int limit
-- @treturn string
function BlockMask:to_string(limit)
  limit = limit or 4
  local Bm, Hm, nq, nk = table.unpack(self.kinds.shape)
  local rows, shown = {}, 0
  local kinds = self.kinds:totable()
  for b = 1, Bm do
    for h = 1, Hm do
      if shown >= limit then
        rows[#rows + 1] = "..."
        return table.concat(rows, "\n")
      end
      shown = shown + 1
      rows[#rows + 1] = ("(%d, %d)"):format(b, h)
      for i = 1, nq do
        local line = {}
        for j = 1, nk do line[j] = ({ [0] = "  ", [1] = "░░", [2] = "██" })[kinds[b][h][i][j]] end
        rows[#rows + 1] = (table.concat(line):gsub("%s+$", ""))
      end
    end
  end
  return table.concat(rows, "\n")
end

--- "BlockMask(shape=(B, H, Q_LEN, KV_LEN), block_size=, sparsity=%," then the
-- drawn map (BlockMask:to_string), as PyTorch prints a BlockMask.
-- @treturn string
function BlockMask:__tostring()
  local bs = type(self.BLOCK_SIZE) == "table" and ("(%d, %d)"):format(self.BLOCK_SIZE[1], self.BLOCK_SIZE[2])
    or tostring(self.BLOCK_SIZE)
  return ("BlockMask(shape=(%s, %s, %d, %d), block_size=%s, sparsity=%.2f%%,\n%s\n)"):format(
    self.B and tostring(self.B) or "1", self.H and tostring(self.H) or "1", self.Q_LEN, self.KV_LEN,
    bs, self:sparsity(), self:to_string())
end

-- How many of the arguments count: trailing nils do not (Lua code forwards
-- optional arguments as nil).
local function surplus(...)
  local n = select("#", ...)
  while n > 0 and select(n, ...) == nil do n = n - 1 end
  return n
end

-- An argument as an error names it.
local function kind_of(x)
  if getmetatable(x) == BlockMask then return "a BlockMask" end
  if core.is_tensor(x) then return "a tensor" end
  local t = type(x)
  return t == "nil" and "nil" or "a " .. t
end

-- The message for arguments past the last one a function takes: n more
-- after `what`, the last at position `last`.
local function surplus_msg(what, n, last, x)
  return ("got %s %d more argument%s (argument %d is %s)"):format(what, n, n == 1 and "" or "s", last, kind_of(x))
end

local function check_len(v, what, who, allow_nil)
  if v == nil and allow_nil then return end
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    errors.raise("%s: %s must be %s, got %s", who, what, allow_nil and "a positive integer or nil (broadcast)"
      or "a positive integer", v == nil and "nil" or tostring(v))
  end
  if v < 1 then errors.raise("%s: %s must be positive, got %s", who, what, tostring(v)) end
end

--- The dense bool mask [B, H, Q_LEN, KV_LEN] (nil B or H: 1) of a mask_mod,
-- or of a score_mod (true where its score is not -inf), as PyTorch's
-- `create_mask`: what `block_mask` hides, as an `attn_mask` for
-- ember.scaled_dot_product_attention (true = may attend), to test against
-- or to draw. Which of the two mod_fn is, is read from its parameters, as
-- PyTorch's: (b, h, q_idx, kv_idx) is a mask_mod, (score, b, h, q_idx,
-- kv_idx) a score_mod. O(B H Q_LEN KV_LEN) memory.
-- @tparam function mod_fn a mask_mod or a score_mod (1-based indices, as ember.flex_attention's)
-- @tparam[opt] int B batches, or nil
-- @tparam[opt] int H heads, or nil
-- @tparam int Q_LEN queries
-- @tparam int KV_LEN keys
-- @tparam[opt] string device ("cpu")
-- @treturn Tensor bool [B or 1, H or 1, Q_LEN, KV_LEN]
-- @usage
-- local causal = function(b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) end
-- print(ember.flex.create_mask(causal, nil, nil, 3, 3)[1][1])
-- --> tensor([[ true, false, false],
-- -->         [ true,  true, false],
-- -->         [ true,  true,  true]], shape=[3, 3], dtype=bool, device=cpu)
function M.create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device, ...)
  local who = "ember.flex.create_mask"
  local n = surplus(...)
  if n > 0 then
    errors.raise("%s: takes (mod_fn, B, H, Q_LEN, KV_LEN, device); %s", who, surplus_msg("device and", n, n + 6,
      (select(n, ...))))
  end
  if type(mod_fn) ~= "function" or not bytecode(mod_fn) then
    errors.raise("%s: mod_fn must be a Lua mask_mod or score_mod function, got %s", who,
      type(mod_fn) == "function" and "a C function" or type(mod_fn))
  end
  local np = debug.getinfo(mod_fn, "u").nparams
  local role = np == 4 and "mask_mod" or np == 5 and "score_mod" or nil
  if not role then
    errors.raise("%s: mod_fn must take (b, h, q_idx, kv_idx) (a mask_mod) or (score, b, h, q_idx, kv_idx) (a " ..
      "score_mod), as PyTorch's; this one takes %d parameters", who, np)
  end
  check_len(B, "B", who, true)
  check_len(H, "H", who, true)
  check_len(Q_LEN, "Q_LEN", who)
  check_len(KV_LEN, "KV_LEN", who)
  if device ~= nil and type(device) ~= "string" then
    errors.raise("%s: device must be a string (\"cpu\"), got %s", who, kind_of(device))
  end
  device = device or "cpu"
  local Bm, Hm = B or 1, H or 1
  local ok, inst, caps = pcall(instance, { [role] = mod_fn, offset = KV_LEN - Q_LEN, b1 = B == nil, h1 = H == nil })
  if not ok then reraise(inst, who) end
  local tensors = cap_tensors(inst, caps)
  for i, t in ipairs(tensors) do
    if tostring(t.device) ~= tostring(device) then tensors[i] = t:to(device) end
  end
  return core.no_grad(function()
    local S = role == "score_mod" and core.zeros({ Bm, Hm, Q_LEN, KV_LEN }, { dtype = "float64", device = device }) or nil
    local m = dense_rows(who, role, inst, tensors, Bm, Hm, Q_LEN, KV_LEN, 0, Q_LEN, device, S)
    m = role == "mask_mod" and m:ne(0) or m:ne(-math.huge)
    return m:expand(Bm, Hm, Q_LEN, KV_LEN):contiguous()
  end)
end

--- A block mask, as PyTorch's `create_block_mask`: the mask function
-- `mask_mod(b, h, q_idx, kv_idx)` (1-based; true where query q_idx may see
-- key kv_idx) for `B` batches and `H` heads (nil: the same for all, as
-- PyTorch's None; the function then sees b = 1, h = 1) and `Q_LEN` x
-- `KV_LEN` positions, with its map of `BLOCK_SIZE` blocks (default 128):
-- empty (skipped), partial or full. Give it to ember.flex_attention as
-- `block_mask`; the fused kernel skips the empty tiles of its own (finer)
-- tiling of the same mask. The map is made by evaluating the mask densely,
-- a block row at a time; it prints readably, with its sparsity.
-- @tparam function mask_mod the mask function (traced, see ember.flex_attention)
-- @tparam[opt] int B batches, or nil
-- @tparam[opt] int H heads, or nil
-- @tparam int Q_LEN queries
-- @tparam int KV_LEN keys
-- @tparam[opt] table opts `BLOCK_SIZE` (default 128; or PyTorch's pair
-- {Q_BLOCK_SIZE, KV_BLOCK_SIZE}), `device` ("cpu"); or PyTorch's
-- positional device, then BLOCK_SIZE
-- @treturn BlockMask `mask_mod`, `B`, `H`, `Q_LEN`, `KV_LEN`, `BLOCK_SIZE`
-- (as given), `Q_BLOCK_SIZE`, `KV_BLOCK_SIZE`,
-- `shape`, `kinds` (int64 [B or 1, H or 1, Q blocks, KV blocks]: 0 empty, 1
-- partial, 2 full), `:sparsity()`, `:to_dense()`, `:to_string()`
-- @usage
-- local causal = function(b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) end
-- local bm = ember.create_block_mask(causal, nil, nil, 256, 256, {BLOCK_SIZE = 64})
-- print(bm)                       -- BlockMask(shape=(1, 1, 256, 256), block_size=64, sparsity=37.50%, ...
-- assert(math.abs(bm:sparsity() - 37.5) < 1e-9)
function M.create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, opts, ...)
  local who = "ember.create_block_mask"
  local n = surplus(...)
  if type(opts) == "table" and n > 0 then
    errors.raise("%s: takes (mask_mod, B, H, Q_LEN, KV_LEN, opts) or PyTorch's positional (..., device, BLOCK_SIZE); %s",
      who, surplus_msg("an options table and", n, n + 6, (select(n, ...))))
  elseif n > 1 then
    errors.raise("%s: takes (mask_mod, B, H, Q_LEN, KV_LEN, opts) or PyTorch's positional (..., device, BLOCK_SIZE); %s",
      who, surplus_msg("device, BLOCK_SIZE and", n - 1, n + 6, (select(n, ...))))
  end
  -- PyTorch's positional create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device, BLOCK_SIZE)
  if type(opts) == "string" or (opts == nil and n > 0) then opts = { device = opts, BLOCK_SIZE = (...) } end
  if type(mask_mod) ~= "function" or not bytecode(mask_mod) then
    errors.raise("%s: mask_mod must be a Lua function(b, h, q_idx, kv_idx), got %s", who,
      type(mask_mod) == "function" and "a C function" or type(mask_mod))
  end
  check_arity(mask_mod, "mask_mod", who)
  check_len(B, "B", who, true)
  check_len(H, "H", who, true)
  check_len(Q_LEN, "Q_LEN", who)
  check_len(KV_LEN, "KV_LEN", who)
  opts = opts or {}
  if type(opts) ~= "table" then errors.raise("%s: options must be a table {BLOCK_SIZE=, device=}, got %s", who, type(opts)) end
  for k in pairs(opts) do
    if k ~= "BLOCK_SIZE" and k ~= "device" then
      errors.raise("%s: unknown option '%s'%s (expected BLOCK_SIZE, device)", who, tostring(k), k == "_compile"
        and ": PyTorch's _compile compiles the mask's evaluation; here mask_mod is traced once and cached, leave it out"
        or "")
    end
  end
  local bs = opts.BLOCK_SIZE or 128
  -- PyTorch's BLOCK_SIZE is an int or a (Q_BLOCK_SIZE, KV_BLOCK_SIZE) pair
  local qbs, kbs = bs, bs
  if type(bs) == "table" then
    if #bs ~= 2 or next(bs, #bs > 0 and #bs or nil) ~= nil then
      errors.raise("%s: BLOCK_SIZE must be a positive integer or a pair {Q_BLOCK_SIZE, KV_BLOCK_SIZE}, got a table of %d "
        .. "entries", who, #bs)
    end
    qbs, kbs = bs[1], bs[2]
    check_len(qbs, "BLOCK_SIZE[1] (Q_BLOCK_SIZE)", who)
    check_len(kbs, "BLOCK_SIZE[2] (KV_BLOCK_SIZE)", who)
    qbs, kbs = math.tointeger(qbs), math.tointeger(kbs)
    bs = { qbs, kbs }
  else
    check_len(bs, "BLOCK_SIZE", who)
    bs = math.tointeger(bs)
    qbs, kbs = bs, bs
  end
  local device = opts.device or "cpu"
  local Bm, Hm = B or 1, H or 1
  local ok, inst, caps = pcall(instance, { mask_mod = mask_mod, offset = KV_LEN - Q_LEN, b1 = B == nil, h1 = H == nil })
  if not ok then reraise(inst, who) end
  local tensors = cap_tensors(inst, caps)
  for i, t in ipairs(tensors) do
    if tostring(t.device) ~= tostring(device) then tensors[i] = t:to(device) end
  end
  local nq, nk = (Q_LEN + qbs - 1) // qbs, (KV_LEN + kbs - 1) // kbs
  local kinds = core.zeros({ Bm, Hm, nq, nk }, { dtype = "int64" })
  core.no_grad(function()
    for i = 1, nq do
      local q0 = (i - 1) * qbs
      local n = math.min(qbs, Q_LEN - q0)
      local m = dense_rows(who, "mask_mod", inst, tensors, Bm, Hm, Q_LEN, KV_LEN, q0, n, device)
      m = m:ne(0):expand(Bm, Hm, n, KV_LEN)
      -- pad the keys to whole blocks (padding counts as hidden), then per block: any, all
      local pad = nk * kbs - KV_LEN
      local any = m
      if pad > 0 then any = core.cat({ m, core.zeros({ Bm, Hm, n, pad }, { dtype = "bool", device = device }) }, 4) end
      local blocks = any:reshape(Bm, Hm, n, nk, kbs)
      local some = blocks:any(5):any(3) -- [Bm, Hm, nk]
      local full = m
      if pad > 0 then full = core.cat({ m, core.ones({ Bm, Hm, n, pad }, { dtype = "bool", device = device }) }, 4) end
      local all = full:reshape(Bm, Hm, n, nk, kbs):all(5):all(3)
      local k = some:long() + all:logical_and(some):long()
      kinds:narrow(3, i, 1):copy_(k:to("cpu"):view(Bm, Hm, 1, nk))
    end
  end)
  return setmetatable({ mask_mod = mask_mod, B = B, H = H, Q_LEN = Q_LEN, KV_LEN = KV_LEN, BLOCK_SIZE = bs,
    Q_BLOCK_SIZE = qbs, KV_BLOCK_SIZE = kbs, shape = { Bm, Hm, Q_LEN, KV_LEN }, kinds = kinds }, BlockMask)
end

-- ---------------------------------------------------------------------
-- ember.flex_attention
-- ---------------------------------------------------------------------

local KNOWN = { score_mod = true, block_mask = true, scale = true, enable_gqa = true, return_lse = true }

local FLOAT = { float32 = true, float64 = true, bfloat16 = true }

local function shape_of(t) return errors.shape_str(t) end

-- The row logsumexp of the scores after score_mod and the mask, by core
-- ops (differentiable): [B, Hq, Lq]; -inf for a row that sees no key.
local function logsumexp(inst, tensors, q, k, scale)
  local B, H, Lq, Lk = q.shape[1], q.shape[2], q.shape[3], k.shape[3]
  if k.shape[2] ~= H then k = k:repeat_interleave(H // k.shape[2], 2) end
  local dt = q.dtype == "bfloat16" and "float32" or q.dtype
  q, k = q:to(dt), k:to(dt)
  local env = dense_env(inst, tensors, B, H, Lq, Lk, 0, Lq, dt, q.device)
  local s = q:matmul(k:transpose(3, 4)) * scale
  if inst.score_graph then
    env.S = s
    s = dense.eval(inst.score_graph, env):expand(B, H, Lq, Lk)
  end
  if inst.mask_graph then
    s = s:masked_fill(dense.eval(inst.mask_graph, env):eq(0):expand(B, H, Lq, Lk), -math.huge)
  end
  return s:logsumexp(4)
end

--- Attention with a score function and a mask, as PyTorch's
-- `flex_attention` (torch.nn.attention.flex_attention, 2.5+):
-- softmax(score_mod(q k^T * scale) masked by block_mask) v, by ember's fused
-- kernel (forward and backward, O(L) memory; fully masked tiles skipped).
--
-- `score_mod(score, b, h, q_idx, kv_idx)` returns the new score;
-- `block_mask` is an ember.create_block_mask of `mask_mod(b, h, q_idx,
-- kv_idx)`. The indices are 1-based (PyTorch's are 0-based), q_idx the
-- query's row 1..Lq. Tensors the functions read as upvalues are read on
-- every call; one that requires grad gets its gradient. The traced
-- programs are cached by the functions' code and upvalues (see the module
-- description), so a training loop traces once. A row no key may be seen
-- by gives 0 (and its logsumexp -inf), as PyTorch's.
-- @tparam Tensor query [B, Hq, Lq, E]
-- @tparam Tensor key [B, Hkv, Lk, E]
-- @tparam Tensor value [B, Hkv, Lk, Ev]
-- @tparam[opt] table opts (or PyTorch's positional arguments: score_mod,
-- then block_mask, scale, enable_gqa, return_lse; or a block mask alone;
-- arguments past these are refused, not dropped) `score_mod`, `block_mask`, `scale` (default
-- 1/sqrt(E)), `enable_gqa` (Hq a multiple of Hkv: each kv head serves
-- Hq/Hkv query heads in a row), `return_lse` (also return the row
-- logsumexp [B, Hq, Lq], computed densely by core ops: O(Lq*Lk) memory)
-- @treturn Tensor out [B, Hq, Lq, Ev]
-- @treturn[opt] Tensor lse [B, Hq, Lq] when return_lse
-- @usage
-- local q, k, v = ember.randn(2, 4, 64, 16), ember.randn(2, 4, 64, 16), ember.randn(2, 4, 64, 16)
-- local bias = ember.randn(4, 64, 64):requires_grad_()     -- a learned bias per head
-- local function score_mod(score, b, h, q_idx, kv_idx) return score + bias[h][q_idx][kv_idx] end
-- local function causal(b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) end
-- local bm = ember.create_block_mask(causal, nil, nil, 64, 64)
-- local out = ember.flex_attention(q, k, v, {score_mod = score_mod, block_mask = bm})
-- out:sum():backward()
-- print(out.shape, bias.grad.shape)    --> ember.Size{2, 4, 64, 16} ember.Size{4, 64, 64}
function M.flex_attention(q, k, v, opts, ...)
  for i, t in ipairs { q, k, v } do
    if not core.is_tensor(t) then raise("%s must be a tensor, got %s", ({ "query", "key", "value" })[i], type(t)) end
  end
  local n = surplus(...)
  if n > 0 then
    -- PyTorch's positional flex_attention(q, k, v, score_mod, block_mask, scale, enable_gqa, return_lse)
    local rest = table.pack(...)
    local form = "takes (query, key, value, opts) or PyTorch's positional (query, key, value, score_mod, block_mask, " ..
      "scale, enable_gqa, return_lse); "
    if getmetatable(opts) == BlockMask then
      raise("argument 4 is a block mask, so argument 5 cannot follow it (PyTorch's order: score_mod, block_mask, ...)")
    elseif type(opts) == "table" then
      raise("%s%s", form, surplus_msg("an options table and", n, n + 4, rest[n]))
    elseif n > 4 then
      raise("%sgot %d arguments after value (argument %d is %s)", form, n + 1, n + 4, kind_of(rest[n]))
    end
    opts = { score_mod = opts, block_mask = rest[1], scale = rest[2], enable_gqa = rest[3], return_lse = rest[4] }
  end
  if opts == nil then opts = {} end
  -- PyTorch's positional flex_attention(q, k, v, score_mod) and a block mask alone
  if type(opts) == "function" then opts = { score_mod = opts }
  elseif getmetatable(opts) == BlockMask then opts = { block_mask = opts } end
  if type(opts) ~= "table" then raise("options must be a table {score_mod =, block_mask =, ...}, got %s", type(opts)) end
  for key in pairs(opts) do
    if not KNOWN[key] then
      raise("unknown option '%s'%s (expected block_mask, enable_gqa, return_lse, scale, score_mod)", tostring(key),
        key == "kernel_options" and ": PyTorch's kernel_options tune its Triton kernel; ember's fused CPU kernel " ..
        "takes none, leave it out" or "")
    end
  end
  if q.ndim ~= 4 or k.ndim ~= 4 or v.ndim ~= 4 then
    raise("query, key and value must be 4-d [B, H, L, E], got %s, %s and %s", shape_of(q), shape_of(k), shape_of(v))
  end
  local B, Hq, Lq, E = table.unpack(q.shape)
  local Hk, Lk, Ev = k.shape[2], k.shape[3], v.shape[4]
  if k.shape[1] ~= B or v.shape[1] ~= B then
    raise("query, key and value must have the same batch size, got %s, %s and %s", shape_of(q), shape_of(k), shape_of(v))
  end
  if k.shape[4] ~= E then raise("query and key must have the same head size E, got %s and %s", shape_of(q), shape_of(k)) end
  if E < 1 or Ev < 1 then
    raise("the head sizes of query/key (E) and value (Ev) must be at least 1, got %s and %s", shape_of(q), shape_of(v))
  end
  if v.shape[2] ~= Hk or v.shape[3] ~= Lk then
    raise("key %s and value %s must have the same heads and length", shape_of(k), shape_of(v))
  end
  if Hq ~= Hk then
    if not opts.enable_gqa then
      raise("query has %d heads and key/value %d: grouped-query attention needs {enable_gqa = true}", Hq, Hk)
    end
    if Hq % Hk ~= 0 then raise("query's %d heads must be a multiple of key/value's %d heads", Hq, Hk) end
  end
  if not FLOAT[q.dtype] or k.dtype ~= q.dtype or v.dtype ~= q.dtype then
    raise("query, key and value must share a float32, float64 or bfloat16 dtype, got %s, %s and %s", q.dtype,
      k.dtype, v.dtype)
  end
  if tostring(k.device) ~= tostring(q.device) or tostring(v.device) ~= tostring(q.device) then
    raise("query, key and value must be on one device, got %s, %s and %s", tostring(q.device), tostring(k.device),
      tostring(v.device))
  end
  local score_mod, bm = opts.score_mod, opts.block_mask
  if score_mod ~= nil and (type(score_mod) ~= "function" or not bytecode(score_mod)) then
    raise("score_mod must be a Lua function(score, b, h, q_idx, kv_idx), got %s",
      type(score_mod) == "function" and "a C function" or type(score_mod))
  end
  if score_mod ~= nil then check_arity(score_mod, "score_mod", WHO) end
  if bm ~= nil then
    if getmetatable(bm) ~= BlockMask then
      raise("block_mask must be made by ember.create_block_mask, got %s", core.is_tensor(bm) and
        "a tensor (a bool mask is scaled_dot_product_attention's attn_mask)" or type(bm))
    end
    if bm.Q_LEN ~= Lq or bm.KV_LEN ~= Lk then
      raise("block_mask was made for Q_LEN=%d, KV_LEN=%d, got query length %d and key length %d", bm.Q_LEN,
        bm.KV_LEN, Lq, Lk)
    end
    if (bm.B and bm.B ~= B) or (bm.H and bm.H ~= Hq) then
      raise("block_mask was made for B=%s, H=%s, got B=%d and %d query heads (nil broadcasts)", tostring(bm.B),
        tostring(bm.H), B, Hq)
    end
  end
  local scale = opts.scale
  if scale ~= nil and (type(scale) ~= "number" or scale ~= scale) then
    raise("scale must be a number, got %s", scale ~= scale and "nan" or type(scale))
  end
  if opts.return_lse ~= nil and type(opts.return_lse) ~= "boolean" then
    raise("return_lse must be a boolean, got %s", type(opts.return_lse))
  end
  if opts.enable_gqa ~= nil and type(opts.enable_gqa) ~= "boolean" then
    raise("enable_gqa must be a boolean, got %s", type(opts.enable_gqa))
  end
  local sc = scale or 1 / math.sqrt(E)
  local inst, caps, key = nil, nil, nil
  if score_mod or bm then
    inst, caps, key = instance { score_mod = score_mod, mask_mod = bm and bm.mask_mod, offset = Lk - Lq,
      b1 = bm and bm.B == nil, h1 = bm and bm.H == nil }
  end
  -- captures that train are the kernel's tables (it gives them gradients),
  -- in q's dtype and device; the others its per-call tensors
  local tables, inputs, list, learned_as = {}, {}, {}, {}
  if inst then
    local by_name = {}
    for _, c in ipairs(caps) do by_name[c.name] = c end
    for i, c in ipairs(inst.caps) do
      local t = by_name[c.name].tensor
      if c.name == ft.OFFSET then t = t:to(q.device) end -- Lk - Lq, made by the trace on the CPU
      if tostring(t.device) ~= tostring(q.device) then
        raise("the tensor '%s' read by %s is on %s, query on %s", c.name, "score_mod or mask_mod", tostring(t.device),
          tostring(q.device))
      end
      if c.param then
        if t.dtype ~= q.dtype then t = t:to(q.dtype) end
        tables[c.param] = t
        learned_as[c.name] = t
      else
        inputs[c.name] = t
        list[i] = t
      end
    end
  end
  local qs, run_scale = q, sc
  if sc <= 0 then qs, run_scale = q * sc, 1 end -- the core reads scale <= 0 as its default (nn/Attention.lua)
  local out
  if not inst then
    out = core.scaled_dot_product_attention(q, k, v, { scale = scale, enable_gqa = opts.enable_gqa })
  else
    local att = core_for(inst, caps, Hq, E, Ev, q.dtype, q.device)
    local ok, r = pcall(att.forward, att, tables, qs, k, v, { scale = run_scale }, list, tostring(q.device) ~= "cpu")
    if not ok then reraise(r) end
    out = r
    if out == nil then -- a device kernel that declines the call: core ops
      core._attention_count("composed")
      out = variant.dense(inst, tables, inputs, qs, k, v, { scale = run_scale })
    end
  end
  if not opts.return_lse then return out end
  local lse
  if inst then
    lse = logsumexp(inst, cap_tensors(inst, caps, learned_as), qs, k, run_scale)
  else
    local kk = Hk ~= Hq and k:repeat_interleave(Hq // Hk, 2) or k
    lse = (q:matmul(kk:transpose(3, 4)) * sc):logsumexp(4)
  end
  return out, lse
end

return M
