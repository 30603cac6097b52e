-- The nn modules of current models beside PyTorch 1.13: nn.MoE against a
-- dense reference of its routing rules, RMSNorm, LayerNorm without bias,
-- Bilinear, Fold/Unfold, PReLU, Softplus, Hardtanh, Embedding's max_norm,
-- the sinusoidal table (numbers from tests/fixtures/nn_modules_torch.lua,
-- tests/gen_nn_modules_torch_fixtures.py, float64); LSTM / GRU with proj_size,
-- bidirectional layers and packed sequences with h_0
-- (tests/fixtures/nn_modules_torch_rnn.lua, tests/gen_rnn_torch_save_fixtures.py) and
-- pack_sequence / unpack_sequence / unpad_sequence; nn.FeedForward's gated
-- option and its table of names.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local modules_fx = dofile("tests/fixtures/nn_modules_torch.lua")
local rnn_fx = dofile("tests/fixtures/nn_modules_torch_rnn.lua")
local T = function(spec) return parity.T(spec, "float64") end
local raises_here = parity.raises_here

-- the message of a failed call, or nil
local err_of = parity.error_of

local function case(name) return parity.case(modules_fx, name) end

describe("nn.MoE against a dense reference", function()
  local function run(c, m)
    local sd = {}
    for k, v in pairs(c.state) do sd[k] = T(v) end
    m:load_state_dict(sd)
    local x = T(c.inputs.x):requires_grad_()
    local y = m(x, c.mask and { attention_mask = T(c.mask) } or nil)
    parity.check(c.name .. " out", y, T(c.out), 1e-12)
    parity.check(c.name .. " aux_loss", m.aux_loss, T(c.aux_loss), 1e-12)
    parity.check(c.name .. " z_loss", m.z_loss, T(c.z_loss), 1e-12)
    assert.are.same(T(c.tokens_per_expert):totable(), m.tokens_per_expert:totable())
    ;((y * T(c.R)):sum() + 3 * m.aux_loss + 5 * m.z_loss):backward()
    parity.check(c.name .. " grad x", x.grad, T(c.grad_inputs.x), 1e-10)
    local params = m:named_parameters()
    local n = 0
    for k, g in pairs(m:upgrade_state_dict(c.grads)) do
      n = n + 1
      assert(params[k], c.name .. ": no parameter " .. k)
      parity.check(c.name .. " grad " .. k, params[k].grad, T(g), 1e-10)
    end
    local count = 0
    for _ in pairs(params) do count = count + 1 end
    assert.are.equal(count, n)
  end

  it("Mixtral's top-k softmax, the load-balancing and z losses, their gradients", function()
    run(case("moe_mixtral"), nn.MoE(6, 5, 4, 2, { dtype = "float64" }))
  end)

  it("Qwen2-MoE's softmax then top-k without renormalising, a gated shared expert", function()
    run(case("moe_qwen"), nn.MoE(6, 5, 4, 2, { router = "softmax_topk", shared_experts = 1, shared_d_ff = 8,
      shared_expert_gate = true, dtype = "float64" }))
  end)

  it("the losses over the attention_mask's tokens only", function()
    run(case("moe_masked"), nn.MoE(6, 5, 4, 2, { dtype = "float64" }))
  end)
end)

describe("norms, Bilinear, Fold/Unfold and the parametrised activations against PyTorch", function()
  it("RMSNorm: eps inside the root (Llama's), with and without a weight", function()
    parity.module(nn.RMSNorm(7, { eps = 1e-5, dtype = "float64" }), case("rms_eps"))
    parity.module(nn.RMSNorm(5, { eps = 1e-6, elementwise_affine = false, dtype = "float64" }), case("rms_plain"))
  end)

  it("LayerNorm(bias = false) has a weight and no bias", function()
    local m = nn.LayerNorm({ 2, 4 }, { bias = false, dtype = "float64" })
    assert.are.same({ "weight" }, parity.sorted_keys(m:state_dict()))
    parity.module(m, case("ln_nobias"))
  end)

  it("Bilinear", function()
    parity.module(nn.Bilinear(3, 4, 5, { dtype = "float64" }), case("bilinear"),
      { forward = function(m, i) return m(i.x1, i.x2) end })
  end)

  it("Unfold and Fold with dilation, padding and stride", function()
    parity.module(nn.Unfold { kernel_size = { 2, 3 }, dilation = { 1, 2 }, padding = 1, stride = { 2, 1 } }, case("unfold"))
    parity.module(nn.Fold { output_size = { 5, 6 }, kernel_size = { 2, 3 }, dilation = { 1, 2 }, padding = 1,
      stride = { 2, 1 } }, case("fold"))
  end)

  it("PReLU(3), Softplus(beta, threshold), Hardtanh(min, max) in PyTorch's positional forms", function()
    parity.module(nn.PReLU(3, { dtype = "float64" }), case("prelu"))
    parity.module(nn.Softplus(2, 1.5), case("softplus"))
    parity.module(nn.Hardtanh(-0.5, 2), case("hardtanh"))
  end)

  it("Embedding's max_norm renormalises the looked-up rows in place; the padding row gets no gradient", function()
    local c = case("embedding_maxnorm")
    local m = nn.Embedding.from_pretrained(T(c.weight0), { freeze = false, max_norm = 1.2, padding_idx = 2 })
    local y = m(T(c.ids))
    parity.check("out", y, T(c.out), 1e-12)
    parity.check("weight after", m.weight, T(c.weight1), 1e-12)
    ;(y * T(c.R)):sum():backward()
    parity.check("grad", m.weight.grad, T(c.grad), 1e-12)
  end)

  it("GroupNorm, PixelShuffle / PixelUnshuffle with extra leading dims, ChannelShuffle", function()
    parity.module(nn.GroupNorm(2, 6, { eps = 1e-3, dtype = "float64" }), case("groupnorm"))
    parity.module(nn.PixelShuffle(3), case("pixel_shuffle"))
    parity.module(nn.PixelUnshuffle(2), case("pixel_unshuffle"))
    parity.module(nn.ChannelShuffle(3), case("channel_shuffle"))
  end)

  it("Embedding's scale_grad_by_freq with a padding row", function()
    local c = case("embedding_freq")
    local m = nn.Embedding.from_pretrained(T(c.weight0), { freeze = false, padding_idx = 4, scale_grad_by_freq = true })
    local y = m(T(c.ids))
    parity.check("out", y, T(c.out), 1e-12)
    ;(y * T(c.R)):sum():backward()
    parity.check("grad", m.weight.grad, T(c.grad), 1e-12)
  end)

  it("the sinusoidal table from a later start (a cached decode)", function()
    local c = case("sinusoidal")
    local pe = nn.SinusoidalPositionalEncoding(6, { dtype = "float64" })
    local x = ember.zeros(1, 4, 6, { dtype = "float64" })
    parity.check("pe", pe(x, c.start):squeeze(1), T(c.pe), 1e-14)
  end)
end)

local function rnn_case(name)
  local c = parity.case(rnn_fx, name)
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

describe("recurrent modules against torch 1.13 (tests/fixtures/nn_modules_torch_rnn.lua)", function()
  it("LSTM proj_size with two bidirectional batch-first layers, {h_0, c_0}, dropout off in eval", function()
    rnn_case("lstm_proj_bidir_hx")
  end)
  it("LSTM proj_size on an unbatched input", function() rnn_case("lstm_proj_unbatched") end)
  it("GRU over an unsorted packed batch with h_0, two bidirectional layers", function()
    rnn_case("gru_packed_bidir_hx")
  end)
  it("LSTM proj_size over a packed bidirectional batch", function() rnn_case("lstm_packed_proj") end)
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

describe("nn.FeedForward in Lua's table of names", function()
  it("nn.FeedForward{d_model =, d_ff =, gated = true} builds what the positional form builds", function()
    -- was: 'Linear: in_features must be a positive integer, got table' from inside FeedForward
    ember.manual_seed(3)
    local a = nn.FeedForward{ d_model = 6, d_ff = 10, gated = true, activation = "gelu", bias = false }
    ember.manual_seed(3)
    local b = nn.FeedForward(6, 10, { gated = true, activation = "gelu", bias = false })
    assert.are.equal("geglu", a.activation_name)
    assert.is_nil(a.linear1.bias)
    local x = ember.randn(2, 3, 6)
    assert.is_true(a(x):equal(b(x)))
    -- the Transformer layers' (PyTorch's) name of d_ff, and the options after the sizes
    local w = nn.FeedForward{ d_model = 4, dim_feedforward = 16 }.linear1.weight
    assert.are.same({ 16, 4 }, { w.shape[1], w.shape[2] })
    assert.are.equal("swiglu", nn.FeedForward(4, 8, "swiglu").activation_name)
  end)

  it("a missing size names FeedForward at the user's line", function()
    local e = err_of(function() nn.FeedForward{ d_model = 16 } end)
    assert.matches("nn_modules_torch_spec.lua:%d+: FeedForward: d_ff must be a positive integer, got nil", e)
    e = err_of(function() nn.FeedForward(16) end)
    assert.matches("FeedForward: d_ff must be a positive integer", e)
    assert.matches("unknown option 'act'", err_of(function() nn.FeedForward{ d_model = 4, d_ff = 8, act = "gelu" } end))
  end)
end)

-- nn.FeedForward: a PyTorch user names the activation ("silu") and asks for
-- the gate; "silu" alone was refused and there was no `gated` option.
describe("nn.FeedForward's gated option and silu", function()
  local F = nn.functional
  local x = ember.randn(2, 3, 8, { dtype = "float64" })

  it("{activation = 'silu', gated = true} is SwiGLU: linear2(silu(linear1(x)) * linear3(x))", function()
    local ff = nn.FeedForward(8, 16, { activation = "silu", gated = true, dtype = "float64" })
    assert.are.equal("swiglu", ff.activation_name)
    assert.is_not_nil(ff.linear3)
    local want = ff.linear2(F.silu(ff.linear1(x)) * ff.linear3(x))
    assert(ember.allclose(ff(x), want, 1e-12, 1e-12))
    assert.truthy(tostring(ff):find("activation=swiglu", 1, true))
    -- the same parameters and state dict names as activation = "swiglu"
    local sw = nn.FeedForward(8, 16, { activation = "swiglu", dtype = "float64" })
    assert.are.equal(#sw:parameters(), #ff:parameters())
    sw:load_state_dict(ff:state_dict())
    assert(ember.equal(sw(x), ff(x)))
  end)

  it("gelu and relu gate too (GeGLU, ReGLU), and so does a function", function()
    local g = nn.FeedForward(8, 16, { activation = "gelu", gated = true, dtype = "float64" })
    assert.are.equal("geglu", g.activation_name)
    assert(ember.allclose(g(x), g.linear2(F.gelu(g.linear1(x)) * g.linear3(x)), 1e-12, 1e-12))
    local r = nn.FeedForward(8, 16, { activation = "relu", gated = true, dtype = "float64" })
    assert(ember.allclose(r(x), r.linear2(F.relu(r.linear1(x)) * r.linear3(x)), 1e-12, 1e-12))
    local t = nn.FeedForward(8, 16, { activation = ember.tanh, gated = true, dtype = "float64" })
    assert(ember.allclose(t(x), t.linear2(ember.tanh(t.linear1(x)) * t.linear3(x)), 1e-12, 1e-12))
  end)

  it("'silu' alone is the plain MLP with SiLU", function()
    local ff = nn.FeedForward(8, 16, { activation = "silu", dtype = "float64" })
    assert.is_nil(ff.linear3)
    assert(ember.allclose(ff(x), ff.linear2(F.silu(ff.linear1(x))), 1e-12, 1e-12))
    assert.are.same({ 2, 3, 8 }, nn.TransformerEncoderLayer(8, 2, { activation = "silu" })(x:float()).shape)
  end)

  it("a contradiction or a bad value is an error naming FeedForward at the caller's line", function()
    local ok, err = pcall(function() local _ = nn.FeedForward(8, 16, { activation = "swiglu", gated = false }) end)
    assert.is_false(ok)
    assert.truthy(err:find("nn_modules_torch_spec.lua:%d+: FeedForward: activation \"swiglu\" is gated, but gated = false"))
    ok, err = pcall(function() local _ = nn.FeedForward(8, 16, { gated = "yes" }) end)
    assert.is_false(ok)
    assert.truthy(err:find("FeedForward: gated must be true or false, got yes", 1, true))
  end)
end)
