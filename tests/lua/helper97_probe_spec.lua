-- helper97's probe: a FlexAttention user writing attention variants in Lua
-- (ember.flex_attention's score_mod / block_mask, and variants dropped in
-- a plugin folder).
--
-- Numbers: variants the attention-gym catalogue (flex_gym_spec) does not
-- hold, against PyTorch 1.13 written out densely in float64
-- (tests/gen_helper97_fixtures.py writes tests/fixtures/helper97_flex.lua):
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
local ember = require "ember"
local parity = require "tests.lua.helpers.parity"
local tmpdir = require "tests.lua.helpers.tmpdir"

local T, check = parity.T, parity.check
local fx = dofile("tests/fixtures/helper97_flex.lua")
local D = { dtype = "float64" }
local HERE = "helper97_probe_spec.lua:"

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

describe("helper97: Lua FlexAttention variants against PyTorch (float64, dense)", function()
  for _, c in ipairs(fx.cases) do
    it(c.name .. ": out and the gradients of q, k, v" .. (c.learned and " and the learned tensor" or ""), function()
      local out, dq, dk, dv, dt = run(c, "float64")
      check("out", out, T(c.out), 1e-10)
      check("dq", dq, T(c.dq), 1e-10)
      check("dk", dk, T(c.dk), 1e-10)
      check("dv", dv, T(c.dv), 1e-10)
      if c.learned then check("dlearned", dt, T(c.dlearned), 1e-10) end
    end)
    it(c.name .. " in float32, near the same numbers", function()
      local out, dq, dk, dv, dt = run(c, "float32")
      check("out", out, T(c.out), 1e-4)
      check("dq", dq, T(c.dq), 1e-4)
      check("dk", dk, T(c.dk), 1e-4)
      check("dv", dv, T(c.dv), 1e-4)
      if c.learned then check("dlearned", dt, T(c.dlearned), 1e-4) end
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

describe("helper97: what a mod cannot do with a captured tensor is named at its line", function()
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

describe("helper97: a variant dropped in a plugin folder", function()
  local dir = tmpdir()
  local function write(name, text)
    local f = assert(io.open(dir .. "/" .. name, "w"))
    f:write(text)
    f:close()
    return dir .. "/" .. name
  end

  it("reading #ctx.tbl is refused where it is defined, naming the file and line (it was 0: NaN at the first call)",
    function()
      local path = write("lenbug97.lua", [[
return {
  name = "lenbug97",
  params = function(options, dims) return { {name = "tbl", tensor = ember.ones(9, dims.heads), learned = true} } end,
  score = function(s, b, h, q, k, ctx) return s - ember.abs(q - k) / #ctx.tbl end,
}
]])
      local ok, err = pcall(ember.load_plugin, path)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find("lenbug97.lua:4: attention variant 'lenbug97': captured tensor 'tbl': #tbl",
        1, true), tostring(err))
    end)

  it("math.random in a variant's score is refused where it is defined", function()
    local path = write("rnd97.lua", [[
return {
  name = "rnd97",
  score = function(s, b, h, q, k, ctx)
    return s + math.random()
  end,
}
]])
    local ok, err = pcall(ember.load_plugin, path)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("rnd97.lua:4: attention variant 'rnd97': math.random cannot be traced", 1, true),
      tostring(err))
  end)

  it("a learned relative table read with the option that sized it trains (gradient into the table)", function()
    local path = write("relbias97.lua", [[
return {
  name = "relbias97",
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
    local mha = ember.nn.MultiHeadAttention(16, 2, { attention = "relbias97", max_distance = 3 })
    mha(ember.randn(2, 6, 16)):pow(2):sum():backward()
    local g = mha.attn.tbl.grad
    assert.are.same({ 7, 2 }, g.shape)
    assert.is_true(g:abs():sum():item() > 0)
  end)
end)
