-- helper-88's probe: recurrent modules, indexing and views, dtype promotion
-- and serialization as a PyTorch 1.13 / Torch7 user meets them. The RNN
-- numerics come from tests/fixtures/helper88_rnn.lua
-- (tests/gen_helper88_fixtures.py, torch.nn.LSTM / GRU in float64: proj_size
-- with bidirectional layers, packed sequences with h_0).
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local fx = dofile("tests/fixtures/helper88_rnn.lua")
local T = function(spec) return parity.T(spec, "float64") end
local raises_here = parity.raises_here

local function rnn_case(name)
  local c = parity.case(fx, name)
  local o = { dtype = "float64" }
  for k, v in pairs(c.options) do o[k] = v end
  local m = nn[c.kind](c.input_size, c.hidden_size, o)
  local sd = {}
  for k, v in pairs(c.state) do sd[k] = T(v) end
  m:load_state_dict(sd)
  m:eval()
  local xs = {}
  for k, v in pairs(c.inputs) do xs[k] = T(v):requires_grad_() end
  local hx
  if xs.h0 then hx = c.kind == "LSTM" and { xs.h0, xs.c0 } or xs.h0 end
  local x = xs.x
  if c.lengths then
    x = nn.utils.rnn.pack_padded_sequence(x, c.lengths, { batch_first = o.batch_first or false,
      enforce_sorted = false })
  end
  local out, state = m(x, hx)
  if c.lengths then out = nn.utils.rnn.pad_packed_sequence(out, { batch_first = o.batch_first or false }) end
  local h_n, c_n = state, nil
  if c.kind == "LSTM" then h_n, c_n = state[1], state[2] end
  parity.check(name .. " out", out, T(c.out), 1e-12)
  parity.check(name .. " h_n", h_n, T(c.h_n), 1e-12)
  local loss = (out * T(c.R)):sum() + (h_n * T(c.R_h)):sum()
  if c.c_n then
    parity.check(name .. " c_n", c_n, T(c.c_n), 1e-12)
    loss = loss + (c_n * T(c.R_c)):sum()
  end
  loss:backward()
  for k, g in pairs(c.grad_inputs) do parity.check(name .. " grad " .. k, xs[k].grad, T(g), 1e-10) end
end

describe("recurrent modules against torch 1.13 (helper88_rnn fixtures)", function()
  it("LSTM proj_size with two bidirectional batch-first layers, {h_0, c_0}, dropout off in eval", function()
    rnn_case("lstm_proj_bidir_hx")
  end)
  it("LSTM proj_size on an unbatched input", function() rnn_case("lstm_proj_unbatched") end)
  it("GRU over an unsorted packed batch with h_0, two bidirectional layers", function()
    rnn_case("gru_packed_bidir_hx")
  end)
  it("LSTM proj_size over a packed bidirectional batch", function() rnn_case("lstm_packed_proj") end)
end)

describe("int64 index tensors count negative positions from the end, as x[-1] and torch's x[idx]", function()
  local I = function(t) return ember.tensor(t, { dtype = "int64" }) end
  local x = ember.arange(12):view(3, 4)

  -- was: ember.index: index -1 at {1} is out of range 1..3 (1-based)
  it("x[idx], x[{idx}], x[{{}, idx}] and x[{rows, cols}] read them", function()
    assert.is_true(ember.equal(x[I { -1, 1 }], x[I { 3, 1 }]))
    assert.is_true(ember.equal(x[I { { -1 }, { 2 } }], x[I { { 3 }, { 2 } }]))
    assert.is_true(ember.equal(x[{ I { -2 } }], x[{ I { 2 } }]))
    assert.is_true(ember.equal(x[{ {}, I { -1, 1 } }], x[{ {}, I { 4, 1 } }]))
    assert.is_true(ember.equal(x[{ 2, I { -1 } }], x[{ 2, I { 4 } }]))
    assert.is_true(ember.equal(x[{ I { 1, -1 }, I { -1, 1 } }], ember.tensor({ 3, 8 })))
  end)

  it("gradients flow to the rows they name", function()
    local w = ember.zeros(3, 2, { dtype = "float64" }):requires_grad_()
    w[I { -1, -1, 1 }]:sum():backward()
    assert.is_true(ember.equal(w.grad, ember.tensor({ { 1, 1 }, { 0, 0 }, { 2, 2 } }, { dtype = "float64" })))
  end)

  it("x[idx] = v, x[{rows, cols}] = v and index_put (accumulate) write them", function()
    local t = ember.zeros(3, 2)
    t[I { -1 }] = 1
    t[{ I { -3 }, I { -1 } }] = 5
    assert.is_true(ember.equal(t, ember.tensor({ { 0, 5 }, { 0, 0 }, { 1, 1 } })))
    local acc = ember.zeros(3):index_put({ I { -1, -1, 1 } }, ember.tensor({ 1, 2, 3 }), true)
    assert.is_true(ember.equal(acc, ember.tensor({ 3, 0, 3 })))
  end)

  it("x:take(idx) too (torch.take); past either end is refused naming the op", function()
    local t = ember.arange(24):view(2, 3, 4):transpose(1, 3)
    assert.is_true(ember.equal(t:take(I { 1, -1 }), ember.tensor({ 0, 23 })))
    raises_here(function() local _ = ember.arange(3):take(I { -4 }) end,
      "ember.take: index -4 is out of range for 3 elements (1-based: 1..3 or -3..-1)")
    raises_here(function() local _ = ember.arange(3):take(I { 4 }) end,
      "ember.take: index 4 is out of range for 3 elements")
    raises_here(function() local _ = x[I { -4 }] end, "ember.index: index -4")
    raises_here(function() local _ = x[{ I { 1 }, I { -5 } }] end, "ember.index: index -5 is out of range for a dim of size 4")
  end)
end)

describe("ember.save / ember.load of plain values", function()
  -- was: -0.0 came back as 0.0 ("f:-0" read as the integer 0)
  it("keeps the sign of -0.0", function()
    local p = os.tmpname()
    ember.save({ a = -0.0, b = 0.0, c = -1.5 }, p)
    local r = ember.load(p)
    os.remove(p)
    assert.are.equal(-math.huge, 1 / r.a)
    assert.are.equal(math.huge, 1 / r.b)
    assert.are.equal(-1.5, r.c)
  end)
end)

describe("ember.load of torch.save's legacy format (_use_new_zipfile_serialization=False)", function()
  local FIX = "tests/fixtures/"
  -- was: refused ('a torch.save file in the legacy format ..., which ember does not read')
  it("reads the same object as the zip archive of it: every dtype, views, 0-d, empty, Parameter, nests", function()
    local z, l = ember.load(FIX .. "helper88_save_zip.pt"), ember.load(FIX .. "helper88_save_legacy.pt")
    local n = 0
    for _, k in ipairs(parity.sorted_keys(z)) do
      if ember.is_tensor(z[k]) then
        n = n + 1
        assert.are.equal(z[k].dtype, l[k].dtype, k)
        assert.are.same({ table.unpack(z[k].shape) }, { table.unpack(l[k].shape) }, k)
        assert.is_true(ember.equal(z[k], l[k]), k)
      end
    end
    assert.are.equal(16, n)
    assert.is_true(ember.equal(l.view, ember.arange(3, 9)))
    assert.is_true(ember.equal(l.strided, ember.arange(20):view(4, 5)[{ {}, { 2, 5 } }]:index_select(2,
      ember.tensor({ 1, 3 }, { dtype = "int64" }))))
    assert.is_true(ember.equal(l.t, ember.arange(20):view(4, 5):t()))
    assert.is_true(ember.equal(l.expanded, ember.tensor({ { 1.5, 1.5, 1.5 }, { -2, -2, -2 } })))
    assert.are.equal(-(1 << 40), l.i64[1]:item())
    assert.are.same({ -300, 2 }, { l.i16[1]:item(), l.i16[2]:item() })
    assert.are.equal(255, l.u8[3]:item())
    assert.are.equal(0, l.scalar.ndim)
    assert.is_true(l.param.requires_grad and l.param.is_leaf)
    assert.are.same({ 3, "s" }, { l.nested.a[2][2], l.nested.a[2][3] })
    assert.are.same({ [1] = 2.5, t = true }, l.nested.b)
    assert.is_true(ember.equal(l.nested.a[2][1], ember.zeros(1)))
  end)

  it("a cut legacy file is refused naming it", function()
    local f = assert(io.open(FIX .. "helper88_save_legacy.pt", "rb"))
    local bytes = f:read("a")
    f:close()
    local cut = os.tmpname()
    for _, keep in ipairs { #bytes - 10, #bytes // 2, 40, 10 } do
      local w = assert(io.open(cut, "wb"))
      w:write(bytes:sub(1, keep))
      w:close()
      raises_here(function() ember.load(cut) end, "ember.load: '" .. cut .. "'")
    end
    os.remove(cut)
  end)
end)

describe("Tensor.repeat (x[\"repeat\"](x, ...), Torch7's repeatTensor)", function()
  -- was: absent (x:tile only, which also takes fewer repeats than dims)
  it("repeats along each dim, more repeats prepending dims; fewer than the dims are refused", function()
    local x = ember.tensor({ { 1, 2 } })
    local want = ember.tensor({ { { 1, 2, 1, 2 }, { 1, 2, 1, 2 } }, { { 1, 2, 1, 2 }, { 1, 2, 1, 2 } } })
    assert.is_true(ember.equal(x["repeat"](x, 2, 2, 2), want))
    assert.is_true(ember.equal(x:repeatTensor({ 2, 2, 2 }), want))
    assert.is_true(ember.equal(ember["repeat"](x:t(), 1, 2), ember.tensor({ { 1, 1 }, { 2, 2 } })))
    raises_here(function() x["repeat"](x, 2) end,
      "ember.repeat: the number of repeats (1) can not be smaller than the number of dims of the tensor (2)")
  end)
end)

describe("nn.utils.rnn.pack_sequence, unpack_sequence and unpad_sequence (torch 1.13's)", function()
  local R = nn.utils.rnn
  local a, b, c = ember.arange(6):view(3, 2), ember.arange(2):view(1, 2) + 10, ember.arange(4):view(2, 2) + 20
  -- was: absent
  it("pack_sequence packs as pack_padded_sequence(pad_sequence(...)); the RNNs take it", function()
    local p = R.pack_sequence({ a, b, c }, { enforce_sorted = false })
    assert.are.same({ 3, 2, 1 }, p.batch_sizes:totable()) -- torch: tensor([3, 2, 1])
    assert.are.same({ 1, 3, 2 }, p.sorted_indices:totable()) -- torch: tensor([0, 2, 1]), 0-based
    local want = R.pack_padded_sequence(R.pad_sequence({ a, b, c }), { 3, 1, 2 }, { enforce_sorted = false })
    assert.is_true(ember.equal(p.data, want.data))
    local gru = nn.GRU(2, 3)
    local _, h1 = gru(p)
    local _, h2 = gru(want)
    assert.is_true(ember.equal(h1, h2))
    assert.is_true(ember.equal(R.pack_sequence({ a, c, b }).data, R.pack_sequence({ a, c, b }, true).data))
    raises_here(function() R.pack_sequence({ a, b, c }) end,
      "nn.utils.rnn.pack_sequence: the sequences must be sorted by decreasing length when enforce_sorted is true "
      .. "(sequence 3 has 2 steps after 1)")
    raises_here(function() R.pack_sequence({ a }, { batch_first = true }) end,
      "nn.utils.rnn.pack_sequence: unknown option 'batch_first'")
  end)

  it("unpack_sequence and unpad_sequence give the sequences back in the batch's order", function()
    local seqs = R.unpack_sequence(R.pack_sequence({ a, b, c }, { enforce_sorted = false }))
    assert.are.equal(3, #seqs)
    for i, s in ipairs({ a, b, c }) do assert.is_true(ember.equal(seqs[i], s), i) end
    local un = R.unpad_sequence(R.pad_sequence({ a, b, c }, { batch_first = true }),
      ember.tensor({ 3, 1, 2 }, { dtype = "int64" }), true)
    for i, s in ipairs({ a, b, c }) do assert.is_true(ember.equal(un[i], s), i) end
    raises_here(function() R.unpad_sequence(R.pad_sequence({ a, b }), { 3, 4 }) end,
      "nn.utils.rnn.unpad_sequence: length 2 is 4, outside 0..3")
  end)
end)

describe("logical ops of any dtype and more in-place twins, as torch's", function()
  local I = function(t) return ember.tensor(t, { dtype = "int64" }) end
  -- was: 'ember.logical_and: expected bool tensors, got float32 [2] and float32 [2]'
  it("logical_and / or / xor / not treat nonzero (NaN too) as true", function()
    local a, b = ember.tensor({ 0, 2, 0 / 0 }), I { 1, 0, 0 }
    assert.are.same({ false, false, false }, ember.logical_and(a, b):totable())
    assert.are.same({ true, true, true }, a:logical_or(b):totable())
    assert.are.same({ true, true, true }, ember.logical_xor(a, b):totable())
    assert.are.same({ true, false, false }, a:logical_not():totable())
    assert.are.equal("bool", a:logical_not().dtype)
  end)

  -- was: absent (attempt to call a nil value)
  it("floor_divide_, true_divide_, logical_not_, put_, copysign_ write x, refusing a higher result type", function()
    local i = I { -7, 7 }
    assert.are.equal(i, i:floor_divide_(2))
    assert.are.same({ -4, 3 }, i:totable())
    local f = ember.tensor({ 0, 2 })
    f:logical_not_()
    assert.are.same({ 1, 0 }, f:totable())
    local p = ember.zeros(2, 2)
    p:put_(I { -1, 1 }, ember.tensor({ 5, 6 }))
    assert.are.same({ { 6, 0 }, { 0, 5 } }, p:totable())
    local c = ember.tensor({ 3, -4 })
    c:copysign_(-1)
    assert.are.same({ -3, -4 }, c:totable())
    raises_here(function() I({ 1, 2 }):true_divide_(2) end,
      "ember.true_divide_: result type float32 can't be cast to the desired output type int64")
  end)
end)
