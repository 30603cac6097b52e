-- Frictions a new user hit with nn.MultiHeadAttention and the decoder layer
-- (issue 26 item 7): unbatched input as PyTorch, mask errors that name the
-- module the user called, and a printed decoder layer that says what its
-- forward does.
local ember = require "ember"
local nn = require "ember.nn"

local function maxdiff(a, b) return (a - b):abs():max():item() end

-- The message of a failing call, and the line it was raised at.
local message = require("tests.lua.helpers.parity").must_fail

describe("nn.MultiHeadAttention, unbatched input [L, E]", function()
  local m
  before_each(function()
    ember.manual_seed(5)
    m = nn.MultiHeadAttention(8, 2, { dtype = "float64", kdim = 6, vdim = 5 }):eval()
  end)

  it("equals the batched call with B = 1, weights [H, L, S]", function()
    local q = ember.randn({ 3, 8 }, { dtype = "float64" })
    local k = ember.randn({ 4, 6 }, { dtype = "float64" })
    local v = ember.randn({ 4, 5 }, { dtype = "float64" })
    local y, w = m(q, k, v, { need_weights = true })
    assert.are.same({ 3, 8 }, y.shape)
    assert.are.same({ 2, 3, 4 }, w.shape)
    local yb, wb = m(q:unsqueeze(1), k:unsqueeze(1), v:unsqueeze(1), { need_weights = true })
    assert.are.equal(0, maxdiff(y, yb:squeeze(1)))
    assert.are.equal(0, maxdiff(w, wb:squeeze(1)))
  end)

  it("takes key_padding_mask [S] and attn_mask [L, S]", function()
    local q = ember.randn({ 3, 8 }, { dtype = "float64" })
    local k = ember.randn({ 4, 6 }, { dtype = "float64" })
    local v = ember.randn({ 4, 5 }, { dtype = "float64" })
    local pad = ember.tensor({ false, false, true, true })
    local y = m(q, k, v, { key_padding_mask = pad })
    -- the padded keys change nothing: same as attending over the first two
    assert.is_true(maxdiff(y, m(q, k:narrow(1, 1, 2), v:narrow(1, 1, 2))) < 1e-12)
    local bias = ember.randn({ 3, 4 }, { dtype = "float64" })
    local yb = m(q:unsqueeze(1), k:unsqueeze(1), v:unsqueeze(1), { attn_mask = bias })
    assert.are.equal(0, maxdiff(m(q, k, v, { attn_mask = bias }), yb:squeeze(1)))
  end)

  it("self-attention [L, E], and a mixed call is an error naming the module", function()
    local s = nn.MultiHeadAttention(8, 2, { dtype = "float64" }):eval()
    local x = ember.randn({ 5, 8 }, { dtype = "float64" })
    assert.are.equal(0, maxdiff(s(x, { causal = true }), s(x:unsqueeze(1), { causal = true }):squeeze(1)))
    local msg = message(function() return s(x, ember.randn({ 1, 5, 8 }, { dtype = "float64" })) end)
    assert.truthy(msg:find("MultiHeadAttention.forward: an unbatched query", 1, true), msg)
    msg = message(function() return s(x, { key_padding_mask = ember.zeros({ 1, 5 }, "bool") }) end)
    assert.truthy(msg:find("MultiHeadAttention.forward: with an unbatched query key_padding_mask must be", 1, true), msg)
  end)
end)

describe("nn.MultiHeadAttention names itself in mask errors", function()
  local m, x
  before_each(function()
    m = nn.MultiHeadAttention(8, 2)
    x = ember.randn(2, 3, 8)
  end)

  local cases = {
    { "a key_padding_mask of the wrong length", function(m, x) return m(x, { key_padding_mask = ember.zeros({ 2, 4 }, "bool") }) end,
      "key_padding_mask must be a bool tensor [B=2, Lk=3] (true = padding)" },
    { "a float key_padding_mask", function(m, x) return m(x, { key_padding_mask = ember.zeros(2, 3) }) end,
      "key_padding_mask must be a bool tensor" },
    { "an int64 attn_mask", function(m, x) return m(x, { attn_mask = ember.zeros({ 3, 3 }, "int64") }) end,
      "attn_mask must be a float mask of the inputs' dtype float32" },
    { "a float64 attn_mask on a float32 module", function(m, x) return m(x, { attn_mask = ember.zeros({ 3, 3 }, "float64") }) end,
      "attn_mask must be a float mask of the inputs' dtype float32 (added to the scores), got float64" },
    { "an attn_mask of the wrong shape", function(m, x) return m(x, { attn_mask = ember.zeros(4, 3) }) end,
      "the attention mask must be [Lq=3, Lk=3] or broadcast to [B=2, H=2, Lq, Lk]" },
    { "an allow_mask of the wrong shape", function(m, x) return m(x, { allow_mask = ember.zeros({ 4, 3 }, "bool") }) end,
      "the attention mask must be [Lq=3, Lk=3]" },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      -- not a tail call: the error names the line of the frame that called the module, this one
      local msg = message(function() local _ = c[2](m, x) end)
      assert.truthy(msg:find("MultiHeadAttention.forward: " .. c[3], 1, true), msg)
      assert.falsy(msg:find("Attention.forward: attention", 1, true), msg)
      assert.falsy(msg:find("ember.Attention", 1, true), msg)
      assert.truthy(msg:find("mha_usability_spec.lua:", 1, true), msg)
    end)
  end

  it("a float32 attn_mask under autocast is still taken (the core casts it with the inputs)", function()
    local y = ember.autocast("bfloat16", function() return m(x, { attn_mask = ember.zeros(3, 3) }) end)
    assert.are.equal("bfloat16", y.dtype)
  end)

  it("forward_cached too", function()
    m:eval()
    local msg = message(function() return m:forward_cached(x, {}, { key_padding_mask = ember.zeros({ 2, 9 }, "bool") }) end)
    assert.truthy(msg:find("MultiHeadAttention.forward_cached: key_padding_mask must be a bool tensor", 1, true), msg)
  end)
end)

describe("a printed TransformerDecoderLayer is true to its forward", function()
  it("self_attn prints causal=true, and its forward is causal unless told otherwise", function()
    ember.manual_seed(6)
    local layer = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, cross = true, dtype = "float64" })
    layer:eval()
    local text = tostring(layer)
    assert.truthy(text:match("%(self_attn%): MultiHeadAttention%(\n[^\n]*causal=true"), text)
    assert.truthy(text:match("%(cross_attn%): MultiHeadAttention%(\n[^\n]*causal=false"), text)
    local x = ember.randn({ 2, 5, 8 }, { dtype = "float64" })
    local mem = ember.randn({ 2, 4, 8 }, { dtype = "float64" })
    local default = layer(x, mem)
    assert.are.equal(0, maxdiff(default, layer(x, mem, { causal = true })))
    assert.is_true(maxdiff(default, layer(x, mem, { causal = false })) > 1e-6)
  end)
end)
