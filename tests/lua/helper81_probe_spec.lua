-- Probes of attention variants and ember.flex_attention as a FlexAttention
-- user writes them (helper-81): what broke, kept fixed.
local ember = require "ember"

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
      assert.matches("helper81_probe_spec%.lua:%d+: a traced value", err)
      assert.matches("used after its function returned", err)
    end
  end)

  -- One kept from a variant's trace and used in another variant's made a
  -- program that read an unset register ("instruction 4 reads register -1"),
  -- or mixed two graphs' nodes: it is refused naming the variant.
  it("is refused in another variant's trace, used or returned", function()
    local saved
    ember.attention_variant { name = "h81_keep", score = function(s, b, h, q, k, ctx) saved = (q - k) * 0.7; return s end }
    local ok, err = pcall(ember.attention_variant,
      { name = "h81_use", score = function(s, b, h, q, k, ctx) return s + saved end })
    assert.is_false(ok)
    assert.matches("attention variant 'h81_use': a traced value", err, 1, true)
    ok, err = pcall(ember.attention_variant,
      { name = "h81_ret", score = function(s, b, h, q, k, ctx) return saved end })
    assert.is_false(ok)
    assert.matches("attention variant 'h81_ret': a traced value", err, 1, true)
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
