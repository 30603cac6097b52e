-- helper-83's probe: the attention modules and ember.flex as a PyTorch
-- 1.13 / 2.x user ports code to them. The numerics come from
-- tests/fixtures/helper83_attention.lua (tests/gen_helper83_fixtures.py,
-- torch.nn.MultiheadAttention and the Transformer layers in float64).
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local fx = dofile("tests/fixtures/helper83_attention.lua")
local T = function(spec) return parity.T(spec, "float64") end
local raises_here, error_of = parity.raises_here, parity.error_of

local function case(name) return parity.case(fx, name) end
local function dims(t)
  local d = {}
  for i = 1, t.ndim do d[i] = t.shape[i] end
  return d
end

local function load(m, c)
  local sd = {}
  for k, v in pairs(c.state) do sd[k] = T(v) end
  m:load_state_dict(sd)
  return m
end

local function leaves(c)
  local t = {}
  for i, x in ipairs(c.inputs) do t[i] = T(x):requires_grad_() end
  return t
end

-- out, [weights], gradients of sum(out * R) against the case
local function check(c, out, w, xs)
  parity.check(c.name .. " out", out, T(c.out), 1e-12)
  if c.weights then parity.check(c.name .. " weights", w, T(c.weights), 1e-12) end
  (out * T(c.R)):sum():backward()
  for i, g in ipairs(c.grads) do parity.check(c.name .. " grad " .. i, xs[i].grad, T(g), 1e-10) end
end

describe("nn.MultiHeadAttention's average_attn_weights", function()
  -- was: refused as an unknown option ('the weights come per head')
  it("true averages the weights over the heads, as torch.nn.MultiheadAttention's default", function()
    local c = case("mha_average")
    local m = load(nn.MultiHeadAttention(8, 2, { dtype = "float64" }), c)
    local xs = leaves(c)
    local out, w = m(xs[1], xs[2], { need_weights = true, average_attn_weights = true })
    assert.are.same({ 2, 3, 4 }, dims(w))
    check(c, out, w, xs)
  end)

  it("false (the default) keeps them per head; unbatched averaged weights are [Lq, Lk]", function()
    local m = nn.MultiHeadAttention(8, 2)
    local x = ember.randn(2, 3, 8)
    local _, per = m(x, { need_weights = true, average_attn_weights = false })
    local _, default = m(x, { need_weights = true })
    assert.are.same({ 2, 2, 3, 3 }, dims(per))
    assert.is_true(ember.equal(per, default))
    local _, avg = m(x, { need_weights = true, average_attn_weights = true })
    assert.is_true(ember.allclose(avg, per:mean(2), 1e-6, 1e-7))
    local _, one = m(x[1], { need_weights = true, average_attn_weights = true })
    assert.are.same({ 3, 3 }, dims(one))
    raises_here(function() m(x, { need_weights = true, average_attn_weights = 1 }) end,
      "MultiHeadAttention.forward: average_attn_weights must be a boolean, got number")
  end)
end)

describe("nn.MultiheadAttention (PyTorch's spelling) with a float key_padding_mask", function()
  -- was: 'key_padding_mask must be a bool tensor'; PyTorch adds a float one to the scores
  it("adds it to the scores, [L, B, E]", function()
    local c = case("mha_float_kpm")
    local m = load(nn.MultiheadAttention(8, 2, { dtype = "float64" }), c)
    local xs = leaves(c)
    local out, w = m(xs[1], xs[2], xs[2], { key_padding_mask = T(c.key_padding_mask) })
    check(c, out, w, xs)
  end)

  it("with a bool or float attn_mask: both added, as PyTorch 2.x's", function()
    local m = nn.MultiheadAttention(8, 2, { dtype = "float64" })
    local q, kv = ember.randn(3, 2, 8, { dtype = "float64" }), ember.randn(4, 2, 8, { dtype = "float64" })
    local kpm = ember.randn(2, 4, { dtype = "float64" })
    local block = ember.zeros(3, 4, { dtype = "bool" })
    block[1][2] = true
    local float = ember.zeros(3, 4, { dtype = "float64" }):masked_fill(block, -math.huge)
    local joined = float:view(1, 1, 3, 4) + kpm:view(2, 1, 1, 4) -- [B, 1, L, S]
    local want, ww = m(q, kv, kv, { attn_mask = joined:expand(2, 2, 3, 4):reshape(4, 3, 4) })
    for _, am in ipairs { block, float } do
      local got, w = m(q, kv, kv, { key_padding_mask = kpm, attn_mask = am })
      assert.is_true(ember.allclose(got, want, 1e-12, 1e-12))
      assert.is_true(ember.allclose(w, ww, 1e-12, 1e-12))
    end
  end)

  it("refuses one of the wrong shape, at the caller's line", function()
    local m = nn.MultiheadAttention(8, 2)
    local x = ember.randn(3, 2, 8)
    raises_here(function() m(x, x, x, { key_padding_mask = ember.zeros(2, 4) }) end,
      "MultiheadAttention.forward: key_padding_mask must be [B=2, S=3], bool (true = padding) or float")
  end)
end)

describe("the Transformer layers with PyTorch's 3-d masks [B * nhead, L, S]", function()
  -- was: 'the attention mask must be [Lq, Lk] or broadcast to [B, H, Lq, Lk]'
  it("TransformerEncoderLayer(batch_first = false): src_mask [B * nhead, L, L]", function()
    local c = case("enc_3d_mask")
    local enc = load(nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, batch_first = false,
      dtype = "float64" }), c)
    local xs = leaves(c)
    check(c, enc(xs[1], { src_mask = T(c.src_mask), src_key_padding_mask = T(c.src_key_padding_mask) }), nil, xs)
  end)

  it("TransformerDecoderLayer: tgt_mask and memory_mask [B * nhead, T, *]", function()
    local c = case("dec_3d_masks")
    local dec = load(nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, dtype = "float64" }), c)
    local xs = leaves(c)
    check(c, dec(xs[1], xs[2], { tgt_mask = T(c.tgt_mask), memory_mask = T(c.memory_mask) }), nil, xs)
  end)
end)

describe("TransformerDecoderLayer with PyTorch 2.x's tgt_is_causal and memory_is_causal", function()
  local function dec_of(c)
    return load(nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, dtype = "float64" }), c)
  end

  -- was: "unknown option 'tgt_is_causal'"
  it("tgt_is_causal = false is PyTorch's default: no causal mask", function()
    local c = case("dec_plain")
    local xs = leaves(c)
    check(c, dec_of(c)(xs[1], xs[2], { tgt_is_causal = false }), nil, xs)
  end)

  it("tgt_is_causal = true is the square subsequent mask; positional as PyTorch's, in a TransformerDecoder", function()
    local c = case("dec_causal")
    local xs = leaves(c)
    check(c, dec_of(c)(xs[1], xs[2], { tgt_is_causal = true }), nil, xs)
    local layer = dec_of(c)
    local stack = nn.TransformerDecoder(layer, 1)
    local y = stack(T(c.inputs[1]), T(c.inputs[2]), nil, nil, nil, nil, true)
    parity.check("decoder stack", y, T(c.out), 1e-12)
  end)

  it("refuses causal with tgt_is_causal, and memory_is_causal without memory_mask", function()
    local dec = nn.TransformerDecoderLayer(8, 2, { dropout = 0 })
    local x, mem = ember.randn(2, 3, 8), ember.randn(2, 4, 8)
    raises_here(function() dec(x, mem, { causal = true, tgt_is_causal = true }) end,
      "TransformerDecoderLayer.forward: give causal or tgt_is_causal (PyTorch's name), not both")
    raises_here(function() dec(x, mem, { memory_is_causal = true }) end,
      "TransformerDecoderLayer.forward: memory_is_causal is a hint about memory_mask: give the mask too")
    raises_here(function() dec(x, mem, { tgt_is_causal = 1 }) end,
      "TransformerDecoderLayer.forward: tgt_is_causal must be a boolean, got number")
    -- a hint with its mask: the mask decides
    local mm = ember.randn(3, 4)
    assert.is_true(ember.equal(dec(x, mem, { memory_mask = mm, memory_is_causal = true }), dec(x, mem, { memory_mask = mm })))
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
