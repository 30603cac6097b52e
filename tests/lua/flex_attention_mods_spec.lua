-- ember.flex_attention as a FlexAttention user writes attention variants in
-- Lua (score_mod / mask_mod / block_mask, and variants dropped in a plugin
-- folder).
--
-- Numbers: variants the attention-gym catalogue (flex_gym_spec) does not
-- hold, against PyTorch 1.13 written out densely in float64
-- (tests/gen_flex_attention_mods_fixtures.py writes tests/fixtures/flex_attention_mods.lua):
-- out and the gradients of q, k, v and the learned tensor.
--
-- Mistakes, each named at the user's line (they were not):
-- - reading a captured tensor's size or calling its methods inside a mod
--   (bias.shape[1], bias:size(1), bias:t()) said "indexed with a string";
-- - `#bias` inside a mod was silently 0 (a variant's `#ctx.tbl` too: 0/0 gave
--   NaN at the first call, `s - #ctx.tbl` a silent wrong score);
-- - `ipairs(bias)` inside a mod never ended (every index is a traced load);
--   `pairs(bias)` walked the capture's own fields (its name, a string);
-- - `math.random()` inside a mod ran once at the trace: every call (the
--   trace is cached) got that one number, silently;
-- - an index read from a float tensor (ember.tensor's default dtype: ids
--   written ember.tensor{1, 1, 2}) said only "non-integer value";
-- - a mask_mod returning ember.where(c, mask1, mask2) (bool branches, a
--   bool in torch) was refused as "returned an int value, not a boolean",
--   and ~ of it as "'~' ... got an int value".
--
-- Also: a traced value kept in an upvalue past its trace and used later (in
-- Lua, in another variant's trace, in a later score_mod) crashed inside the
-- tracer or made a program that read an unset register; create_block_mask's
-- BLOCK_SIZE pair (Q_BLOCK_SIZE, KV_BLOCK_SIZE), PyTorch's _compile and
-- kernel_options, help(ember.flex).
local ember = require "ember"
local parity = require "tests.lua.helpers.parity"
local tmpdir = require "tests.lua.helpers.tmpdir"

local T, check = parity.T, parity.check
local raises_here = parity.raises_here
local fx = dofile("tests/fixtures/flex_attention_mods.lua")
local D = { dtype = "float64" }
local HERE = "flex_attention_mods_spec.lua:"

local function by_name(name)
  for _, c in ipairs(fx.cases) do if c.name == name then return c end end
  error("no fixture case " .. name)
end

-- name -> function(c, learned tensor, dtype) -> opts for flex_attention; the
-- same rules as the generator's, 1-based
local L = 9
local VARIANTS = {
  relbias_twice = function(c, t)
    return { score_mod = function(s, b, h, q_idx, kv_idx)
      return s + t[kv_idx - q_idx + L + 1][h] * t[q_idx - kv_idx + L + 1][h]
    end }
  end,
  gqa_slope = function(c, t)
    local bm = ember.create_block_mask(function(b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) end, nil, nil, 8, 8,
      { BLOCK_SIZE = 4 })
    return { score_mod = function(s, b, h, q_idx, kv_idx) return s - t[h] * ember.abs(q_idx - kv_idx) end,
      block_mask = bm, enable_gqa = true }
  end,
  temperature_prefix = function(c, t)
    local bm = ember.create_block_mask(function(b, h, q_idx, kv_idx) return kv_idx:le(3) | q_idx:ge(kv_idx) end,
      nil, nil, 8, 8, { BLOCK_SIZE = 4 })
    return { score_mod = function(s) return s / t end, block_mask = bm }
  end,
  key_bias_and_mask = function(c, t)
    local bm = ember.create_block_mask(function(b, h, q_idx, kv_idx) return t[kv_idx]:gt(0) | kv_idx:eq(q_idx) end,
      nil, nil, 7, 9, { BLOCK_SIZE = 4 })
    return { score_mod = function(s, b, h, q_idx, kv_idx) return s + t[kv_idx] end, block_mask = bm }
  end,
  negative_index_arithmetic = function()
    return { score_mod = function(s, b, h, q_idx, kv_idx)
      return s + ((q_idx - kv_idx) // 3) * 0.25 + ((kv_idx - q_idx) % 4) * 0.125 + math.fmod(q_idx - kv_idx, 3) * 0.0625
    end }
  end,
  nonlinear_score = function()
    return { score_mod = function(s)
      return ember.where(s:gt(0), s * s, -ember.sqrt(ember.abs(s) + 0.5)) + ember.sigmoid(s) + ember.pow(ember.abs(s) + 1, 1.5) * 0.25
    end }
  end,
  transposed_capture = function(c, _, dtype)
    local bt = T(c.bias):to(dtype):t() -- a view with strides (1, 7)
    return { score_mod = function(s, b, h, q_idx, kv_idx) return s + bt[q_idx][kv_idx] end }
  end,
  where_of_masks = function()
    local bm = ember.create_block_mask(function(b, h, q_idx, kv_idx)
      return ~ember.where(q_idx:ge(5), ember.abs(q_idx - kv_idx):gt(2) & kv_idx:ne(1), kv_idx:lt(q_idx))
    end, nil, nil, 7, 9, { BLOCK_SIZE = 4 })
    return { block_mask = bm }
  end,
  rows_all_minus_inf = function()
    return { score_mod = function(s, b, h, q_idx, kv_idx) return ember.where(q_idx:gt(3), s, -math.huge) end }
  end,
}

local function run(c, dtype)
  local q, k, v = T(c.q):to(dtype):requires_grad_(), T(c.k):to(dtype):requires_grad_(), T(c.v):to(dtype):requires_grad_()
  local t = c.learned and T(c.learned):to(dtype):requires_grad_() or nil
  local out = ember.flex_attention(q, k, v, VARIANTS[c.name](c, t, dtype))
  ;(out * T(c.R):to(dtype)):sum():backward()
  return out, q.grad, k.grad, v.grad, t and t.grad
end

-- case c run in dtype: out and every gradient within tol of PyTorch's
local function check_case(c, dtype, tol)
  local out, dq, dk, dv, dt = run(c, dtype)
  check("out", out, T(c.out), tol)
  check("dq", dq, T(c.dq), tol)
  check("dk", dk, T(c.dk), tol)
  check("dv", dv, T(c.dv), tol)
  if c.learned then check("dlearned", dt, T(c.dlearned), tol) end
end

describe("Lua FlexAttention variants against PyTorch (float64, dense)", function()
  for _, c in ipairs(fx.cases) do
    it(c.name .. ": out and the gradients of q, k, v" .. (c.learned and " and the learned tensor" or ""), function()
      check_case(c, "float64", 1e-10)
    end)
    it(c.name .. " in float32, near the same numbers", function()
      check_case(c, "float32", 1e-4)
    end)
  end

  it("rows whose score is -inf everywhere give 0 and no gradient, never NaN", function()
    local out, dq = run(by_name("rows_all_minus_inf"), "float64")
    assert.are.equal(0, out:narrow(3, 1, 3):abs():max():item())
    assert.are.equal(0, dq:narrow(3, 1, 3):abs():max():item())
    assert.is_true(out:isfinite():all():item() and dq:isfinite():all():item())
  end)
end)

-- err must be raised at this file's `line` and hold each of `parts`
local function raises_at(line, parts, f)
  local ok, err = pcall(f)
  assert.is_false(ok, "no error")
  err = tostring(err)
  assert.is_truthy(err:find(HERE .. line .. ":", 1, true), "not at the user's line " .. line .. ": " .. err)
  for _, p in ipairs(parts) do assert.is_truthy(err:find(p, 1, true), ("'%s' not in: %s"):format(p, err)) end
end

local function here() return debug.getinfo(2, "l").currentline end

describe("what a mod cannot do with a captured tensor is named at its line", function()
  local q = ember.randn(1, 2, 7, 4, D)
  local k, v = ember.randn(1, 2, 9, 4, D), ember.randn(1, 2, 9, 4, D)
  local bias = ember.randn(17, 2, D)

  it("its size or a method (bias.shape[1], bias:size(1), bias:t()): not 'indexed with a string'", function()
    local l1 = here() + 2
    raises_at(l1, { "ember.flex_attention: captured tensor 'bias': bias.shape", "local n = bias.shape[1]" }, function()
      return ember.flex_attention(q, k, v, { score_mod = function(s, b, h, q_idx, kv_idx) local K = bias.shape[1] // 2
        return s + bias[ember.clamp(kv_idx - q_idx, -K, K) + K + 1][h] end })
    end)
    local l2 = here() + 3
    raises_at(l2, { "bias.size", "cannot be traced" }, function()
      return ember.flex_attention(q, k, v, { score_mod = function(s, b, h, q_idx, kv_idx)
        return s + bias[bias:size(1)][h] end })
    end)
    local l3 = here() + 3
    raises_at(l3, { "ember.create_block_mask: captured tensor 'bias': bias.t" }, function()
      return ember.create_block_mask(function(b, h, q_idx, kv_idx)
        return bias:t()[h][kv_idx]:gt(0) end, nil, 2, 7, 9)
    end)
  end)

  it("#bias is refused (it was silently 0)", function()
    local l = here() + 2
    raises_at(l, { "captured tensor 'bias': #bias (its size) cannot be traced" }, function()
      return ember.flex_attention(q, k, v, { score_mod = function(s) return s - #bias end })
    end)
  end)

  it("ipairs over it is refused (it never ended) and pairs too (it walked the capture's fields)", function()
    local l = here() + 4
    raises_at(l, { "captured tensor 'bias': ipairs over it cannot be traced" }, function()
      return ember.flex_attention(q, k, v, { score_mod = function(s)
        local n = 0
        for _, x in ipairs(bias) do
          n = n + 1
          if n > 50 then error("ipairs over a captured tensor did not end") end
          s = s + x[1]
        end
        return s
      end })
    end)
    local l2 = here() + 2
    raises_at(l2, { "captured tensor 'bias': pairs over it cannot be traced" }, function()
      return ember.flex_attention(q, k, v, { score_mod = function(s) for _, x in pairs(bias) do s = s + x end return s end })
    end)
  end)

  it("math.random() is refused (it ran once, at the trace, and every call got that number)", function()
    local l = here() + 2
    raises_at(l, { "ember.flex_attention: math.random cannot be traced", "ember.rand" }, function()
      return ember.flex_attention(q, k, v, { score_mod = function(s) return s + math.random() end })
    end)
    -- math.random is itself again after the trace
    assert.is_true(math.random() < 1)
  end)

  it("an index read from a float tensor (ember.tensor's default dtype) says to make it int64", function()
    local pos = ember.tensor({ 1, 1, 2, 2, 3, 3, 3, 3, 3 }) -- float32
    local tbl = ember.randn(3, D)
    local l = here() + 3
    raises_at(l, { "captured tensor 'tbl' indexed with a non-integer value (index 1), a value of the float tensor " ..
      "'pos'", "pos:long()" }, function() return ember.flex_attention(q, k, v, { score_mod = function(s, b, h, q_idx, kv_idx)
      return s + tbl[pos[kv_idx]] end }) end)
    local ids = pos:long()
    local out = ember.flex_attention(q, k, v, { score_mod = function(s, b, h, q_idx, kv_idx) return s + tbl[ids[kv_idx]] end })
    assert.are.same({ 1, 2, 7, 4 }, out.shape)
  end)

  it("the process goes on: the same mods written right run", function()
    local K = bias.shape[1] // 2
    local bt = bias:t()
    local out = ember.flex_attention(q, k, v, { score_mod = function(s, b, h, q_idx, kv_idx)
      return s + bias[ember.clamp(kv_idx - q_idx, -K, K) + K + 1][h] + bt[h][1]
    end })
    assert.are.same({ 1, 2, 7, 4 }, out.shape)
  end)
end)

describe("traced values kept past their trace", function()
  -- A traced value saved in an upvalue and used after score_mod returned
  -- raised from inside _trace.lua ("attempt to index a nil value (upvalue
  -- 'state')"); it is an error at the user's line saying what happened.
  it("is an error at the user's line, not a crash inside the tracer", function()
    local q = ember.randn(1, 2, 6, 4)
    local saved
    ember.flex_attention(q, q, q, { score_mod = function(s, b, h, qi, ki) saved = qi; return s end })
    for _, use in ipairs {
      function() return saved + 1 end,
      function() return saved:ge(1) end,
      function() return ember.exp(saved) end,
    } do
      local ok, err = pcall(use)
      assert.is_false(ok)
      assert.matches("flex_attention_mods_spec%.lua:%d+: a traced value", err)
      assert.matches("used after its function returned", err)
    end
  end)

  -- One kept from a variant's trace and used in another variant's made a
  -- program that read an unset register ("instruction 4 reads register -1"),
  -- or mixed two graphs' nodes: it is refused naming the variant.
  it("is refused in another variant's trace, used or returned", function()
    local saved
    ember.attention_variant { name = "trace_keeper",
      score = function(s, b, h, q, k, ctx) saved = (q - k) * 0.7; return s end }
    local ok, err = pcall(ember.attention_variant,
      { name = "trace_user", score = function(s, b, h, q, k, ctx) return s + saved end })
    assert.is_false(ok)
    assert.matches("attention variant 'trace_user': a traced value", err, 1, true)
    ok, err = pcall(ember.attention_variant,
      { name = "trace_returner", score = function(s, b, h, q, k, ctx) return saved end })
    assert.is_false(ok)
    assert.matches("attention variant 'trace_returner': a traced value", err, 1, true)
  end)

  -- In score_mod, such an upvalue was searched as a table of tensors and
  -- replaced by a stand-in: "cannot trace '+' on a table".
  it("is refused in a later score_mod saying what it is", function()
    local q = ember.randn(1, 1, 5, 4)
    local saved
    ember.flex_attention(q, q, q, { score_mod = function(s, b, h, qi, ki) saved = (qi - ki) * 0.7; return s end })
    local ok, err = pcall(ember.flex_attention, q, q, q,
      { score_mod = function(s, b, h, qi, ki) return s + saved end })
    assert.is_false(ok)
    assert.matches("a traced value", err, 1, true)
    assert.matches("used after its function returned", err, 1, true)
  end)

  it("leaves the next trace working", function()
    local q = ember.randn(1, 1, 4, 2, { dtype = "float64" })
    local out = ember.flex_attention(q, q, q, { score_mod = function(s, b, h, qi, ki) return s - 0.5 * ember.abs(qi - ki) end })
    local s = ember.matmul(q, q:transpose(-2, -1)) / math.sqrt(2)
    local i = ember.arange(1, 5, { dtype = "float64" })
    s = s - 0.5 * (i:view(4, 1) - i:view(1, 4)):abs()
    assert.is_true((out - ember.matmul(ember.softmax(s, -1), q)):abs():max():item() < 1e-12)
  end)
end)

describe("a variant dropped in a plugin folder", function()
  local dir = tmpdir()
  local function write(name, text)
    local f = assert(io.open(dir .. "/" .. name, "w"))
    f:write(text)
    f:close()
    return dir .. "/" .. name
  end

  it("reading #ctx.tbl is refused where it is defined, naming the file and line (it was 0: NaN at the first call)",
    function()
      local path = write("tbl_len_refused.lua", [[
return {
  name = "tbl_len_refused",
  params = function(options, dims) return { {name = "tbl", tensor = ember.ones(9, dims.heads), learned = true} } end,
  score = function(s, b, h, q, k, ctx) return s - ember.abs(q - k) / #ctx.tbl end,
}
]])
      local ok, err = pcall(ember.load_plugin, path)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(
        "tbl_len_refused.lua:4: attention variant 'tbl_len_refused': captured tensor 'tbl': #tbl", 1, true),
        tostring(err))
    end)

  it("math.random in a variant's score is refused where it is defined", function()
    local path = write("random_refused.lua", [[
return {
  name = "random_refused",
  score = function(s, b, h, q, k, ctx)
    return s + math.random()
  end,
}
]])
    local ok, err = pcall(ember.load_plugin, path)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find(
      "random_refused.lua:4: attention variant 'random_refused': math.random cannot be traced", 1, true), tostring(err))
  end)

  it("a learned relative table read with the option that sized it trains (gradient into the table)", function()
    local path = write("learned_relbias.lua", [[
return {
  name = "learned_relbias",
  options = { {name = "max_distance", type = "int", default = 8, min = 1} },
  params = function(options, dims)
    return { {name = "tbl", tensor = ember.zeros(2 * options.max_distance + 1, dims.heads), learned = true} }
  end,
  score = function(s, b, h, q, k, ctx)
    local K = ctx.options.max_distance
    return s + ctx.tbl[ember.clamp(k - q, -K, K) + K + 1][h]
  end,
}
]])
    ember.load_plugin(path)
    local mha = ember.nn.MultiHeadAttention(16, 2, { attention = "learned_relbias", max_distance = 3 })
    mha(ember.randn(2, 6, 16)):pow(2):sum():backward()
    local g = mha.attn.tbl.grad
    assert.are.same({ 7, 2 }, g.shape)
    assert.is_true(g:abs():sum():item() > 0)
  end)
end)

describe("ember.create_block_mask's BLOCK_SIZE pair (Q_BLOCK_SIZE, KV_BLOCK_SIZE)", function()
  local function causal(b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) end

  -- the block kinds computed element by element from the dense mask
  local function kinds_of(dense, Q, K, qb, kb)
    local nq, nk = (Q + qb - 1) // qb, (K + kb - 1) // kb
    local out = {}
    for i = 1, nq do
      out[i] = {}
      for j = 1, nk do
        local any, all = false, true
        for qi = (i - 1) * qb + 1, math.min(i * qb, Q) do
          for kj = (j - 1) * kb + 1, j * kb do
            local v = kj <= K and dense[qi][kj]
            any, all = any or v, all and v
          end
        end
        out[i][j] = any and (all and 2 or 1) or 0
      end
    end
    return out
  end

  -- was: 'BLOCK_SIZE must be a positive integer, got table: 0x...'
  it("makes Q_LEN/q x KV_LEN/k blocks, named or positional as PyTorch's", function()
    local dense = ember.flex.create_mask(causal, nil, nil, 7, 9)[1][1]:totable()
    for _, bs in ipairs { { 2, 4 }, { 3, 2 }, { 7, 9 } } do
      local bm = ember.create_block_mask(causal, nil, nil, 7, 9, { BLOCK_SIZE = bs })
      assert.are.same(kinds_of(dense, 7, 9, bs[1], bs[2]), bm.kinds[1][1]:totable())
      assert.are.same({ bs[1], bs[2] }, { bm.Q_BLOCK_SIZE, bm.KV_BLOCK_SIZE })
    end
    local bm = ember.create_block_mask(causal, nil, nil, 7, 9, "cpu", { 2, 4 })
    assert.are.same({ 4, 3 }, { bm.kinds.shape[3], bm.kinds.shape[4] })
    assert.truthy(tostring(bm):find("block_size=(2, 4)", 1, true))
    assert.are.equal(4, ember.create_block_mask(causal, nil, nil, 7, 9, { BLOCK_SIZE = 4 }).KV_BLOCK_SIZE)
    -- the flex attention with it is the dense mask's
    local q, k, v = ember.randn(1, 2, 7, 4, { dtype = "float64" }), ember.randn(1, 2, 9, 4, { dtype = "float64" }),
      ember.randn(1, 2, 9, 4, { dtype = "float64" })
    local want = ember.scaled_dot_product_attention(q, k, v, { attn_mask = ember.flex.create_mask(causal, nil, nil, 7, 9) })
    assert.is_true(ember.allclose(ember.flex_attention(q, k, v, { block_mask = bm }), want, 1e-10, 1e-12))
  end)

  it("refuses a pair that is not two positive integers, at the caller's line", function()
    raises_here(function() ember.create_block_mask(causal, nil, nil, 8, 8, { BLOCK_SIZE = { 2, 4, 8 } }) end,
      "ember.create_block_mask: BLOCK_SIZE must be a positive integer or a pair {Q_BLOCK_SIZE, KV_BLOCK_SIZE}, got a table of 3")
    raises_here(function() ember.create_block_mask(causal, nil, nil, 8, 8, { BLOCK_SIZE = { 2, 0 } }) end,
      "ember.create_block_mask: BLOCK_SIZE[2] (KV_BLOCK_SIZE) must be positive, got 0")
    raises_here(function() ember.create_block_mask(causal, nil, nil, 8, 8, { BLOCK_SIZE = { 2.5, 2 } }) end,
      "ember.create_block_mask: BLOCK_SIZE[1] (Q_BLOCK_SIZE) must be a positive integer, got 2.5")
  end)
end)

describe("PyTorch's _compile and kernel_options", function()
  -- was: only 'unknown option' and the list
  it("are refused saying why they have no meaning here", function()
    local function causal(b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) end
    raises_here(function() ember.create_block_mask(causal, nil, nil, 8, 8, { _compile = true }) end,
      "ember.create_block_mask: unknown option '_compile': PyTorch's _compile compiles the mask's evaluation; "
        .. "here mask_mod is traced once and cached, leave it out")
    local q = ember.randn(1, 1, 8, 4)
    raises_here(function() ember.flex_attention(q, q, q, { kernel_options = {} }) end,
      "ember.flex_attention: unknown option 'kernel_options': PyTorch's kernel_options tune its Triton kernel")
  end)
end)

describe("help(ember.flex)", function()
  -- was: 'help(x): x is a function, class or name ...' though ember.flex_attention's entry says "See `ember.flex`"
  local doc = require "ember._doc"
  it("finds the module's entry and its functions, by value and by the name a user writes", function()
    for _, v in ipairs { ember.flex, "ember.flex", ember.flex.and_masks, "ember.flex.and_masks", "ember.flex.create_mask" } do
      local text = doc.lookup(v)
      assert.is_string(text, tostring(v))
    end
    assert.matches("FlexAttention's API", (doc.lookup("ember.flex")))
    assert.matches("PyTorch's `and_masks`", (doc.lookup(ember.flex.and_masks)) or "")
  end)
end)
