-- ember.nn: the Module base class, every layer and both losses. Values and
-- gradients are checked in float64 against PyTorch 1.13 through the
-- committed fixtures tests/fixtures/nn_modules.lua (tests/gen_nn_fixtures.py).
local ember = require "ember"
local nn = require "ember.nn"
local compare = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/nn_modules.lua")
local T, check = compare.T, compare.check
local function case(name) return compare.case(fixtures, name) end

-- Loads the fixture's weights, runs forward(module, inputs), backpropagates
-- sum(out * R) and compares output and every gradient.
local function parity(m, c, forward, tol)
  compare.module(m, c, { forward = forward, tol = tol or 1e-9 })
end

describe("nn modules match PyTorch (float64)", function()
  it("Linear", function()
    parity(nn.Linear(5, 4, { dtype = "float64" }), case("Linear"), function(m, i) return m(i.x) end)
  end)

  it("LayerNorm", function()
    parity(nn.LayerNorm(6, { dtype = "float64" }), case("LayerNorm"), function(m, i) return m(i.x) end)
  end)

  it("LayerNorm{bias = false}: the weight only (PyTorch 2.1's option), and its gradients", function()
    ember.manual_seed(7)
    local m = nn.LayerNorm(6, { bias = false, dtype = "float64" })
    ember.no_grad(function() m.weight:copy_(ember.randn(6, { dtype = "float64" })) end)
    local names = {}
    for k in pairs(m:state_dict()) do names[#names + 1] = k end
    assert.are.same({ "weight" }, names)
    assert.truthy(tostring(m):find("bias=false", 1, true), tostring(m))
    local x = ember.randn(3, 4, 6, { dtype = "float64" })
    -- the same as an affine LayerNorm whose bias is zero
    local ref = ember.layer_norm(x, 1, m.weight, ember.zeros(6, { dtype = "float64" }), 1e-5)
    assert.is_true((m(x) - ref):abs():max():item() < 1e-14)
    local gradcheck = require "tests.lua.helpers.gradcheck"
    local xg = x:clone():requires_grad_()
    gradcheck.check(function(a, w) return m(a) end, { xg, m.weight }, { name = "LayerNorm{bias = false}" })
    assert.has_error(function() nn.LayerNorm(6, { bias = 0 }) end, "nn.LayerNorm: bias must be true or false, got number")
  end)

  for _, act in ipairs { "relu", "gelu" } do
    it("FeedForward " .. act, function()
      local m = nn.FeedForward(6, 10, { activation = act, dtype = "float64" })
      parity(m, case("FeedForward_" .. act), function(mod, i) return mod(i.x) end)
    end)
  end

  for _, nf in ipairs { "post", "pre" } do
    for _, act in ipairs { "relu", "gelu" } do
      it(("TransformerEncoderLayer %s-norm %s"):format(nf, act), function()
        local m = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0,
          norm_first = nf == "pre", activation = act, dtype = "float64" })
        parity(m, case(("TransformerEncoderLayer_%s_%s"):format(nf, act)), function(mod, i)
          return mod(i.x, { key_padding_mask = i.key_padding_mask })
        end, 1e-8)
      end)
    end
    it(("TransformerDecoderLayer %s-norm"):format(nf), function()
      local m = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0,
        norm_first = nf == "pre", dtype = "float64" })
      parity(m, case("TransformerDecoderLayer_" .. nf), function(mod, i)
        return mod(i.x, i.memory, { memory_key_padding_mask = i.memory_key_padding_mask })
      end, 1e-8)
    end)
  end

  it("CrossEntropyLoss with ignore_index, label smoothing and reductions", function()
    for _, c in ipairs(fixtures.losses) do
      local crit = nn.CrossEntropyLoss { ignore_index = c.ignore_index or nil,
        label_smoothing = c.label_smoothing, reduction = c.reduction }
      local logits = T(c.logits):requires_grad_(true)
      local loss = crit(logits, T(c.target))
      check("loss " .. c.reduction, loss, T(c.loss), 1e-12)
      ;(loss * T(c.R)):sum():backward()
      check("dlogits " .. c.reduction, logits.grad, T(c.grad), 1e-12)
    end
  end)
end)

describe("nn.Module", function()
  local function mlp()
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Dropout(0.5), nn.Linear(3, 2))
  end

  it("lists parameters in registration order with dotted names", function()
    local m = mlp()
    assert.are.same({ "1.weight", "1.bias", "4.weight", "4.bias" }, m:parameter_names())
    local ps, named = m:parameters(), m:named_parameters()
    assert.are.equal(4, #ps)
    assert.is_true(named["4.weight"] == m[4].weight)
    assert.are.equal(4 * 3 + 3 + 3 * 2 + 2, m:num_parameters())
    for _, p in ipairs(ps) do assert.is_true(p.requires_grad) end
  end)

  it("indexes Sequential from 1, counts with # and calls forward through __call", function()
    local m = mlp()
    assert.are.equal(4, #m)
    assert.are.equal("Linear", m[1].__name)
    assert.is_nil(m[5])
    local y = m:eval()(ember.randn(7, 4))
    assert.are.same({ 7, 2 }, y.shape)
  end)

  it("lists a shared parameter once (tied weights)", function()
    local emb, head = nn.Embedding(7, 4), nn.Linear(4, 7, { bias = false })
    head:register_parameter("weight", emb.weight)
    local m = nn.Sequential(emb, head)
    assert.are.same({ "1.weight" }, m:parameter_names())
    assert.are.equal(28, m:num_parameters())
    assert.is_not_nil(m:state_dict()["2.weight"])
    m:to("float64")
    assert.is_true(rawequal(m[1].weight, m[2].weight))
    assert.are.equal("float64", m[2].weight.dtype)
  end)

  it("Sequential subclasses keep integer indexing", function()
    local Stack = nn.Sequential:extend("Stack")
    function Stack:describe() return "stack of " .. #self end
    local s = Stack(nn.Linear(2, 2), nn.ReLU())
    assert.are.equal("ReLU", s[2].__name)
    assert.are.equal("stack of 2", s:describe())
  end)

  it("prints the module tree", function()
    local s = tostring(nn.Sequential(nn.Linear(4, 3), nn.GELU("tanh")))
    assert.are.equal("Sequential(\n  (1): Linear(in_features=4, out_features=3, bias=true)\n"
      .. "  (2): GELU(approximate=tanh)\n)", s)
    local enc = tostring(nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 }))
    assert.truthy(enc:find("(self_attn): MultiHeadAttention(", 1, true))
    assert.truthy(enc:find("    (linear1): Linear(in_features=8, out_features=16", 1, true))
  end)

  it("train/eval reach every descendant, the C attention module included", function()
    local m = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 })
    m:eval()
    assert.is_false(m.training)
    assert.is_false(m.ff.dropout.training)
    assert.is_false(m.self_attn.training)
    m:train()
    assert.is_true(m.self_attn.training and m.dropout1.training)
  end)

  it("includes the attention module's parameters and state", function()
    local m = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 })
    local named = m:named_parameters()
    for _, k in ipairs { "self_attn.q_proj.weight", "self_attn.out_proj.bias", "ff.linear1.weight", "norm2.bias" } do
      assert.is_not_nil(named[k], k)
    end
    assert.are.equal(4 * 64 + 4 * 8 + 16 * 8 + 16 + 8 * 16 + 8 + 4 * 8, m:num_parameters())
    assert.is_not_nil(m:state_dict()["self_attn.k_proj.weight"])
    -- torch's attribute names of the parts kept under ff (TORCH_NAMES), as torch code reads them
    assert.are.equal(m.ff.linear1, m.linear1)
    assert.are.equal(m.ff.linear2.weight, m.linear2.weight)
    local d = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16 })
    assert.are.equal(d.cross_attn, d.multihead_attn)
    assert.is_nil(m.multihead_attn) -- only a class's own names
    assert.is_nil(m.no_such_part)
  end)

  it("zero_grad clears every gradient", function()
    local m = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0 })
    m(ember.randn(2, 3, 8)):sum():backward()
    assert.is_not_nil(m.self_attn:named_parameters()["q_proj.weight"].grad)
    m:zero_grad()
    for n, p in pairs(m:named_parameters()) do assert.is_nil(p.grad, n) end
  end)

  it("state_dict / load_state_dict round-trip and copy values (not references)", function()
    local a, b = mlp(), mlp()
    b:load_state_dict(a:state_dict())
    for n, p in pairs(a:named_parameters()) do assert.is_true(p == b:named_parameters()[n], n) end
    ember.no_grad(function() a[1].weight:fill_(7) end)
    assert.is_false(a[1].weight == b[1].weight)
  end)

  it("load_state_dict names missing, unexpected and mis-shaped entries and changes nothing", function()
    local m = mlp()
    local before = m[1].weight:clone()
    local sd = m:state_dict()
    sd["1.bias"] = nil
    assert.has_error(function() m:load_state_dict(sd) end,
      "Sequential.load_state_dict: names do not match the module: missing 1.bias")
    sd = m:state_dict()
    sd["9.weight"] = ember.zeros(1)
    local ok, err = pcall(m.load_state_dict, m, sd)
    assert.is_false(ok)
    assert.truthy(err:find("unexpected 9.weight", 1, true))
    sd = m:state_dict()
    sd["1.weight"] = ember.zeros(4, 3)
    ok, err = pcall(m.load_state_dict, m, sd)
    assert.truthy(err:find("'1.weight' has shape [4, 3] in the state dict, the module expects [3, 4]", 1, true))
    assert.is_true(m[1].weight == before)
    -- non-strict loading skips what is missing
    sd = m:state_dict()
    sd["1.bias"] = nil
    m:load_state_dict(sd, false)
  end)

  it("to() converts every parameter, keeps them leaves that require grad", function()
    local m = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 }):to("float64")
    for n, p in pairs(m:named_parameters()) do
      assert.are.equal("float64", p.dtype, n)
      assert.is_true(p.requires_grad and p.is_leaf, n)
    end
    assert.are.same({ 2, 3, 8 }, m(ember.randn(2, 3, 8, { dtype = "float64" })).shape)
  end)

  it("can be extended with a new module in a few lines", function()
    local Scale = nn.Module:extend("Scale")
    function Scale:__init(n) self:register_parameter("s", ember.ones(n)) end
    function Scale:forward(x) return x * self.s end
    local m = nn.Sequential(Scale(3), nn.Linear(3, 1))
    assert.are.same({ "1.s", "2.weight", "2.bias" }, m:parameter_names())
    assert.are.equal("Scale()", tostring(m[1]))
  end)
end)

describe("nn layers", function()
  it("Linear checks its input and sizes", function()
    assert.has_error(function() nn.Linear(0, 3) end, "Linear: in_features must be a positive integer, got 0")
    local ok, err = pcall(function() return nn.Linear(4, 3)(ember.randn(2, 5)) end)
    assert.is_false(ok)
    assert.truthy(err:find("Linear.forward: input's last dim is 5, expected in_features=4", 1, true))
    assert.is_nil(nn.Linear(4, 3, { bias = false }).bias)
  end)

  it("Embedding looks up 1-based ids; padding_idx rows are zero and get no gradient", function()
    local e = nn.Embedding(5, 3, { padding_idx = 1 })
    local ids = ember.tensor({ { 1, 2 }, { 5, 1 } }, { dtype = "int64" })
    local out = e(ids)
    assert.are.same({ 2, 2, 3 }, out.shape)
    assert.is_true(out[1][2] == e.weight[2])
    assert.are.equal(0, out[1][1]:abs():sum():item())
    out:sum():backward()
    assert.are.equal(0, e.weight.grad[1]:abs():sum():item())
    assert.are.equal(3, e.weight.grad[5]:sum():item())
    assert.has_error(function() e(ember.tensor({ 1.0 })) end, "Embedding.forward: ids must be int64 (1-based), got float32")
  end)

  it("Dropout is the identity in eval mode and drops about p while training", function()
    ember.manual_seed(1)
    local d = nn.Dropout(0.25)
    local x = ember.ones(1000)
    local y = d(x)
    local kept = y:ne(0):long():sum():item()
    assert.is_true(kept > 680 and kept < 820, "kept " .. kept)
    assert.are.near(1000 / 0.75, y:sum():item() / kept * 1000, 1e-3) -- kept values are 1 / (1 - p), in float32
    d:eval()
    assert.is_true(d(x) == x)
    assert.has_error(function() nn.Dropout(1.5) end, "nn.Dropout: p must be a number in [0, 1], got 1.5")
    local all = nn.Dropout(1) -- PyTorch's p = 1: zeros, and zero gradients
    local xg = ember.ones(4, { requires_grad = true })
    local z = all(xg)
    assert.are.same({ 0, 0, 0, 0 }, z:totable())
    z:sum():backward()
    assert.are.same({ 0, 0, 0, 0 }, xg.grad:totable())
  end)

  it("ReLU and GELU", function()
    local x = ember.tensor({ -1, 0, 2 }, { dtype = "float64" })
    assert.are.same({ 0, 0, 2 }, nn.ReLU()(x):totable())
    local g = nn.GELU()(x):totable()
    assert.are.near(-0.15865525393145707, g[1], 1e-12)
    assert.are.near(1.9544997361036416, g[3], 1e-12)
    assert.are.near(-0.15880800939172324, nn.GELU("tanh")(x):totable()[1], 1e-12)
  end)

  it("SinusoidalPositionalEncoding adds sin/cos of the positions, from `start`", function()
    local pe = nn.SinusoidalPositionalEncoding(4, { max_len = 10, dtype = "float64" })
    local out = pe(ember.zeros(1, 3, 4, { dtype = "float64" }))
    local row = out[1][2]:totable() -- position 1 (0-based)
    assert.are.near(math.sin(1), row[1], 1e-12)
    assert.are.near(math.cos(1), row[2], 1e-12)
    assert.are.near(math.sin(1 / 100), row[3], 1e-12)
    assert.are.near(math.cos(1 / 100), row[4], 1e-12)
    local later = pe(ember.zeros(1, 1, 4, { dtype = "float64" }), 2)
    assert.is_true(later[1][1] == out[1][2])
    assert.is_nil(pe:state_dict().pe)
    assert.has_error(function() pe(ember.zeros(1, 3, 4), 9) end,
      "SinusoidalPositionalEncoding.forward: positions 9..11 outside 1..max_len=10")
  end)

  it("SinusoidalPositionalEncoding's table is sin/cos of pos / 10000^(2j/d), element by element, odd d too", function()
    for _, c in ipairs { { 7, 33, "float32" }, { 6, 20, "float64" }, { 5, 9, "bfloat16" }, { 1, 4, "float32" } } do
      local d, max_len, dt = c[1], c[2], c[3]
      local rows = {}
      for pos = 0, max_len - 1 do
        local row = {}
        for i = 0, d - 1 do
          local angle = pos / 10000 ^ ((i - i % 2) / d)
          row[i + 1] = i % 2 == 0 and math.sin(angle) or math.cos(angle)
        end
        rows[pos + 1] = row
      end
      local pe = nn.SinusoidalPositionalEncoding(d, { max_len = max_len, dtype = dt }).pe
      assert.are.equal(dt, pe.dtype)
      assert.is_true(ember.equal(pe, ember.tensor(rows, { dtype = dt })), ("d=%d %s"):format(d, dt))
    end
  end)

  it("LearnedPositionalEncoding is a learned table indexed from `start`", function()
    local pe = nn.LearnedPositionalEncoding(6, 4)
    local x = ember.zeros(2, 3, 4)
    local out = pe(x, 2)
    assert.is_true(out[2][1] == pe.weight[2])
    out:sum():backward()
    assert.are.equal(0, pe.weight.grad[1]:abs():sum():item())
    assert.are.equal(8, pe.weight.grad[2]:sum():item())
  end)

  it("MultiHeadAttention is a module like any other, usable as a child", function()
    local mha = nn.MultiHeadAttention(8, 2, { dropout = 0 })
    assert.are.equal(8, mha.d_model)
    local m = nn.Sequential(mha)
    assert.is_not_nil(m:named_parameters()["1.q_proj.weight"])
    assert.are.same({ 2, 5, 8 }, m(ember.randn(2, 5, 8)).shape)
  end)

  it("attention-bearing layers take any attention variant by name", function()
    local have = {}
    for _, p in ipairs(ember.plugins()) do if p.kind == "attention" and p.loaded then have[p.name] = true end end
    local x = ember.randn(2, 6, 8)
    for _, v in ipairs { "standard", "linear", "local", "relpos" } do
      if have[v] then
        local enc = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, attention = v })
        assert.are.equal(v, enc.self_attn.attention)
        assert.are.same({ 2, 6, 8 }, enc(x).shape)
        local dec = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, attention = v })
        assert.are.same({ 2, 6, 8 }, dec(x, ember.randn(2, 4, 8)).shape)
      end
    end
    assert.is_true(have.standard)
  end)

  it("TransformerDecoderLayer is causal: earlier outputs ignore later tokens", function()
    local dec = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, dtype = "float64" })
    local x = ember.randn(1, 5, 8, { dtype = "float64" })
    local mem = ember.randn(1, 3, 8, { dtype = "float64" })
    local a = dec(x, mem)
    local x2 = x:clone()
    x2[1][5] = 100
    local b = dec(x2, mem)
    assert.is_true(a:narrow(2, 1, 4) == b:narrow(2, 1, 4))
    assert.is_false(a[1][5] == b[1][5])
    assert.has_error(function() dec(x) end,
      "TransformerDecoderLayer.forward: this layer has cross-attention and needs a memory")
    local lm = nn.TransformerDecoderLayer(8, 2, { cross = false, dim_feedforward = 16 })
    assert.is_nil(lm.cross_attn)
    assert.are.same({ 1, 5, 8 }, lm(x:float()).shape)
  end)

  it("Transformer layers name their own arguments (src, tgt, memory) when a width is wrong", function()
    local function msg(f)
      local ok, err = pcall(f)
      assert.is_false(ok)
      return tostring(err)
    end
    local dec = nn.TransformerDecoderLayer(16, 4)
    local e = msg(function() dec(ember.randn(2, 3, 16), ember.randn(2, 5, 8)) end)
    assert.truthy(e:find("TransformerDecoderLayer.forward: memory must have 16 features in its last dim, got [2, 5, 8]", 1, true), e)
    assert.truthy(e:find("memory_dim = n", 1, true), e)
    e = msg(function() dec(ember.randn(2, 3, 8), ember.randn(2, 5, 16)) end)
    assert.truthy(e:find("TransformerDecoderLayer.forward: tgt must have 16 features in its last dim, got [2, 3, 8]", 1, true), e)
    e = msg(function() nn.TransformerEncoderLayer(16, 4)(ember.randn(2, 3, 8)) end)
    assert.truthy(e:find("TransformerEncoderLayer.forward: src must have 16 features in its last dim, got [2, 3, 8]", 1, true), e)
    local wide = nn.TransformerDecoderLayer(16, 4, { memory_dim = 8, dim_feedforward = 8 })
    e = msg(function() wide(ember.randn(2, 3, 16), ember.randn(2, 5, 16)) end)
    assert.truthy(e:find("memory must have 8 features in its last dim, got [2, 5, 16] (memory_dim)", 1, true), e)
    assert.are.same({ 2, 3, 16 }, wide(ember.randn(2, 3, 16), ember.randn(2, 5, 8)).shape)
  end)

  it("TransformerEncoder / TransformerDecoder stack layers, with a final norm for pre-norm", function()
    local enc = nn.TransformerEncoder(8, 2, 3, { dim_feedforward = 16, dropout = 0, norm_first = true })
    assert.are.equal(3, #enc.layers)
    local named = enc:named_parameters()
    assert.is_not_nil(named["layers.3.self_attn.q_proj.weight"])
    assert.is_not_nil(named["norm.weight"])
    local x = ember.randn(2, 5, 8)
    local kpm = ember.tensor({ { false, false, false, false, true }, { false, false, false, false, false } })
    local want = x
    for i = 1, 3 do want = enc.layers[i](want, { key_padding_mask = kpm }) end
    assert.is_true(enc(x, { key_padding_mask = kpm }) == enc.norm(want))
    assert.is_nil(nn.TransformerEncoder(8, 2, 1, { dim_feedforward = 16 }).norm)
    local dec = nn.TransformerDecoder(8, 2, 2, { dim_feedforward = 16, dropout = 0 })
    assert.is_nil(dec.norm)
    local mem = ember.randn(2, 3, 8)
    assert.is_true(dec(x, mem) == dec.layers[2](dec.layers[1](x, mem), mem))
    assert.has_error(function() nn.TransformerDecoder(8, 2, 0) end,
      "nn.TransformerDecoder: num_layers must be a positive integer, got 0")
  end)

  it("CrossAttentionBlock: text attends to image tokens and can return the weights", function()
    local blk = nn.CrossAttentionBlock(8, 2, { image_dim = 6, self_attention = true, dropout = 0 })
    local text, image = ember.randn(3, 4, 8), ember.randn(3, 10, 6)
    local out, w = blk(text, image, { need_weights = true })
    assert.are.same({ 3, 4, 8 }, out.shape)
    assert.are.same({ 3, 2, 4, 10 }, w.shape)
    local sums = w:sum(-1)
    assert.is_true((sums - 1):abs():max():item() < 1e-5)
    out:sum():backward()
    assert.is_not_nil(blk:named_parameters()["cross_attn.k_proj.weight"].grad)
    assert.are.same({ 8, 6 }, blk:named_parameters()["cross_attn.k_proj.weight"].shape)
  end)

  it("CrossAttentionBlock: image_mask biases the cross-attention, per head", function()
    local blk = nn.CrossAttentionBlock(8, 2, { image_dim = 6, dropout = 0 })
    local text, image = ember.randn(3, 4, 8), ember.randn(3, 5, 6)
    -- head 1 may see image token 2 only, head 2 is left alone
    local bias = ember.full({ 1, 2, 1, 5 }, 0)
    for j = 1, 5 do if j ~= 2 then bias[1][1][1][j] = -1e9 end end
    local out, w = blk(text, image, { image_mask = bias, need_weights = true })
    local _, w0 = blk(text, image, { need_weights = true })
    assert.are.same({ 3, 4, 8 }, out.shape)
    assert.is_true((w:select(2, 1):select(3, 2) - 1):abs():max():item() < 1e-6)
    assert.is_true((w:select(2, 2) - w0:select(2, 2)):abs():max():item() < 1e-6)
    assert.is_false((out - blk(text, image)):abs():max():item() < 1e-4)
    -- the boolean forms say which convention they use
    local allow = ember.ones({ 3, 1, 4, 5 }):gt(0)
    local o1 = blk(text, image, { image_allow_mask = allow })
    assert.is_true((o1 - blk(text, image)):abs():max():item() < 1e-6)
    local _, wb = blk(text, image, { image_block_mask = bias:lt(-1), need_weights = true })
    assert.is_true((wb:select(2, 1):select(3, 2) - 1):abs():max():item() < 1e-6)
    assert.has_error(function() blk(text, image, { image_mask = allow }) end)
    assert.has_error(function() blk(text, image, { image_mask = bias, image_allow_mask = allow }) end)
  end)

  it("targets of -100 count nothing by default, as PyTorch's ignore_index (Hugging Face's label padding)", function()
    ember.manual_seed(4)
    local logits = ember.randn(4, 5, { dtype = "float64" })
    local t = ember.tensor({ 1, -100, 3, -100 }, "int64")
    local rows, kept = ember.tensor({ 1, 3 }, "int64"), ember.tensor({ 1, 3 }, "int64")
    local function near(a, b) assert.is_true(math.abs(a:item() - b:item()) < 1e-12, a:item() .. " vs " .. b:item()) end
    near(ember.cross_entropy(logits, t), ember.cross_entropy(logits:index_select(1, rows), kept))
    near(ember.nll_loss(logits:log_softmax(2), t), ember.nll_loss(logits:index_select(1, rows):log_softmax(2), kept))
    local smoothed = nn.CrossEntropyLoss { label_smoothing = 0.1, weight = ember.ones(5, { dtype = "float64" }) }
    near(smoothed(logits, t), smoothed(logits:index_select(1, rows), kept))
    -- other out-of-range ids stay errors (a 0-based label is a bug, not padding)
    assert.has_error(function() ember.cross_entropy(logits, ember.tensor({ 1, 0, 3, 2 }, "int64")) end)
    assert.has_error(function() ember.nll_loss(logits, ember.tensor({ 1, -5, -100, 2 }, "int64")) end)
  end)

  it("losses check their options", function()
    assert.has_error(function() nn.CrossEntropyLoss { reduction = "avg" } end,
      "CrossEntropyLoss: reduction must be \"mean\", \"sum\" or \"none\", got avg")
    local crit = nn.CrossEntropyLoss { ignore_index = 1 }
    local logits = ember.randn(2, 3, 5)
    local target = ember.tensor({ { 1, 2, 3 }, { 4, 5, 1 } }, { dtype = "int64" })
    local l = crit(logits, target)
    local ref = ember.cross_entropy(logits:reshape(6, 5), target:reshape(6), { ignore_index = 1 })
    assert.is_true(l == ref)
    local mse = nn.MSELoss()
    assert.are.near(4, mse(ember.zeros(3), ember.full({ 3 }, 2)):item(), 1e-6)
    assert.are.near(12, nn.MSELoss("sum")(ember.zeros(3), ember.full({ 3 }, 2)):item(), 1e-6)
  end)
end)

describe("options", function()
  it("an unknown (misspelt) option is an error naming the module and what it takes, at the caller's line", function()
    local cases = {
      { function() nn.Linear(2, 2, { biass = false }) end, "nn.Linear: unknown option 'biass' (options: bias, device, dtype, init)" },
      { function() nn.LayerNorm(4, { epsilon = 1e-3 }) end, "nn.LayerNorm: unknown option 'epsilon'" },
      { function() nn.Embedding(8, 2, { pading_idx = 1 }) end, "nn.Embedding: unknown option 'pading_idx'" },
      { function() nn.TransformerEncoderLayer(8, 2, { dim_ff = 16 }) end,
        "nn.TransformerEncoderLayer: unknown option 'dim_ff'" },
      { function() nn.TransformerEncoder(8, 2, 2, { dim_ff = 16 }) end, "nn.TransformerEncoder: unknown option 'dim_ff'" },
      { function() nn.TransformerDecoder(8, 2, 2, { crosss = false }) end, "nn.TransformerDecoder: unknown option 'crosss'" },
      { function() nn.CrossEntropyLoss { ignore_idx = 2 } end, "nn.CrossEntropyLoss: unknown option 'ignore_idx'" },
      { function() nn.FeedForward(4, 8, { activaton = "gelu" }) end, "nn.FeedForward: unknown option 'activaton'" },
      { function() nn.TransformerEncoder(nn.Linear(8, 2), 2) end,
        "nn.TransformerEncoder: PyTorch's form (layer, num_layers [, norm]) takes an nn.TransformerEncoderLayer, got an nn.Linear" },
      { function() nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2), 2, { norm = 1 }) end,
        "nn.TransformerDecoder: norm must be a module (nn.LayerNorm(d_model)) or nil, got number" },
      { function() nn.BatchNorm2d(8, { momentun = 0.5 }) end, "nn.BatchNorm2d: unknown option 'momentun'" },
      { function() nn.BatchNorm1d(8, { afine = false }) end, "nn.BatchNorm1d: unknown option 'afine'" },
      { function() nn.MaxPool2d(2, { strid = 1 }) end, "nn.MaxPool2d: unknown option 'strid'" },
      { function() nn.MaxPool2d(2, { return_indices = 1 }) end, "MaxPool2d: return_indices must be a boolean, got 1" },
      { function() nn.AvgPool1d(2, { count_include_pads = false }) end, "nn.AvgPool1d: unknown option 'count_include_pads'" },
      { function() nn.NLLLoss { ignore_idx = 1 } end, "nn.NLLLoss: unknown option 'ignore_idx'" },
      { function() nn.KLDivLoss { log_targets = true } end, "nn.KLDivLoss: unknown option 'log_targets'" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok)
      assert.truthy(err:find(c[2], 1, true), err)
      assert.truthy(err:find("nn_spec.lua:%d+:"), err)
    end
  end)

  it("forward options too: a misspelt key_padding_mask is an error, not an unmasked run", function()
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0 })
    local x, pad = ember.randn(2, 3, 8), ember.tensor({ { false, false, true }, { false, false, false } })
    local ok, err = pcall(layer.forward, layer, x, { key_padding_mak = pad })
    assert.is_false(ok)
    assert.truthy(err:find("TransformerEncoderLayer.forward: unknown option 'key_padding_mak'", 1, true), err)
    local dec = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, cross = false })
    ok, err = pcall(dec.forward, dec, x, nil, { tgt_key_padding = pad })
    assert.truthy(err:find("TransformerDecoderLayer.forward: unknown option 'tgt_key_padding'", 1, true), err)
    -- the Encoder passes its layers' options through, final_norm is its own
    assert.is_not_nil(nn.TransformerEncoder(8, 2, 1, { dim_feedforward = 16, final_norm = true }).norm)
  end)

  it("buffers() and named_buffers(), as PyTorch's", function()
    local m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm2d(3))
    local names = {}
    for n in pairs(m:named_buffers()) do names[#names + 1] = n end
    table.sort(names)
    assert.are.same({ "2.num_batches_tracked", "2.running_mean", "2.running_var" }, names)
    assert.are.equal(3, #m:buffers())
  end)

  it("Linear says an integer input must be converted", function()
    local ok, err = pcall(function() return nn.Linear(2, 2)(ember.ones(1, 2, { dtype = "int64" })) end)
    assert.is_false(ok)
    assert.truthy(err:find("Linear.forward: input must be floating point (the weight is float32), got int64", 1, true), err)
  end)

  it("named_modules() without a function lists {name, module}, as PyTorch's iterates", function()
    local m = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
    local names = {}
    for _, pair in ipairs(m:named_modules()) do names[#names + 1] = pair[1] end
    assert.are.same({ "", "1", "2", "2.1", "2.2" }, names)
    assert.has_error(function() m:named_modules(3) end)
  end)
end)

describe("nn.CrossEntropyLoss", function()
  local more = dofile("tests/fixtures/nn_more.lua")
  it("matches PyTorch with class weights, label smoothing, ignore_index, every reduction and [B, L, C]", function()
    for i, c in ipairs(more.cross_entropy) do
      require("tests.lua.helpers.parity").cross_entropy_case(nn, c, i,
        function(cc) return ember.tensor(cc.target, { dtype = "int64" }) end)
    end
  end)

  it("takes the classes in the last dim and says how to move PyTorch's [N, C, L] there", function()
    local ok, err = pcall(function() return nn.CrossEntropyLoss()(ember.randn(2, 4, 5), ember.ones(2, 5, { dtype = "int64" })) end)
    assert.is_false(ok)
    assert.truthy(err:find("nn.CrossEntropyLoss: logits [2, 4, 5] need a target [2, 4] (the classes are the last dim), "
      .. "got [2, 5]; for PyTorch's [N, C, ...] layout move the classes last first: logits:permute(1, 3, 2)", 1, true), err)
    local logits, t = ember.randn(2, 4, 5, { dtype = "float64" }), ember.tensor({ { 1, 2, 3, 4, 1 }, { 4, 4, 3, 2, 1 } }, "int64")
    local a = nn.CrossEntropyLoss()(logits:permute(1, 3, 2), t)
    local b = nn.CrossEntropyLoss()(logits:permute(1, 3, 2):reshape(10, 4), t:reshape(10))
    assert.are.near(b:item(), a:item(), 1e-12)
  end)
end)
