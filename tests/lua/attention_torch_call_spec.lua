-- The attention modules and F.scaled_dot_product_attention as a PyTorch 1.13
-- / 2.x user ports code to them: sdpa's positional arguments in PyTorch's
-- order (tests/fixtures/sdpa_losses_positional.lua, tests/gen_sdpa_losses_positional_fixtures.py);
-- nn.MultiHeadAttention's average_attn_weights, nn.MultiheadAttention with a
-- float key_padding_mask, the Transformer layers with PyTorch's 3-d masks and
-- tgt_is_causal / memory_is_causal (tests/fixtures/attention_torch_call_mha.lua,
-- tests/gen_attention_torch_call_mha_fixtures.py, torch.nn.MultiheadAttention and the
-- Transformer layers in float64); MultiHeadAttention's messages for PyTorch's
-- and Hugging Face's names and masks.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local sdpa_fx = dofile("tests/fixtures/sdpa_losses_positional.lua")
local attention_fx = dofile("tests/fixtures/attention_torch_call_mha.lua")
local T = function(spec) return parity.T(spec, "float64") end
local raises_here = parity.raises_here
local F = nn.functional

-- the message of a failed call, or nil
local err_of = parity.error_of

describe("F.scaled_dot_product_attention's positional arguments (PyTorch's order)", function()
  it("(q, k, v, nil, 0, true) is causal: PyTorch's top-left mask when L ~= S", function()
    local c = parity.case(sdpa_fx, "causal_rect")
    local q, k, v = T(c.q), T(c.k), T(c.v)
    parity.check("positional is_causal", F.scaled_dot_product_attention(q, k, v, nil, 0, true), T(c.out), 1e-12)
    parity.check("ember's", ember.scaled_dot_product_attention(q, k, v, nil, 0.0, true), T(c.out), 1e-12)
    parity.check("by name", F.scaled_dot_product_attention(q, k, v, { is_causal = true }), T(c.out), 1e-12)
  end)

  it("(q, k, v, mask) and (q, k, v, mask, 0, false, scale)", function()
    local c = parity.case(sdpa_fx, "mask_scale")
    local q, k, v, mask = T(c.q), T(c.k), T(c.v), T(c.mask)
    parity.check("mask and scale", F.scaled_dot_product_attention(q, k, v, mask, 0, false, c.scale), T(c.out), 1e-12)
    parity.check("mask, then a table", F.scaled_dot_product_attention(q, k, v, mask, { scale = c.scale }), T(c.out), 1e-12)
    local plain = F.scaled_dot_product_attention(q, k, v, { attn_mask = mask })
    parity.check("mask alone", F.scaled_dot_product_attention(q, k, v, mask), plain, 1e-15)
  end)

  it("enable_gqa last by position, causal", function()
    local c = parity.case(sdpa_fx, "gqa_causal")
    local q, k, v = T(c.q), T(c.k), T(c.v)
    parity.check("gqa", F.scaled_dot_product_attention(q, k, v, nil, 0, true, nil, true), T(c.out), 1e-12)
  end)

  it("refuses too many arguments, a name given twice, a non-boolean flag, at the user's line", function()
    local q = ember.randn(1, 1, 2, 4)
    raises_here(function() F.scaled_dot_product_attention(q, q, q, nil, 0, false, nil, false, 1) end,
      "too many arguments (6 after query, key and value)")
    raises_here(function() F.scaled_dot_product_attention(q, q, q, nil, 0, true, { is_causal = true }) end,
      "is_causal is given twice")
    raises_here(function() F.scaled_dot_product_attention(q, q, q, nil, 0, 1) end, "is_causal must be true or false")
    raises_here(function() F.scaled_dot_product_attention(q, q, q, "causal") end, "attn_mask must be a tensor")
  end)
end)

local function case(name) return parity.case(attention_fx, name) end
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

describe("nn.MultiHeadAttention.forward with torch.nn.MultiheadAttention's call", function()
  local mha = nn.MultiHeadAttention(8, 2)
  local x = ember.randn(2, 3, 8)

  it("is_causal and attention_mask say what ember's module takes", function()
    -- was: only 'unknown option' and the list (average_attn_weights is taken
    -- now: see nn.MultiHeadAttention's average_attn_weights above)
    assert.matches("unknown option 'is_causal': PyTorch's is_causal is causal here",
      err_of(function() mha(x, x, x, { is_causal = true }) end))
    assert.matches("key_padding_mask = attention_mask:eq%(0%)",
      err_of(function() mha(x, { attention_mask = ember.ones(2, 3) }) end))
  end)

  it("a mask in PyTorch's [B * heads, Lq, Lk] layout is refused with the view that gives ember's", function()
    local mask = ember.randn(4, 3, 3)
    local e = err_of(function() mha(x, { attn_mask = mask }) end)
    assert.matches("attention_torch_call_spec.lua:%d+: .*PyTorch's %[B %* heads, Lq, Lk%] layout: give attn_mask:view%(2, 2, 3, 3%)", e)
    -- the view it names computes PyTorch's mask
    local y = mha(x, { attn_mask = mask:view(2, 2, 3, 3) })
    local torch_style = nn.MultiheadAttention(8, 2, { batch_first = true })
    torch_style:load_state_dict(mha:state_dict())
    local want = torch_style(x, x, x, { attn_mask = mask, need_weights = false })
    assert.is_true(ember.allclose(y, want, 1e-5, 1e-6))
  end)
end)

describe("MultiHeadAttention's messages for PyTorch's and Hugging Face's names", function()
  local function err_of(...)
    local ok, e = pcall(nn.MultiHeadAttention, ...)
    assert.is_false(ok)
    return tostring(e)
  end

  it("kv_heads given as a string says so (it printed as the number)", function()
    assert.matches("kv_heads must be a positive integer, got a string %(2%)", err_of(16, 4, { kv_heads = "2" }))
    assert.matches("heads %(6%) must be divisible by kv_heads %(4%)", err_of { d_model = 24, heads = 6, kv_heads = 4 })
  end)

  it("names the option ember spells otherwise", function()
    assert.matches("num_key_value_heads is kv_heads here", err_of(16, 4, { num_key_value_heads = 2 }))
    assert.matches("is_causal is causal here", err_of(16, 4, { is_causal = true }))
    assert.matches("PyTorch's embed_dim is d_model here, num_heads is heads", err_of { embed_dim = 16, num_heads = 4 })
  end)

  it("takes batch_first = true (its only layout) and refuses false", function()
    local m = nn.MultiHeadAttention(16, 4, { batch_first = true, kv_heads = 2 })
    assert.are.same({ 2, 3, 16 }, m(ember.randn(2, 3, 16)).shape)
    assert.matches("inputs are always batch first", err_of(16, 4, { batch_first = false }))
  end)
end)
