-- Every attention variant as a researcher uses it, against PyTorch
-- references written out by hand from each variant's definition
-- (tests/gen_attention_variants_parity_fixtures.py -> tests/fixtures/attention_variants_parity.lua,
-- float64): cross attention, one-token decoding, lengths past a tile, head
-- dims 8/24/80, grouped-query heads, bottom-right causal with Lq < Lk and
-- Lq > Lk, rows that see no key; then bfloat16, KV-cached decoding, a Lua
-- variant's backward after its Attention is gone, and the options' errors
-- (attention_options, an option out of its range).
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local fx = dofile("tests/fixtures/attention_variants_parity.lua")

local function T(spec, dtype) return parity.T(spec, dtype or "float64") end

-- the fixture's variant as ember.Attention (or ember.flex_attention)
local function run(c, dtype, kernel)
  local q = T(c.q, dtype):requires_grad_()
  local k = T(c.k, dtype):requires_grad_()
  local v = T(c.v, dtype):requires_grad_()
  local H, Hkv, Lq, Lk, d = q.shape[2], k.shape[2], q.shape[3], k.shape[3], q.shape[4]
  local tables, out = {}, nil
  if c.variant == "flex" then
    local bias = T(c.tables.bias, dtype):requires_grad_()
    tables.bias = bias
    local bm = ember.create_block_mask(function(b, h, qi, ki) return ki:le(qi + 2) end, nil, nil, Lq, Lk)
    out = ember.flex_attention(q, k, v, { score_mod = function(s, b, h, qi, ki) return s + bias[h][qi][ki] end,
      block_mask = bm, enable_gqa = H ~= Hkv or nil })
  else
    local spec = { attention = c.variant, heads = H, head_dim = d, v_head_dim = v.shape[4], dtype = dtype or "float64" }
    for n, x in pairs(c.options) do spec[n] = x end
    if kernel then spec.kernel = kernel end
    local att = ember.Attention(spec)
    for n, t in pairs(c.tables) do
      local p = att._reg[n]
      assert(p, c.name .. ": no table " .. n)
      ember.no_grad(function() p:copy_(T(t, dtype)) end)
      tables[n] = p
    end
    local o = { causal = c.causal or nil }
    if c.key_padding_mask then o.key_padding_mask = T(c.key_padding_mask) end
    if c.attn_mask then o.attn_mask = T(c.attn_mask, c.attn_mask.dtype or dtype) end
    o.scale = c.scale
    out = att(q, k, v, o)
  end
  (out:double() * T(c.R)):sum():backward()
  return out, q.grad, k.grad, v.grad, tables
end

describe("every variant against its PyTorch definition (float64)", function()
  for _, c in ipairs(fx.cases) do
    it(c.name, function()
      local out, dq, dk, dv, tables = run(c)
      parity.check(c.name .. " out", out, T(c.out), 1e-9)
      parity.check(c.name .. " dq", dq, T(c.dq), 1e-8)
      parity.check(c.name .. " dk", dk, T(c.dk), 1e-8)
      parity.check(c.name .. " dv", dv, T(c.dv), 1e-8)
      for n, g in pairs(c.dtables) do parity.check(c.name .. " d" .. n, tables[n].grad, T(g), 1e-8) end
    end)
  end
end)

describe("every variant in bfloat16 against the float64 definition", function()
  -- the fixtures' inputs lie on a 1/64 grid, which bfloat16 holds (|x| < 4):
  -- what differs is the kernels' rounding (plugins/README.md's bounds: the
  -- output within 2^-8 max|v| of float32, gradients within 2^-5)
  for _, c in ipairs(fx.cases) do
    if c.variant ~= "linear" then
      it(c.name, function()
        local out, dq, dk, dv, tables = run(c, "bfloat16")
        assert.are.equal("bfloat16", out.dtype)
        parity.check(c.name .. " out", out, T(c.out), 2 ^ -5)
        parity.check(c.name .. " dq", dq, T(c.dq), 2 ^ -4)
        parity.check(c.name .. " dk", dk, T(c.dk), 2 ^ -4)
        parity.check(c.name .. " dv", dv, T(c.dv), 2 ^ -4)
        for n, g in pairs(c.dtables) do parity.check(c.name .. " d" .. n, tables[n].grad, T(g), 2 ^ -4) end
      end)
    end
  end
  it("linear says it takes float32 or float64", function()
    local c = parity.case(fx, "linear/self7")
    parity.raises_here(function() local r = run(c, "bfloat16"); return r end, "must share a float32 or float64 dtype")
  end)
end)

describe("relpos t5 and t5_lua refuse a max_distance inside the exact buckets", function()
  -- T5's log-spaced buckets run from max_exact (num_buckets / 4 bidirectional,
  -- / 2 otherwise) to max_distance: at or below max_exact the log ratio is 0 or
  -- negative and the buckets past the exact ones fall outside the table (the
  -- kernel's "index -9.2e18 out of range of 'bias table'" at the first call;
  -- t5_lua computed garbage)
  for _, name in ipairs { "relpos", "t5_lua" } do
    for _, c in ipairs { { 16, 4, true }, { 16, 2, true }, { 8, 4, false }, { 8, 1, false } } do
      it(("%s num_buckets=%d max_distance=%d bidirectional=%s"):format(name, c[1], c[2], tostring(c[3])), function()
        local spec = { attention = name, heads = 1, head_dim = 4, num_buckets = c[1], max_distance = c[2],
          bidirectional = c[3] }
        if name == "relpos" then spec.mode = "t5" end
        parity.raises_here(function() local a = ember.Attention(spec); return a end, "max_distance (" .. c[2] .. ") must exceed")
      end)
    end
    it(name .. ": the smallest max_distance past the exact buckets works", function()
      local spec = { attention = name, heads = 1, head_dim = 4, num_buckets = 16, max_distance = 5 }
      if name == "relpos" then spec.mode = "t5" end
      local a = ember.Attention(spec)
      local q = ember.randn(1, 1, 40, 4)
      assert.is_false(a(q, q, q):isnan():any():item())
    end)
  end
end)

describe("KV-cached decoding equals the whole causal sequence, for every variant", function()
  local cfgs = {
    { attention = "standard" }, { attention = "local", mode = "sliding", window_left = 2, window_right = 3 },
    { attention = "local", mode = "block", block_size = 3, local_blocks = 1, global_tokens = 1 },
    { attention = "relpos", mode = "shaw", max_relative_position = 3 },
    { attention = "relpos", mode = "t5", num_buckets = 8, max_distance = 20, bidirectional = false },
    { attention = "relpos", mode = "alibi" }, { attention = "linear" }, { attention = "softcap", cap = 1.5 },
    { attention = "sinks" }, { attention = "sliding_sinks", window_left = 2, window_right = 0, sinks = 2 },
    { attention = "example_lua", max_distance = 3 }, { attention = "t5_lua", num_buckets = 8, max_distance = 20 },
  }
  for _, kv in ipairs { 4, 1 } do
    for _, cfg in ipairs(cfgs) do
      it(("%s %s, kv_heads=%d"):format(cfg.attention, cfg.mode or "", kv), function()
        ember.manual_seed(7)
        local spec = { d_model = 16, heads = 4, kv_heads = kv, dtype = "float64" }
        for k, v in pairs(cfg) do spec[k] = v end
        local m = nn.MultiHeadAttention(spec)
        ember.no_grad(function()
          for n, p in pairs(m:named_parameters()) do if n:match("^attn%.") then p:copy_(ember.randn(p.shape):double()) end end
        end)
        m:eval()
        local x = ember.randn(2, 9, 16):double()
        local full = m(x, x, x, { causal = true })
        local cache, outs = {}, {}
        outs[1] = m:forward_cached(x:narrow(2, 1, 4), cache)
        for t = 5, 9 do outs[#outs + 1] = m:forward_cached(x:narrow(2, t, 1), cache) end
        parity.check("cached", ember.cat(outs, 2), full, 1e-12)
      end)
    end
  end
end)

describe("the backward of a Lua variant outlives its Attention", function()
  -- the autograd node ran the traced programs that the Attention's C object
  -- owned: collecting the module (or swapping its variant) between forward
  -- and backward freed them, and the backward read freed memory (a segfault,
  -- or "out of memory for 44907697156 bytes of tile scratch")
  for _, spec in ipairs { { attention = "softcap", cap = 1.5 }, { attention = "example_lua", max_distance = 3 },
    { attention = "sinks" }, { attention = "sliding_sinks", window_left = 2, window_right = 0, sinks = 1 } } do
    for _, dtype in ipairs { "float64", "bfloat16" } do
      it(spec.attention .. " " .. dtype, function()
        local function grads(drop)
          ember.manual_seed(3)
          local s = { heads = 4, head_dim = 8, dtype = dtype }
          for k, v in pairs(spec) do s[k] = v end
          local a = ember.Attention(s)
          ember.no_grad(function() for _, p in pairs(a:parameters()) do p:copy_(ember.randn(p.shape)) end end)
          local q = ember.randn(2, 4, 6, 8):to(dtype):requires_grad_()
          local k = ember.randn(2, 2, 6, 8):to(dtype):requires_grad_()
          local kpm = ember.zeros(2, 6):bool()
          kpm[2]:fill_(true)
          local out = a(q, k, k, { causal = true, key_padding_mask = kpm })
          if drop then
            a = nil
            collectgarbage()
            collectgarbage()
            for _ = 1, 5 do -- reuse the freed memory
              ember.Attention(s)(ember.randn(1, 4, 3, 8):to(dtype), ember.randn(1, 4, 3, 8):to(dtype),
                ember.randn(1, 4, 3, 8):to(dtype))
            end
          end
          out:double():sum():backward()
          return q.grad:double(), k.grad:double(), a
        end
        local q1, k1 = grads(true)
        local q2, k2 = grads(false)
        assert.are.equal(0, (q1 - q2):abs():max():item())
        assert.are.equal(0, (k1 - k2):abs():max():item())
      end)
    end
  end
  it("nn.MultiHeadAttention:set_attention between forward and backward", function()
    ember.manual_seed(4)
    local m = nn.MultiHeadAttention { d_model = 16, heads = 2, attention = "softcap", cap = 2, dtype = "float64" }
    local x = ember.randn(1, 5, 16):double():requires_grad_()
    local out = m(x)
    local want = ember.autograd.grad({ out:sum() }, { x }, { retain_graph = true })[1]
    m:set_attention("standard")
    collectgarbage()
    collectgarbage()
    out:sum():backward()
    parity.check("dx", x.grad, want, 1e-12)
  end)
end)

describe("attention_options hold the variant's options only", function()
  -- they were merged over the layer's MultiHeadAttention spec, so
  -- attention_options = {heads = 4} made a 2-head layer's attention run 4
  -- heads, {d_model = 8} an attention 8 wide in a 16-wide layer, {dropout}
  -- replaced the layer's, all without a word
  it("nn.TransformerEncoderLayer refuses heads, d_model, dropout", function()
    for _, k in ipairs { "heads", "d_model", "dropout", "kv_heads", "causal" } do
      parity.raises_here(function()
        local l = nn.TransformerEncoderLayer(16, 2, { dim_feedforward = 32, attention = "local",
          attention_options = { [k] = 4, window_left = 1 } })
        return l
      end, "attention_options." .. k .. " is the attention module's own option, not one of attention 'local'")
    end
  end)
  it("nn.TransformerDecoderLayer names cross_attention_options", function()
    parity.raises_here(function()
      local l = nn.TransformerDecoderLayer(16, 2, { dim_feedforward = 32, cross_attention = "relpos",
        cross_attention_options = { dropout = 0.5 } })
      return l
    end, "cross_attention_options.dropout is the attention module's own option, not one of attention 'relpos'")
  end)
  it("Llama's config.attention_options", function()
    parity.raises_here(function()
      local m = require("ember.models").Llama { vocab_size = 10, hidden_size = 16, intermediate_size = 32,
        num_hidden_layers = 1, num_attention_heads = 2, attention = "local", attention_options = { kv_heads = 1 } }
      return m
    end, "config.attention_options.kv_heads is the attention module's own option")
  end)
  it("the variant's own options still reach it", function()
    local l = nn.TransformerEncoderLayer(16, 2, { dim_feedforward = 32, attention = "local",
      attention_options = { window_left = 1, window_right = 0 } })
    assert.are.equal(2, l.self_attn.heads)
    assert.are.equal(1, l.self_attn.attn:options().window_left)
    assert.are.equal(0, l.self_attn.attn:options().window_right)
  end)
end)

describe("an attention option out of its range", function()
  -- A Lua variant's option with only a `min` (as plugins/README.md's
  -- softcap2) said "must be in [1e-06, 1e+300], got 0 ()": the stand-in
  -- for the missing bound and the empty help were printed.
  it("names the one bound it has, and no empty help", function()
    ember.attention_variant { name = "capped_min_only",
      options = { { name = "cap", type = "float", default = 30, min = 1e-6 } },
      score = function(s, b, h, q, k, ctx) return ctx.options.cap * ember.tanh(s / ctx.options.cap) end }
    ember.attention_variant { name = "upper_bound_only", options = { { name = "m", type = "int", default = 1, max = 5,
      help = "a multiplier" } }, score = function(s, b, h, q, k, ctx) return s * ctx.options.m end }
    local nn = require "ember.nn"
    local ok, err = pcall(nn.MultiHeadAttention, { d_model = 16, heads = 2, attention = "capped_min_only", cap = 0 })
    assert.is_false(ok)
    assert.truthy(err:find("attention 'capped_min_only': option 'cap' must be >= 1e-06, got 0", 1, true), err)
    assert.falsy(err:find("(", 1, true), err)
    ok, err = pcall(nn.MultiHeadAttention, { d_model = 16, heads = 2, attention = "upper_bound_only", m = 6 })
    assert.is_false(ok)
    assert.truthy(err:find("attention 'upper_bound_only': option 'm' must be <= 5, got 6 (a multiplier)", 1, true), err)
    -- both bounds: as before
    ok, err = pcall(nn.MultiHeadAttention, { d_model = 16, heads = 2, attention = "local", window_left = -1 })
    assert.is_false(ok)
    assert.truthy(err:find("option 'window_left' must be in [0, 1e+12], got -1 (sliding:", 1, true), err)
  end)
end)
