-- helper-91's probe: every attention variant as a researcher uses it,
-- against PyTorch references written out by hand from each variant's
-- definition (tests/gen_helper91_fixtures.py -> tests/fixtures/helper91_attention.lua,
-- float64): cross attention, one-token decoding, lengths past a tile, head
-- dims 8/24/80, grouped-query heads, bottom-right causal with Lq < Lk and
-- Lq > Lk, rows that see no key; then bfloat16, KV-cached decoding and the
-- options' errors.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local fx = dofile("tests/fixtures/helper91_attention.lua")

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
    local spec = { attention = c.variant, heads = H, head_dim = d, dtype = dtype or "float64" }
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
