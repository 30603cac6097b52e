-- PyTorch's weights in ember, as a user moving a model would try it: state
-- dicts of PyTorch 1.13 models (tests/gen_interop_fixtures.py writes them,
-- in tests/fixtures/interop.lua and interop_*.safetensors) load into the
-- equivalent ember models as they are -- nn.Transformer one level down in a
-- user's module, nn.Sequential's 0-based numbering (also after a stateless
-- first module), MultiheadAttention's in_proj_weight, Conv2d/BatchNorm2d
-- (running statistics, num_batches_tracked), LayerNorm, Embedding, LSTM and
-- GRU, a torchvision-shaped ViT -- and give PyTorch's outputs (float64 to
-- 1e-10; float32, bfloat16 and float16 files into float32 models);
-- torch_state_dict gives PyTorch's names and layouts back, and PyTorch
-- itself loads them (tests/interop_torch_check.py, where torch is installed);
-- strict and non-strict loading, dtype conversion and shape errors as
-- PyTorch's load_state_dict; a torch.save file loads through ember.load (the
-- safetensors reader names it), and a DistributedDataParallel checkpoint is
-- named as such.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"

local fx = dofile("tests/fixtures/interop.lua")
local T, check, raises_here, sorted_keys = parity.T, parity.check, parity.raises_here, parity.sorted_keys
local FIX = "tests/fixtures/"

local function tensors(specs, dtype)
  local out = {}
  for k, v in pairs(specs) do
    out[k] = T(v)
    if dtype and out[k].dtype == "float64" then out[k] = out[k]:to(dtype) end
  end
  return out
end

-- PyTorch's token ids are 0-based, ember's 1-based
local function ids(spec) return T(spec) + 1 end

local V, D = 11, 8

-- the generator's Seq2Seq: an embedding, nn.Transformer, a head
local Seq2Seq = nn.Module:extend("Seq2Seq")
function Seq2Seq:__init(dtype)
  self.emb = nn.Embedding(V, D, { dtype = dtype })
  self.transformer = nn.Transformer { d_model = D, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 1,
    dim_feedforward = 16, dropout = 0, dtype = dtype }
  self.head = nn.Linear(D, V, { dtype = dtype })
end
function Seq2Seq:forward(src, tgt)
  local mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[2], { dtype = self.head.weight.dtype })
  return self.head(self.transformer(self.emb(src), self.emb(tgt), { tgt_mask = mask }))
end

local Recurrent = nn.Module:extend("Recurrent")
function Recurrent:__init(dtype)
  self.lstm = nn.LSTM(4, 5, { num_layers = 2, batch_first = true, bidirectional = true, dtype = dtype })
  self.gru = nn.GRU(10, 3, { batch_first = true, dtype = dtype })
  self.head = nn.Linear(3, 2, { dtype = dtype })
end
function Recurrent:forward(x) return self.head((self.gru((self.lstm(x))))) end

local function mlp(dtype)
  return nn.Sequential(nn.Linear(4, 8, { dtype = dtype }), nn.LayerNorm(8, { dtype = dtype }), nn.Tanh(),
    nn.Linear(8, 3, { dtype = dtype }))
end

local function vit(dtype)
  return ember.models.ViT { image_size = 8, patch_size = 4, in_channels = 3, num_classes = 3, hidden_dim = 8,
    num_layers = 2, num_heads = 2, mlp_dim = 16, dtype = dtype }
end

local function cnn(dtype)
  local o = { dtype = dtype }
  return nn.Sequential(nn.Conv2d(3, 4, 3, { padding = 1, dtype = dtype }), nn.BatchNorm2d(4, o), nn.ReLU(),
    nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 5, o))
end

describe("PyTorch state dicts load as they are", function()
  it("nn.Transformer inside a user's module (with an embedding and a head), float64", function()
    local c = fx.seq2seq
    local m = Seq2Seq("float64"):eval()
    m:load_state_dict(tensors(c.state))
    check("seq2seq", m(ids(c.src), ids(c.tgt)), T(c.out), 1e-10)
    -- the nested map is the Transformer's documented one
    local inner = {}
    for k, v in pairs(c.state) do
      if k:sub(1, 12) == "transformer." then inner[k:sub(13)] = T(v) end
    end
    local top = {}
    for k in pairs(m:upgrade_state_dict(tensors(c.state))) do top[#top + 1] = k end
    local want = {}
    for k in pairs(nn.Transformer.from_torch_state_dict(inner)) do want[#want + 1] = "transformer." .. k end
    for _, k in ipairs { "emb.weight", "head.weight", "head.bias" } do want[#want + 1] = k end
    table.sort(top)
    table.sort(want)
    assert.are.same(want, top)
    -- and at the top, as before
    local bare = nn.Transformer { d_model = D, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 1,
      dim_feedforward = 16, dropout = 0, dtype = "float64" }
    bare:load_state_dict(inner)
    for k, v in pairs(bare:state_dict()) do assert.is_true(v:equal(m.transformer:state_dict()[k]), k) end
  end)

  it("nn.Transformer two levels down and inside a Sequential", function()
    local c = fx.seq2seq
    local Outer = nn.Module:extend("Outer")
    function Outer:__init() self.net = Seq2Seq("float64") end
    local o = Outer():eval()
    local sd = {}
    for k, v in pairs(tensors(c.state)) do sd["net." .. k] = v end
    o:load_state_dict(sd)
    check("outer", o.net(ids(c.src), ids(c.tgt)), T(c.out), 1e-10)
    -- PyTorch's nn.Sequential(net): "0.transformer.encoder.layers.0...."
    local s = nn.Sequential(Seq2Seq("float64")):eval()
    sd = {}
    for k, v in pairs(tensors(c.state)) do sd["0." .. k] = v end
    s:load_state_dict(sd)
    check("in a Sequential", s[1](ids(c.src), ids(c.tgt)), T(c.out), 1e-10)
  end)

  it("a float64 and a float32 safetensors file from PyTorch into a float32 model", function()
    local c = fx.seq2seq
    for _, f in ipairs { "interop_seq2seq_f64.safetensors", "interop_seq2seq_f32.safetensors" } do
      local sd = ember.load(FIX .. f)
      assert.are.same(sorted_keys(c.state), sorted_keys(sd))
      local m = Seq2Seq():eval()
      m:load_state_dict(sd)
      assert.are.equal("float32", m.head.weight.dtype)
      local out = m(ids(c.src), ids(c.tgt))
      assert.are.equal("float32", out.dtype)
      check(f, out, T(c.out), 1e-5)
    end
  end)

  it("nn.Sequential MLP (0-based names, LayerNorm)", function()
    local c = fx.mlp
    local m = mlp("float64")
    m:load_state_dict(tensors(c.state))
    check("mlp", m(T(c.x)), T(c.out), 1e-12)
    assert.are.equal(T(c.state["0.weight"]):max():item(), m[1].weight:max():item())
  end)

  it("a PyTorch Sequential whose first module has no state (torchvision's Dropout-then-Linear classifier)", function()
    local w, b = ember.randn(3, 4), ember.randn(3)
    for _, first in ipairs { nn.Dropout(0.2), nn.Flatten() } do
      local m = nn.Sequential(first, nn.Linear(4, 3))
      m:load_state_dict({ ["1.weight"] = w, ["1.bias"] = b })   -- PyTorch's names: child 1 is the Linear
      assert.is_true(m[2].weight:equal(w))
      m:load_state_dict({ ["2.weight"] = b:view(3, 1):expand(3, 4), ["2.bias"] = w[1]:narrow(1, 1, 3) }) -- ember's
      assert.is_true(m[2].bias:equal(w[1]:narrow(1, 1, 3)))
    end
    -- nested: PyTorch's Sequential(Dropout, Sequential(Linear)) and Sequential(Sequential(Linear), ReLU)
    local nested = nn.Sequential(nn.Dropout(0.1), nn.Sequential(nn.Linear(4, 3)))
    nested:load_state_dict({ ["1.0.weight"] = w, ["1.0.bias"] = b })
    assert.is_true(nested[2][1].weight:equal(w))
    nested = nn.Sequential(nn.Sequential(nn.Linear(4, 3)), nn.ReLU())
    nested:load_state_dict({ ["0.0.weight"] = w, ["0.0.bias"] = b })
    assert.is_true(nested[1][1].bias:equal(b))
    -- ember's own names where both readings fit: ember's
    local m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    local sd = m:state_dict()
    local m2 = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    m2:load_state_dict(sd)
    assert.is_true(m2[1].weight:equal(m[1].weight) and m2[2].weight:equal(m[2].weight))
  end)

  it("a bfloat16 safetensors file into a float32 model (values exactly PyTorch's bfloat16)", function()
    local c = fx.mlp
    local sd = ember.load(FIX .. "interop_mlp_bf16.safetensors")
    assert.are.equal("bfloat16", sd["0.weight"].dtype)
    local m = mlp()
    m:load_state_dict(sd)
    assert.are.equal("float32", m[1].weight.dtype)
    check("bf16 weight", m[1].weight, T(c.state_bf16["0.weight"]), 0)
    check("bf16 into float32", m(T(c.x):float()), T(c.out_bf16), 1e-5)
  end)

  it("a float16 safetensors file (model.half()) reads as float32, exactly, and loads", function()
    local c = fx.mlp
    local sd = ember.load(FIX .. "interop_mlp_f16.safetensors")
    assert.are.equal("float32", sd["0.weight"].dtype)
    for k, v in pairs(c.state_f16) do check("f16 " .. k, sd[k], T(v), 0) end
    local m = mlp()
    m:load_state_dict(sd)
    check("f16 into float32", m(T(c.x):float()), T(c.out_f16), 1e-5)
  end)

  it("float16 special values and int32 read exactly (F16 as float32, I32 as int64)", function()
    -- a safetensors file written byte by byte
    local bits = { 0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xc000, 0x7bff, 0x3555, 0x7c00, 0xfc00, 0x7e00 }
    local want = { 0.0, -0.0, 2.0 ^ -24, 1023 * 2.0 ^ -24, 2.0 ^ -14, 1.0, -2.0, 65504.0, 1365 * 2.0 ^ -12,
      math.huge, -math.huge }
    local h = ('{"h":{"dtype":"F16","shape":[%d],"data_offsets":[0,%d]},'
      .. '"i":{"dtype":"I32","shape":[3],"data_offsets":[%d,%d]}}'):format(#bits, 2 * #bits, 2 * #bits, 2 * #bits + 12)
    local data = {}
    for _, b in ipairs(bits) do data[#data + 1] = string.pack("<I2", b) end
    data[#data + 1] = string.pack("<i4i4i4", 1, -2, 2147483647)
    local p = os.tmpname()
    local f = assert(io.open(p, "wb"))
    f:write(string.pack("<I8", #h), h, table.concat(data))
    f:close()
    local t = ember.load(p)
    os.remove(p)
    assert.are.equal("float32", t.h.dtype)
    local got = t.h:double():totable()
    for i, w in ipairs(want) do
      assert.are.equal(w, got[i], "element " .. i)
      assert.are.equal(1 / w, 1 / got[i], "sign of element " .. i)
    end
    assert.is_true(got[#bits] ~= got[#bits], "NaN stays NaN")
    assert.are.equal("int64", t.i.dtype)
    assert.are.same({ 1, -2, 2147483647 }, t.i:totable())
  end)

  it("a torch.save file: ember.load reads it (PyTorch's output again); the safetensors reader names it", function()
    local c = fx.mlp
    local m = mlp()
    m:load_state_dict(ember.load(FIX .. "interop_mlp.pt"))
    check("mlp from torch.save", m(T(c.x):float()), T(c.out):float(), 1e-5)
    raises_here(function() ember.checkpoint.load_tensors(FIX .. "interop_mlp.pt") end,
      "is a PyTorch torch.save file (a zip archive), not safetensors: ember.load(path) reads it")
  end)

  it("nn.Sequential CNN: Conv2d, BatchNorm2d's running statistics and num_batches_tracked", function()
    local c = fx.cnn
    local m = cnn("float64"):eval()
    m:load_state_dict(tensors(c.state))
    check("cnn", m(T(c.x)), T(c.out), 1e-10)
    assert.are.equal(3, m[2].num_batches_tracked:item())
    assert.are.equal("int64", m[2].num_batches_tracked.dtype)
    local f = cnn():eval()
    f:load_state_dict(ember.load(FIX .. "interop_cnn_f32.safetensors"))
    check("cnn float32 file", f(T(c.x):float()), T(c.out), 1e-5)
  end)

  it("a state without num_batches_tracked (older PyTorch) loads it as 0, as PyTorch does from a plain dict", function()
    local sd = tensors(fx.cnn.state)
    sd["1.num_batches_tracked"] = nil
    local m = cnn("float64"):eval()
    ember.no_grad(function() m[2].num_batches_tracked:fill_(5) end)
    m:load_state_dict(sd)
    assert.are.equal(0, m[2].num_batches_tracked:item())
    check("cnn", m(T(fx.cnn.x)), T(fx.cnn.out), 1e-10)
    for _, make in ipairs { function() return nn.BatchNorm1d(3) end,
      function() return nn.InstanceNorm2d(3, { track_running_stats = true }) end } do
      local bn = make()
      bn:load_state_dict({ running_mean = ember.ones(3), running_var = ember.ones(3),
        weight = bn.weight, bias = bn.bias })
      assert.is_true(bn.running_mean:equal(ember.ones(3)))
    end
    -- a scalar saved as [1] (PyTorch before 0.4) loads into the 0-d buffer, as PyTorch does
    sd["1.num_batches_tracked"] = ember.tensor({ 4 }, { dtype = "int64" })
    m:load_state_dict(sd)
    assert.are.equal(4, m[2].num_batches_tracked:item())
    -- without running statistics nothing is added (strict still names what is missing)
    raises_here(function() cnn():load_state_dict({ ["2.weight"] = ember.ones(4) }) end, "2.num_batches_tracked")
  end)

  it("LSTM and GRU in a module (PyTorch's weight_ih_l0, ..._reverse names)", function()
    local c = fx.recurrent
    local m = Recurrent("float64"):eval()
    assert.are.same(sorted_keys(c.state), sorted_keys(m:state_dict()))
    m:load_state_dict(tensors(c.state))
    check("recurrent", m(T(c.x)), T(c.out), 1e-10)
  end)

  it("models.ViT takes a torchvision VisionTransformer state dict (encoder_layer_0.ln_1, mlp.0, heads.head, ...)", function()
    local c = fx.vit
    local m = vit("float64"):eval()
    m:load_state_dict(tensors(c.state))
    check("vit", m(T(c.x)), T(c.out), 1e-10)
    -- torchvision before 0.13 named the MLP's linears linear_1 and linear_2
    local old = {}
    for k, v in pairs(tensors(c.state)) do
      old[(k:gsub("%.mlp%.0%.", ".mlp.linear_1."):gsub("%.mlp%.3%.", ".mlp.linear_2."))] = v
    end
    local m2 = vit("float64"):eval()
    m2:load_state_dict(old)
    check("vit, torchvision 0.12 names", m2(T(c.x)), T(c.out), 1e-10)
  end)

  it("nn.MultiheadAttention's in_proj_weight into nn.MultiHeadAttention, and q/k/v_proj_weight with kdim, vdim", function()
    for _, name in ipairs { "mha", "mha_kdim" } do
      local c = fx[name]
      local m = nn.MultiHeadAttention(D, 2, { dtype = "float64", kdim = c.k.shape[3], vdim = c.v.shape[3] })
      m:load_state_dict(tensors(c.state))
      check(name, m(T(c.q), T(c.k), T(c.v)), T(c.out), 1e-10)
    end
  end)
end)

describe("torch_state_dict: PyTorch's names and layouts back", function()
  local cases = {
    seq2seq = function() return Seq2Seq("float64") end,
    mlp = function() return mlp("float64") end,
    cnn = function() return cnn("float64") end,
    recurrent = function() return Recurrent("float64") end,
    mha = function() return nn.MultiHeadAttention(D, 2, { dtype = "float64" }) end,
    mha_kdim = function() return nn.MultiHeadAttention(D, 2, { dtype = "float64", kdim = 6, vdim = 5 }) end,
    vit = function() return vit("float64") end,
  }
  for name, make in pairs(cases) do
    it(name .. ": the same names, shapes and values as PyTorch's state dict", function()
      local c = fx[name]
      local m = make()
      m:load_state_dict(tensors(c.state))
      local sd = m:torch_state_dict()
      assert.are.same(sorted_keys(c.state), sorted_keys(sd))
      for k, v in pairs(c.state) do check(name .. " " .. k, sd[k], T(v), 0) end
    end)
  end

  it("models.Llama keeps Hugging Face's names (q_proj, k_proj, v_proj apart, also without GQA)", function()
    for _, kv in ipairs { 2, 1 } do
      local m = ember.models.Llama { vocab_size = 13, hidden_size = 8, intermediate_size = 16, num_hidden_layers = 1,
        num_attention_heads = 2, num_key_value_heads = kv }
      assert.are.same(sorted_keys(m:state_dict()), sorted_keys(m:torch_state_dict()))
    end
  end)

  it("survives a safetensors file (ember.save, then read back)", function()
    local m = mlp()
    local p = os.tmpname()
    ember.save(m:torch_state_dict(), p)
    local back = ember.load(p)
    local _, meta = require("ember.checkpoint").load_tensors(p)
    os.remove(p)
    assert.are.equal("pt", meta.format) -- as safetensors.torch.save_file; Hugging Face's loaders check it
    assert.are.same({ "0.bias", "0.weight", "1.bias", "1.weight", "3.bias", "3.weight" }, sorted_keys(back))
    local m2 = mlp()
    m2:load_state_dict(back)
    assert.is_true(m2[4].weight:equal(m[4].weight))
  end)
end)

describe("ember's weights in PyTorch (where /usr/bin/python3 has torch)", function()
  local has_torch = os.execute("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1")
  -- every parameter drawn anew (the initialisation leaves biases at zero, where a mixed-up layout would not show)
  local function randomize(m)
    ember.no_grad(function()
      for _, p in ipairs(m:parameters()) do p:copy_(ember.randn(p.shape, { dtype = p.dtype }) * 0.5) end
    end)
    return m
  end
  -- kind -> a fresh ember model and the fixture inputs it runs on
  local runs = {
    seq2seq = function()
      local c = fx.seq2seq
      local m = randomize(Seq2Seq("float64")):eval()
      return m, { src = T(c.src), tgt = T(c.tgt) }, m(ids(c.src), ids(c.tgt))
    end,
    cnn = function()
      local m = randomize(cnn("float64"))
      for _ = 1, 2 do m(ember.randn({ 4, 3, 6, 6 }, { dtype = "float64" }) * 2 + 1) end -- running statistics
      m:eval()
      return m, { x = T(fx.cnn.x) }, m(T(fx.cnn.x))
    end,
    recurrent = function()
      local m = randomize(Recurrent("float64")):eval()
      return m, { x = T(fx.recurrent.x) }, m(T(fx.recurrent.x))
    end,
    mha_kdim = function()
      local c = fx.mha_kdim
      local m = randomize(nn.MultiHeadAttention(D, 2, { dtype = "float64", kdim = 6, vdim = 5 }))
      return m, { q = T(c.q), k = T(c.k), v = T(c.v) }, m(T(c.q), T(c.k), T(c.v))
    end,
    vit = function()
      local m = randomize(vit("float64")):eval()
      return m, { x = T(fx.vit.x) }, m(T(fx.vit.x))
    end,
  }
  for _, kind in ipairs { "seq2seq", "cnn", "recurrent", "mha_kdim", "vit" } do
    it(kind .. ": torch_state_dict in a safetensors file loads strictly into PyTorch's model and gives ember's output", function()
      if not has_torch then return pending("no PyTorch in /usr/bin/python3") end
      local m, inputs, out = runs[kind]()
      inputs.out = out:detach()
      local state, io_path = os.tmpname(), os.tmpname()
      ember.save(m:torch_state_dict(), state)
      ember.save(inputs, io_path)
      local h = io.popen(("/usr/bin/python3 tests/interop_torch_check.py %s %q %q 2>&1"):format(kind, state, io_path))
      local said = h:read("a")
      h:close()
      os.remove(state)
      os.remove(io_path)
      local diff = tonumber(said:match("maxdiff (%S+)"))
      assert(diff, said)
      assert(diff <= 1e-10 * math.max(1, out:abs():max():item()), said)
    end)
  end
end)

describe("load_state_dict as PyTorch's", function()
  it("strict: an error listing the missing and the unexpected names (after the mapping)", function()
    local sd = tensors(fx.mlp.state)
    sd["3.bias"], sd["9.weight"] = nil, ember.zeros(1)
    local m = mlp("float64")
    raises_here(function() m:load_state_dict(sd) end, "missing 4.bias; unexpected 10.weight")
    raises_here(function() m:load_state_dict(sd, { strict = true }) end, "missing 4.bias")
  end)

  it("a DistributedDataParallel checkpoint ('module.' before every name) is named as one", function()
    local sd = {}
    for k, v in pairs(tensors(fx.mlp.state)) do sd["module." .. k] = v end
    raises_here(function() mlp("float64"):load_state_dict(sd) end,
      "the state dict's names start with 'module.' (a model wrapped in PyTorch's DistributedDataParallel")
    sd = {}
    for k, v in pairs(tensors(fx.seq2seq.state)) do sd["module." .. k] = v end
    raises_here(function() Seq2Seq("float64"):load_state_dict(sd) end, "take that prefix off each name")
    sd["module.extra"] = ember.zeros(1)
    local ok, err = pcall(Seq2Seq("float64").load_state_dict, Seq2Seq("float64"), sd)
    assert.is_false(ok)
    assert.is_nil(err:find("module.'", 1, true), "a name that is not the model's under 'module.': no hint")
  end)

  it("non-strict: loads what matches and returns both lists, printable; {strict = false} too", function()
    local sd = tensors(fx.mlp.state)
    sd["3.bias"], sd["extra"] = nil, ember.zeros(1)
    for _, strict in ipairs { false, { strict = false } } do
      local m = mlp("float64")
      local r, missing, unexpected = m:load_state_dict(sd, strict)
      assert.are.equal(m, r)
      assert.are.same({ "4.bias" }, { table.unpack(missing) })
      assert.are.same({ "extra" }, { table.unpack(unexpected) })
      assert.are.equal('{"4.bias"}', tostring(missing))
      assert.is_true(m[4].weight:equal(sd["3.weight"]))
    end
    raises_here(function() mlp():load_state_dict(sd, { strict = false, assign = true }) end, "unknown option 'assign'")
    raises_here(function() mlp():load_state_dict(sd, "no") end, "strict must be a boolean")
  end)

  it("checkpoint.load takes a PyTorch file for the model, and its errors say the user's line once", function()
    local checkpoint = require "ember.checkpoint"
    local m = mlp()
    checkpoint.load(FIX .. "interop_mlp_f16.safetensors", { model = m })
    check("loaded", m[1].weight, T(fx.mlp.state_f16["0.weight"]), 0)
    local wrong = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Tanh(), nn.Linear(8, 4))
    raises_here(function() checkpoint.load(FIX .. "interop_mlp_f16.safetensors", { model = wrong }) end,
      "interop_mlp_f16.safetensors': Sequential.load_state_dict: '4.bias' has shape [3] in the state dict, the "
      .. "module expects [4]; '4.weight' has shape [3, 8] in the state dict, the module expects [4, 8]")
  end)

  it("a shape mismatch names the key and both shapes, strict or not, and changes nothing", function()
    local m = mlp()
    local before = m[1].weight:clone()
    local sd = tensors(fx.mlp.state, "float32")
    sd["3.weight"] = ember.zeros(3, 7)
    for _, strict in ipairs { true, false } do
      raises_here(function() m:load_state_dict(sd, strict) end,
        "'4.weight' has shape [3, 7] in the state dict, the module expects [3, 8]")
    end
    assert.is_true(m[1].weight:equal(before))
    -- in_proj_weight of the wrong size, named by its whole key
    sd = tensors(fx.seq2seq.state)
    sd["transformer.encoder.layers.1.self_attn.in_proj_weight"] = ember.zeros(21, D, { dtype = "float64" })
    raises_here(function() Seq2Seq("float64"):load_state_dict(sd) end,
      "'transformer.encoder.layers.2.self_attn.in_proj_weight' has shape [21, 8] in the state dict")
  end)
end)
