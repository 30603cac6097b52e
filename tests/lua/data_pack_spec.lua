-- ember.data.pack: variable-length sequences packed into fixed-length rows,
-- with document ids, positions and the padding mask; packed attention with
-- the `document` variant equals each document run alone.
local ember = require "ember"
local nn = require "ember.nn"

describe("data.pack", function()
  it("packs in order, closes a row when the next sequence does not fit, splits long ones", function()
    local p = ember.data.pack({ { 5, 6, 7 }, { 8, 9 }, { 4, 4, 4, 4 }, { 3, 3, 3, 3, 3, 3, 3, 3 } }, 6, { pad_id = 1 })
    assert.are.same({ { 5, 6, 7, 8, 9, 1 }, { 4, 4, 4, 4, 1, 1 }, { 3, 3, 3, 3, 3, 3 }, { 3, 3, 1, 1, 1, 1 } }, p.tokens:totable())
    assert.are.same({ { 1, 1, 1, 2, 2, 0 }, { 1, 1, 1, 1, 0, 0 }, { 1, 1, 1, 1, 1, 1 }, { 1, 1, 0, 0, 0, 0 } }, p.doc:totable())
    assert.are.same({ { 1, 2, 3, 1, 2, 1 }, { 1, 2, 3, 4, 1, 1 }, { 1, 2, 3, 4, 5, 6 }, { 1, 2, 1, 1, 1, 1 } }, p.pos:totable()) -- padding: 1, a position nn.Embedding takes
    assert.are.same({ 5, 4, 6, 2 }, p.lengths:totable())
    assert.are.same({ false, false, false, false, false, true }, p.padding:totable()[1])
    assert.are.equal("int64", p.doc.dtype)
  end)

  it("takes 1-D integer tensors as sequences too", function()
    local i64 = { dtype = "int64" }
    local p = ember.data.pack({ ember.tensor({ 5, 6, 7 }, i64), { 8, 9 }, ember.tensor({ 4, 4, 4, 4 }, i64) }, 6,
      { pad_id = 1 })
    assert.are.same({ { 5, 6, 7, 8, 9, 1 }, { 4, 4, 4, 4, 1, 1 } }, p.tokens:totable())
    assert.are.same({ { 1, 1, 1, 2, 2, 0 }, { 1, 1, 1, 1, 0, 0 } }, p.doc:totable())
    local ok, err = pcall(ember.data.pack, { ember.randn(3) }, 4, { pad_id = 0 })
    assert.is_false(ok)
    assert.matches("sequence 1 must be a 1%-D int64 tensor, got float32", tostring(err))
    ok, err = pcall(ember.data.pack, { ember.zeros(2, 2, i64) }, 4, { pad_id = 0 })
    assert.matches("shape %[2, 2%]", tostring(err))
  end)

  it("names its errors", function()
    local ok, err = pcall(ember.data.pack, { { 1, 2 } }, 4)
    assert.is_false(ok)
    assert.matches("pad_id", tostring(err))
    ok, err = pcall(ember.data.pack, { { 1, 2 } }, 0)
    assert.matches("row length", tostring(err))
    ok, err = pcall(ember.data.pack, { { 1, 2.5 } }, 2)
    assert.matches("non%-integer id", tostring(err))
    ok, err = pcall(ember.data.pack, { { 1 } }, 2, { pad = 0 })
    assert.matches("unknown option 'pad'", tostring(err))
  end)

  it("packed attention with the document variant equals each document alone", function()
    ember.manual_seed(4)
    local seqs = { { 1, 2, 3, 4, 5 }, { 6, 7, 8 }, { 9, 10, 11, 12, 13, 14, 15 } }
    local p = ember.data.pack(seqs, 9, { pad_id = 16 })
    local emb = nn.Embedding(16, 16)
    local mha = nn.MultiHeadAttention(16, 2, { attention = "document" })
    local ref = nn.MultiHeadAttention(16, 2)
    ref:load_state_dict(mha:state_dict())
    local y = mha(emb(p.tokens), { variant_inputs = { doc = p.doc }, causal = true })
    -- every document, alone and causal, through the standard attention
    local row, col = 1, 1
    for _, s in ipairs(seqs) do
      if col + #s - 1 > 9 then row, col = row + 1, 1 end
      local alone = ref(emb(ember.tensor({ s }, { dtype = "int64" })), { causal = true })
      local packed = y:narrow(1, row, 1):narrow(2, col, #s)
      assert((alone - packed):abs():max():item() < 1e-5)
      col = col + #s
    end
  end)
end)
